"""What an index user gets: the wheel and the sdist carry the right files, ``import pressure``
stays free of the benchmark harness and the test-only helpers, a missing extra is named, and
the executor examples run as a newcomer runs them (no virtualenv activated)."""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import re
import runpy
import signal
import stat
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# the benchmark harness (pressure.bench.*), the test-only helpers (pressure.testing.*; once
# pressure.server) and the Spark data source, the only part that imports pyspark
NOT_AT_RUNTIME = ("pressure.bench", "pressure.server", "pressure.testing", "pressure.spark")


def _python(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter (this one), from the project's root."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, check=False)


# -- the runtime import path ------------------------------------------------------------


def test_import_pressure_loads_no_benchmark_test_helper_or_spark() -> None:
    """``import pressure``, and the parts it loads on first use (the executor, its worker,
    ``pressure.multiprocessing``), import no benchmark, test-server or Spark module."""
    out = _python("""
        import json, sys
        import pressure
        pressure.Queue, pressure.SimpleQueue, pressure.LifoQueue, pressure.PriorityQueue
        pressure.Executor, pressure.ExecutorStatistics, pressure.multiprocessing
        import pressure.executor.worker
        print(json.dumps(sorted(sys.modules)))
    """)
    assert out.returncode == 0, out.stderr
    modules = json.loads(out.stdout)
    assert "pressure.executor" in modules and "pressure.multiprocessing" in modules  # loaded
    assert [m for m in modules if m.startswith(NOT_AT_RUNTIME)] == []
    assert [m for m in modules if m.split(".")[0] in ("pyspark", "pytest", "fakeredis")] == []


def test_the_worker_command_loads_no_benchmark() -> None:
    """``python -m pressure worker`` loads the worker's modules only, never the benchmark."""
    out = _python("""
        import contextlib, io, json, sys
        from pressure.__main__ import main
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["worker", "--help"]) == 0
        print(json.dumps(sorted(sys.modules)))
    """)
    assert out.returncode == 0, out.stderr
    modules = json.loads(out.stdout)
    assert "pressure.executor.worker" in modules
    assert [m for m in modules if m.startswith("pressure.bench")] == []


# -- the hiredis extra ----------------------------------------------------------------------


def test_the_hiredis_extra_asks_for_the_hiredis_that_redis_py_uses() -> None:
    """``pip install 'pressure-queue[hiredis]'`` installs redis-py's own hiredis extra, whose
    pin follows the redis-py installed. A bare ``hiredis`` requirement let pip keep a hiredis
    older than the one redis-py accepts (3.2 since redis-py 6.2), which redis-py then ignores
    without a word. The test extra installs it too: the suite runs with it, as users do."""
    requires = importlib.metadata.requires("pressure-queue") or []
    extra = [r.split(";")[0].replace(" ", "") for r in requires if re.search(r"""extra *== *.hiredis.""", r)]
    assert extra and all(r.startswith("redis[hiredis]") for r in extra), extra
    import redis.utils
    assert redis.utils.HIREDIS_AVAILABLE, "the test extra installs redis[hiredis]: redis-py does not use it here"


# -- a missing extra ----------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["pyspark", "pyspark.sql.datasource"])
def test_spark_without_pyspark_names_the_extra(missing: str) -> None:
    """With no PySpark (or one older than 4.0, which has no ``pyspark.sql.datasource``),
    ``import pressure.spark`` (and the top-level ``pyspark_pressure``) raise an ImportError
    that names the ``spark`` extra and how to install it."""
    for module in ("pressure.spark", "pyspark_pressure"):
        out = _python(f"""
            import importlib, sys
            sys.modules[{missing!r}] = None  # makes importing it raise ModuleNotFoundError
            try:
                importlib.import_module({module!r})
            except ImportError as exc:
                print(type(exc).__name__, exc, sep=": ")
        """)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("ModuleNotFoundError: pressure.spark needs"), out.stdout
        assert "pip install 'pressure-queue[spark]'" in out.stdout, out.stdout


# -- the executor examples, as a newcomer runs them ---------------------------------------


def _no_venv_env(**extra: str) -> dict[str, str]:
    """The environment of a shell where no virtualenv is active (and PYTHON is not set)."""
    venv_bins = {str(Path(sys.executable).parent)}
    if "VIRTUAL_ENV" in os.environ:
        venv_bins.add(str(Path(os.environ["VIRTUAL_ENV"]) / "bin"))
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p not in venv_bins]
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHON", "PYTHONHOME", "PYTHONPATH", "PRESSURE_HOSTNAME",
                        "EXECUTOR_NAME")}
    return {**env, "PATH": os.pathsep.join(path), **extra}


