"""Run differential scenarios against the stdlib of *this* interpreter; print one JSON line each.

Usage::

    python3.13 compat/stdlib_runner.py [scenario names...]   # no names: every scenario

compat/test_differential.py uses it for the stdlib side of scenarios the
running interpreter cannot host (``queue.ShutDown`` needs Python 3.13+). It
needs only the standard library: compat/scenarios.py is imported from this
file's own directory, never through the ``compat`` package (whose conftest
needs pytest, redis and pressure). Each line is
``{"scenario": name, "outcome": "passed" | "failed" | "error" | "skipped",
"detail": text, "python": version}``; the exit status is 0 whenever every
requested name was known.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from types import ModuleType

__all__ = ["main"]


def _load_scenarios() -> ModuleType:
    """Import compat/scenarios.py by path (its directory first on sys.path, so that spawned
    children find the same module under the same name)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    return importlib.import_module("scenarios")


def _result(name: str, outcome: str, detail: str) -> str:
    return json.dumps({"scenario": name, "outcome": outcome, "detail": detail,
                       "python": sys.version.split()[0]})


def main(argv: list[str]) -> int:
    scenarios = _load_scenarios()
    names = argv or list(scenarios.SCENARIOS)
    unknown = [name for name in names if name not in scenarios.SCENARIOS]
    if unknown:
        print(f"unknown scenarios: {', '.join(unknown)}", file=sys.stderr)
        return 2
    for name in names:
        item = scenarios.SCENARIOS[name]
        impl = scenarios.stdlib_impl()
        reason = scenarios.unavailable(impl, item)
        if reason is not None:
            line = _result(name, "skipped", reason)
        else:
            try:
                scenarios.run(item, impl)
            except AssertionError as exc:
                line = _result(name, "failed", f"{exc!r}\n{traceback.format_exc()}")
            except Exception as exc:  # noqa: BLE001 - reported, not hidden
                line = _result(name, "error", f"{exc!r}\n{traceback.format_exc()}")
            else:
                line = _result(name, "passed", "")
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
