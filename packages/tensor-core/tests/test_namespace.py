"""The ``flambeau`` namespace: a cheap import, and every distribution importable on its own.

``import flambeau`` must stay fast and compile nothing (numba is imported on first use only).
The flambeau distributions share the ``flambeau`` package: tensor-core ships ``flambeau/__init__.py``
(which extends ``__path__``), the others only their sub-package. Each wheel is built here and
installed with only the flambeau wheels it declares, in an interpreter that sees neither the
editable installs of this checkout nor the source tree, so an undeclared dependency or a stray
``flambeau/__init__.py`` fails here rather than on a user's machine.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest
import tomllib

REPO = pathlib.Path(__file__).resolve().parents[3]
PACKAGES = REPO / "packages"
# distribution folder -> modules it provides
MODULES = {
    "tensor-core": ["flambeau"],
    "autograd": ["flambeau.autograd"],
    "cuda-alloc": ["flambeau.cuda_alloc"],
    "multiproc": ["flambeau.multiprocessing"],
    "nn": ["flambeau.nn", "flambeau.optim"],
    "data": ["flambeau.data"],
    "distributed": ["flambeau.distributed"],
}
def _run(code: str, *args: str, isolated: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMBA_ENABLE_CUDASIM")}
    env["PYTHONNOUSERSITE"] = "1"
    cmd = [sys.executable, *(["-S"] if isolated else []), "-c", code, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/" if isolated else None, timeout=120)
    assert proc.returncode == 0, f"{' '.join(cmd[:2])} failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


IMPORT_PROBE = """
import json, sys, time
t0 = time.perf_counter()
import numpy
t1 = time.perf_counter()
import flambeau
t2 = time.perf_counter()
print(json.dumps({"numpy": t1 - t0, "flambeau": t2 - t1, "modules": sorted(sys.modules)}))
"""


def test_import_loads_no_numba_nor_upper_packages():
    """``import flambeau`` stays cheap by loading no numba, llvmlite, torch, scipy or cffi (each imported on
    first use) and none of the packages built on tensor-core. (How long the import takes is a benchmark's
    business, not a test's: a wall-clock budget here failed on a loaded machine with no change of code.)"""
    runs = [_run(IMPORT_PROBE)]
    loaded = runs[0]["modules"]
    heavy = [m for m in loaded if m.split(".")[0] in ("numba", "llvmlite", "torch", "scipy", "cffi")]
    assert not heavy, f"import flambeau loads {heavy[:5]}: import them on first use"
    assert not [m for m in loaded if m.startswith("flambeau.") and m.split(".")[1] in
                ("autograd", "nn", "optim", "data", "multiprocessing", "cuda_alloc")], \
        "tensor-core must not import the packages that build on it"


# --- every wheel on its own ----------------------------------------------------------------------
def _declared_flambeau_deps(package: str) -> list[str]:
    """``package`` and the flambeau packages it declares, transitively, dependencies first."""
    dist_to_dir = {f"flambeau-{name}": name for name in MODULES}
    meta = tomllib.loads((PACKAGES / package / "pyproject.toml").read_text())["project"]
    order: list[str] = []
    for req in meta.get("dependencies", []):
        dist = req.split(";")[0].split("[")[0]
        for sep in "<>=!~ ":
            dist = dist.split(sep)[0]
        if dist in dist_to_dir:
            order += [p for p in _declared_flambeau_deps(dist_to_dir[dist]) if p not in order]
    return order + [package]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, pathlib.Path]:
    if not (PACKAGES / "tensor-core" / "pyproject.toml").exists():
        pytest.skip("not run from a checkout of the monorepo")
    pytest.importorskip("hatchling", reason="building the wheels needs hatchling (a test dependency)")
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(out), *(str(PACKAGES / name) for name in MODULES)], check=True, timeout=300)
    found = {}
    for name in MODULES:
        (whl,) = out.glob(f"flambeau_{name.replace('-', '_')}-*.whl")
        found[name] = whl
    return found


