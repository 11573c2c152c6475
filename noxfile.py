"""Developer and CI tasks of the flambeau monorepo.

    nox -s tests   every package's tests, then the CUDA kernels under numba's simulator (CI runs this)
    nox -s demo    examples/train_digits.py: a small CNN trained on real handwritten digits
    nox -s docs    the sphinx site, warnings as errors (docs/_build/html)
    nox -s bench   benchmarks/*.py side by side with PyTorch; updates benchmarks/RESULTS.md
    nox -s paper   the PyTorch paper's Table 1, ablations and Figures 1-2 for flambeau (docs/paper/)
    nox -s lint    ruff
    nox -s build   wheel and sdist of every package; each wheel installed alone and imported

Every session builds its virtualenv from scratch with the interpreter that runs nox, so a fresh
clone needs nothing but ``python3 -m pip install nox``.
"""

from __future__ import annotations

import glob
import os
import pathlib
import shutil
import sys
import time

import nox
import tomllib

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = False
nox.options.error_on_external_run = True

ROOT = pathlib.Path(__file__).parent
# Dependency order: a package comes after every flambeau package it depends on.
PACKAGES = ["tensor-core", "autograd", "cuda-alloc", "multiproc", "nn", "data", "distributed"]
EDITABLE = [arg for name in PACKAGES for arg in ("-e", f"packages/{name}")]
TORCH = "torch==2.13.0"  # reference implementation for tests and benchmarks, never a library dependency
TEST_DEPS = ["pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6", TORCH, "numba-cuda[cu12]", "scikit-learn",
             "hatchling>=1.21", "safetensors>=0.8"]
# The CUDA tiers' tests, run in a pytest process of their own under numba's simulator (DESIGN.md "Execution").
CUDA_TESTS = {"tensor-core": "packages/tensor-core/tests/cuda", "nn": "packages/nn/tests/cuda"}
# Linters are pinned: a new ruff release adds rules and would turn lint red with no change of ours.
LINT_DEPS = ["ruff==0.17.6"]


def flambeau_dependencies(package: str) -> list[str]:
    """The flambeau packages ``package`` declares, transitively, in dependency order (itself last)."""
    by_dist = {f"flambeau-{name}": name for name in PACKAGES}
    meta = tomllib.loads((ROOT / "packages" / package / "pyproject.toml").read_text())["project"]
    order: list[str] = []
    for requirement in meta.get("dependencies", []):
        dist = requirement.split(";")[0].split("[")[0]
        for sep in "<>=!~ ":
            dist = dist.split(sep)[0]
        if dist in by_dist:
            order += [p for p in flambeau_dependencies(by_dist[dist]) if p not in order]
    return order + [package]


@nox.session
def tests(session: nox.Session) -> None:
    """All packages installed editable; pytest over packages/*/tests, then the CUDA simulator tier."""
    session.install(*EDITABLE, *TEST_DEPS)
    # One pytest process per package: each package's tests/ is its own world (its conftest.py is the
    # module `conftest` its tests may import, as when the package is tested alone by tox), and a
    # failure in one package does not hide the results of the others.
    runs = [([f"packages/{name}/tests"] + ([f"--ignore={CUDA_TESTS[name]}"] if name in CUDA_TESTS else []), {})
            for name in PACKAGES]
    runs.append((["examples"], {}))  # the example programs, which use every package
    runs.append((list(CUDA_TESTS.values()), {"NUMBA_ENABLE_CUDASIM": "1"}))
    # With a selection such as `-- -k matmul` some packages have nothing to run (pytest's exit code 5).
    success = [0, 5] if session.posargs else [0]
    failed, took = [], []
    for args, env in runs:
        start = time.perf_counter()
        try:
            session.run("pytest", "-q", "-ra", *args, *session.posargs, env=env, success_codes=success)
        except nox.command.CommandFailed:
            failed.append(args[0])
        took.append(f"{args[0]} {time.perf_counter() - start:.0f} s")
    session.log("pytest wall times: " + ", ".join(took))
    if failed:
        session.error(f"tests failed in: {', '.join(failed)}")


@nox.session
def demo(session: nox.Session) -> None:
    """A small CNN trained on the handwritten digits shipped in flambeau-data (examples/train_digits.py)."""
    session.install(*EDITABLE)
    session.run("python", "examples/train_digits.py", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """The sphinx site with warnings as errors; the operator reference is generated from the table."""
    session.install(*EDITABLE, "sphinx>=7")
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """benchmarks/*.py side by side with PyTorch on 2 threads; each updates its section of benchmarks/RESULTS.md.

    ``nox -s bench -- ops autograd --quick``: names pick scripts, options go to each picked script.
    """
    session.install(*EDITABLE, TORCH)
    names = [a for a in session.posargs if not a.startswith("-")]
    options = [a for a in session.posargs if a.startswith("-")]
    scripts = sorted(p for p in glob.glob("benchmarks/*.py") if not os.path.basename(p).startswith("_"))
    if names:
        scripts = [p for p in scripts if os.path.basename(p)[:-3] in names]
        if not scripts:
            session.error(f"no benchmarks/<name>.py for {names}")
    for script in scripts:
        session.run("python", script, *options)


@nox.session
def paper(session: nox.Session) -> None:
    """The PyTorch paper's evaluation for flambeau: Table 1, the ablations, Figures 1 and 2 (docs/paper/).

    ``nox -s paper -- --quick``: options go to each script. matplotlib draws the figures; it is a
    dependency of this session only, not of any package.
    """
    session.install(*EDITABLE, TORCH, "matplotlib")
    for script in ("table1.py", "ablations.py", "figure1.py", "figure2.py"):
        session.run("python", f"benchmarks/paper/{script}", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole repository (configuration: ruff.toml); CI runs it before the tests."""
    session.install(*LINT_DEPS)
    session.run("ruff", "check", ".")


@nox.session
def build(session: nox.Session) -> None:
    """Wheel and sdist of every package; each wheel installed alone in a fresh venv and imported.

    A wheel gets only the flambeau wheels it declares (through ``--find-links``), so an undeclared
    dependency fails here and not on a user's machine.
    """
    session.install("build", "virtualenv")
    dist = pathlib.Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    for name in PACKAGES:
        session.run("python", "-m", "build", "--outdir", str(dist), f"packages/{name}")
    modules = {"tensor-core": "flambeau", "autograd": "flambeau.autograd", "cuda-alloc": "flambeau.cuda_alloc",
               "multiproc": "flambeau.multiprocessing", "nn": "flambeau.nn, flambeau.optim", "data": "flambeau.data",
               "distributed": "flambeau.distributed"}
    for name in PACKAGES:
        dist_name = "flambeau_" + name.replace("-", "_")
        (wheel,) = dist.glob(f"{dist_name}-*.whl")
        venv = dist.parent / f"venv-{name}"
        session.run("python", "-m", "virtualenv", "--clear", "-q", str(venv))
        python = str(venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python"))
        session.run(python, "-m", "pip", "install", "-q", "--find-links", str(dist), str(wheel), external=True)
        installed = [f"flambeau-{p}" for p in flambeau_dependencies(name)]
        session.run(python, "-c",
                    f"import {modules[name]}; import importlib.metadata as m; "
                    f"got = sorted(d.metadata['Name'] for d in m.distributions() "
                    f"if d.metadata['Name'].startswith('flambeau')); "
                    f"assert got == {sorted(installed)!r}, got; print('{name}: imported with', got)",
                    external=True)