@pytest.mark.slow
def test_two_hosts_script_finds_the_project_venv(url: str, r: redis.Redis, prefix: str) -> None:
    """``sh examples/executor_two_hosts.sh`` right after the README's setup, with the venv not
    activated: it runs its workers and the example with the project's ``.venv`` interpreter."""
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv in the project: the README's setup command makes it")
    proc = subprocess.Popen(["sh", str(EXAMPLES / "executor_two_hosts.sh")],
                            env=_no_venv_env(REDIS_URL=url, PRESSURE_PREFIX=prefix),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        leftovers = r.keys(f"{prefix}:*")
        if leftovers:
            r.delete(*leftovers)  # a named executor's queue outlives it, by design
    assert proc.returncode == 0, stdout + stderr
    settings = runpy.run_path(str(EXAMPLES / "executor_before.py"))
    chunks = math.ceil(settings["LIMIT"] / settings["CHUNK"])
    summary, by_host = stdout.splitlines()
    assert summary.startswith(f"below {settings['LIMIT']}: ") and summary.endswith(f"{chunks} chunks")
    counts = {host: int(n) for host, n in
              (item.rsplit(" ", 1) for item in by_host.removeprefix("chunks by host: ").split(", "))}
    assert set(counts) <= {"host-a", "host-b"} and sum(counts.values()) == chunks, counts


def test_two_hosts_script_says_how_when_no_python_has_pressure(tmp_path: Path) -> None:
    """Where no interpreter it finds can import pressure, the script stops at once and says how
    to get one, instead of starting workers that die on an ImportError."""
    (tmp_path / "examples").mkdir()
    script = tmp_path / "examples" / "executor_two_hosts.sh"
    script.write_bytes((EXAMPLES / "executor_two_hosts.sh").read_bytes())
    fake = tmp_path / "bin" / "python3"  # a python3 on PATH without pressure
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = _no_venv_env()
    env["PATH"] = os.pathsep.join([str(fake.parent), "/usr/bin", "/bin"])
    out = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode != 0
    assert "cannot import pressure" in out.stderr and "PYTHON=" in out.stderr, out.stderr


# -- the README on an index page -----------------------------------------------------------


def test_readme_links_work_on_an_index_page() -> None:
    """An index renders README.md with no repository around it: a relative link there is dead
    (files are named in code spans instead), while in-page anchors work and must name a heading."""
    text = re.sub(r"^```.*?^```", "", (ROOT / "README.md").read_text("utf-8"), flags=re.S | re.M)
    targets = re.findall(r"\]\(([^)\s]*)\)", re.sub(r"`[^`\n]*`", "", text))
    assert targets and [t for t in targets if not t.startswith(("#", "https://", "http://"))] == []
    # GitHub's and PyPI's heading ids: lower case, punctuation dropped, spaces to hyphens
    headings = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    assert {t[1:] for t in targets if t.startswith("#")} <= headings


# -- the metadata ---------------------------------------------------------------------------


def test_the_metadata_names_its_authors_and_no_made_up_address() -> None:
    """An index shows the authors; it would show a guessed URL as a dead link, so none is
    given until the project has a public site (pyproject.toml says which to add then)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["authors"] == [{"name": "pressure maintainers"}]
    assert "urls" not in project
    assert all("email" not in author for author in project["authors"])


# -- the distributions ----------------------------------------------------------------------


def _files_under(*dirs: str) -> set[str]:
    return {str(p.relative_to(ROOT)) for d in dirs for p in (ROOT / d).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


@pytest.mark.slow
def test_wheel_and_sdist_carry_what_they_need(tmp_path: Path) -> None:
    """``python -m build``: no setuptools warning; the wheel has the LICENSE, every file of the
    package (modules, subpackages, Lua scripts, ``py.typed``) and exactly the top-level packages
    ``pressure`` and ``pyspark_pressure``; the sdist has the LICENSE, the README, the
    documentation's sources and everything its tests and examples need."""
    out = subprocess.run([sys.executable, "-m", "build", "--outdir", str(tmp_path), str(ROOT)],
                         capture_output=True, text=True, timeout=600, check=False)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    noise = ("byte-compiling is disabled",  # PYTHONDONTWRITEBYTECODE
             "no previously-included files matching")  # MANIFEST.in's excludes, with no match
    warnings = [line for line in log.splitlines()
                if "warning" in line.lower() and not any(n in line for n in noise)]
    assert warnings == [], log

    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        headers = whl.read(metadata).decode().split("\n\n", 1)[0].splitlines()
    dist_info = metadata.rsplit("/", 1)[0]
    assert {n.split("/")[0] for n in names} == {"pressure", "pyspark_pressure", dist_info}
    assert f"{dist_info}/licenses/LICENSE" in names
    assert {"License-Expression: MIT", "License-File: LICENSE", "Author: pressure maintainers"} <= set(headers)
    assert not [h for h in headers if h.startswith(("Project-URL", "Home-page", "Author-email"))]
    # every module, subpackage, Lua script and py.typed of the source tree (a package left out
    # of pyproject's explicit list would be missing here)
    source = {f.replace("pressure/spark/_pyspark_pressure/", "pyspark_pressure/", 1)
              for f in _files_under("pressure")}
    assert source <= names, sorted(source - names)

    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        top = sdist.name.removesuffix(".tar.gz")
        members = {n.removeprefix(f"{top}/") for n in tar.getnames()}
    needed = _files_under("tests", "compat", "examples", "pressure/lua", "pressure/bench")
    # the documentation's sources, which tests read (a site built in docs/site is left out)
    needed |= {f for f in _files_under("docs") if not f.startswith("docs/site/")}
    assert "docs/mkdocs.yml" in needed
    assert needed | {"LICENSE", "README.md", "pyproject.toml"} <= members, sorted(needed - members)
    assert not [n for n in members if "__pycache__" in n or n.endswith(".pyc")]
