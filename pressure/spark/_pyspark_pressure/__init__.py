"""Installed as the top-level package ``pyspark_pressure`` (see pyproject.toml).

When a session first uses a Python data source, PySpark imports every top-level
module whose name starts with ``pyspark_`` and registers its ``DefaultSource``:
so where pressure is installed from a wheel, ``format("pressure")`` works with no
``pressure.spark.register()`` call. (An editable install maps this package through
an import hook that PySpark's module scan does not see; call ``register()`` there.)
"""

from pressure.spark import PressureDataSource as DefaultSource

__all__ = ["DefaultSource"]