@pytest.mark.slow
@pytest.mark.parametrize("package", list(MODULES))
def test_wheel_layout(wheels, package):
    names = zipfile.ZipFile(wheels[package]).namelist()
    inits = [n for n in names if n == "flambeau/__init__.py"]
    assert inits == (["flambeau/__init__.py"] if package == "tensor-core" else []), \
        f"only tensor-core may ship flambeau/__init__.py ({package} ships {inits})"
    for module in MODULES[package]:
        folder = module.replace(".", "/")
        assert f"{folder}/__init__.py" in names, f"{wheels[package].name} lacks {folder}/__init__.py"
        assert f"{folder}/py.typed" in names, f"{wheels[package].name} lacks {folder}/py.typed"
    stray = [n for n in names if "/tests/" in n or n.startswith("tests/")]
    assert not stray, f"tests shipped in the wheel: {stray[:3]}"


ISOLATED_PROBE = """
import importlib, importlib.util, json, sys
target, base, repo = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path[:] = [target] + [p for p in sys.path if "site-packages" not in p] + [base]
wanted, absent = json.loads(sys.argv[4]), json.loads(sys.argv[5])
files = {}
for name in wanted:
    files[name] = importlib.import_module(name).__file__
import flambeau
missing, hints = [], {}
for name in absent:  # an absent distribution's module: not found, and both spellings name it
    try:
        importlib.import_module(name)
        missing.append(name)
    except ModuleNotFoundError as error:
        hints[name] = [str(error)]
    try:
        getattr(flambeau, name.split(".")[1])
        missing.append(name)
    except AttributeError as error:
        hints[name].append(str(error))
if "flambeau.data" in absent:
    try:
        from flambeau.utils.data import DataLoader
        missing.append("flambeau.utils.data")
    except ModuleNotFoundError as error:
        hints["flambeau.utils.data"] = [str(error)]
else:
    from flambeau.utils.data import DataLoader
    assert DataLoader is sys.modules["flambeau.data"].DataLoader
from_repo = sorted(m.__name__ for m in list(sys.modules.values())
                   if (getattr(m, "__file__", None) or "").startswith(repo + "/packages"))
print(json.dumps({"files": files, "unexpected": missing, "from_repo": from_repo, "hints": hints,
                  "path": list(getattr(sys.modules.get("flambeau"), "__path__", []))}))
"""


@pytest.fixture(scope="module")
def third_party(tmp_path_factory) -> str:
    """The base environment's site-packages without flambeau: numpy, numba ... as symlinks.

    Editable installs of this checkout live in .pth files (not processed under ``-S``); a regular
    install would put a ``flambeau`` folder there, which must not leak into the probe either.
    """
    import numpy

    base = pathlib.Path(numpy.__file__).resolve().parent.parent
    out = tmp_path_factory.mktemp("third_party")
    for entry in base.iterdir():
        skip = entry.name.lower().startswith(("flambeau", "_editable_impl_", "__editable__"))
        if not skip and entry.suffix != ".pth":
            (out / entry.name).symlink_to(entry)
    return str(out)


@pytest.mark.slow
@pytest.mark.parametrize("package", list(MODULES))
def test_wheel_importable_alone(wheels, third_party, package, tmp_path):
    """``package`` installed with only its declared flambeau dependencies imports, from the wheels."""
    installed = _declared_flambeau_deps(package)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                    "--target", str(target), *(str(wheels[p]) for p in installed)], check=True, timeout=300)
    wanted = [m for p in installed for m in MODULES[p]]
    absent = [m for p, mods in MODULES.items() if p not in installed for m in mods if m != "flambeau"]
    result = _run(ISOLATED_PROBE, str(target), third_party, str(REPO), json.dumps(wanted), json.dumps(absent),
                  isolated=True)
    for name, file in result["files"].items():
        assert file and file.startswith(str(target)), f"{name} imported from {file}, not from the wheel"
    assert not result["unexpected"], f"importable without being installed: {result['unexpected']}"
    assert not result["from_repo"], f"modules leaked in from the checkout: {result['from_repo']}"
    assert all(p.startswith(str(target)) for p in result["path"]), result["path"]
    distribution = {m: f"flambeau-{p}" for p, mods in MODULES.items() for m in mods}
    distribution["flambeau.utils.data"] = "flambeau-data"
    for name, messages in result["hints"].items() if "tensor-core" in installed else ():  # its finders give them
        for message in messages:  # `import flambeau.nn` and `fl.nn` both say what to install
            assert f"pip install {distribution[name]}" in message, (name, message)
