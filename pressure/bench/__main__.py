"""``python -m pressure.bench``: the benchmark on its own, as ``python -m pressure bench``."""

import sys

from . import run

sys.exit(run())
