"""``flambeau.hub``: models and weights published by others, as ``torch.hub``.

A hub repository is a directory (or a GitHub repository, downloaded as a zip archive) with a
``hubconf.py`` at its root: its public callables are the *entrypoints* that build models, and its
``dependencies`` list names the packages they need. :func:`load` imports that ``hubconf.py`` and
calls an entrypoint; :func:`load_state_dict_from_url` downloads a checkpoint once into the hub's
cache directory and loads it with :func:`flambeau.load`. The cache lives in :func:`get_dir`:
``$FLAMBEAU_HOME/hub``, else ``$XDG_CACHE_HOME/flambeau/hub``, else ``~/.cache/flambeau/hub``.

Downloads go through :mod:`urllib` (any URL it opens: ``https://``, ``file://``), into a temporary
file beside the destination that is renamed into place once complete (and its SHA-256 checked
against ``hash_prefix``), so an interrupted download never leaves a truncated file in the cache.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import urllib.request
import uuid
import warnings
import zipfile

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load", "load_state_dict_from_url", "set_dir",
           "tqdm"]

try:  # torch.hub re-exports tqdm when it is installed, and writes its own small bar otherwise
    from tqdm import tqdm
except ImportError:  # pragma: no cover - depends on the environment
    class tqdm:  # noqa: N801 - tqdm's name
        """A minimal progress bar with tqdm's constructor and ``update`` (what ``torch.hub`` falls back to)."""

        def __init__(self, iterable=None, total=None, disable=False, unit=None, unit_scale=False,
                     unit_divisor=1000, **kwargs):
            self.iterable, self.total, self.disable, self.n = iterable, total, disable, 0

        def __iter__(self):
            for item in self.iterable:
                yield item
                self.update(1)

        def update(self, n: int) -> None:
            if self.disable:
                return
            self.n += n
            if self.total is None:
                sys.stderr.write(f"\r{self.n:0.1f} bytes")
            else:
                sys.stderr.write(f"\r{100 * self.n / float(self.total):03.1f}%")
            sys.stderr.flush()

        def close(self) -> None:
            self.disable = True

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            if not self.disable:
                sys.stderr.write("\n")

_HUB_DIR: builtins.list = [None]  # set_dir's choice
_READ_CHUNK = 128 * 1024
_HASH_IN_NAME = re.compile(r"-([a-f0-9]*)\.")  # "resnet18-5c106cde.pth": the hash prefix torch's files carry
_TRUSTED_LIST = "trusted_list"


def get_dir() -> str:
    """The hub's cache directory (see the module docstring); :func:`set_dir` overrides it."""
    if _HUB_DIR[0] is not None:
        return _HUB_DIR[0]
    home = os.environ.get("FLAMBEAU_HOME")
    if home is None:
        home = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "flambeau")
    return os.path.join(os.path.expanduser(home), "hub")


def set_dir(d) -> None:
    """Use ``d`` as the hub's cache directory from now on."""
    _HUB_DIR[0] = os.path.expanduser(os.fspath(d))


def download_url_to_file(url: str, dst: str, hash_prefix: str | None = None, progress: bool = True) -> None:
    """Download ``url`` to the file ``dst``; with ``hash_prefix``, check that the file's SHA-256 starts with it.

    Raises RuntimeError (and leaves no file) when the hash does not match.
    """
    dst = os.path.expanduser(os.fspath(dst))
    directory = os.path.dirname(os.path.abspath(dst))
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(dst)}.{uuid.uuid4().hex}.partial")
    sha256 = hashlib.sha256() if hash_prefix is not None else None
    request = urllib.request.Request(url, headers={"User-Agent": "flambeau.hub"})
    try:
        with urllib.request.urlopen(request) as response, open(tmp, "wb") as out:
            length = response.headers.get("Content-Length") if hasattr(response, "headers") else None
            total = int(length) if length else None
            with tqdm(total=total, disable=not progress, unit="B", unit_scale=True, unit_divisor=1024) as bar:
                while chunk := response.read(_READ_CHUNK):
                    out.write(chunk)
                    if sha256 is not None:
                        sha256.update(chunk)
                    bar.update(len(chunk))
        if sha256 is not None:
            digest = sha256.hexdigest()
            if not digest.startswith(hash_prefix):
                raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest}")')
        shutil.move(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_state_dict_from_url(url: str, model_dir: str | None = None, map_location=None, progress: bool = True,
                             check_hash: bool = False, file_name: str | None = None, weights_only: bool = True):
    """The object saved at ``url`` (a state dict, usually), downloaded once into ``model_dir``
    (``<get_dir()>/checkpoints``) and read with :func:`flambeau.load` (which reads PyTorch's checkpoints
    too, weights only: ``weights_only=False`` is refused, as nothing in a file may run code here).

    With ``check_hash``, the file name must carry a SHA-256 prefix (``name-<hash>.ext``, torch's
    convention) that the download is checked against.
    """
    if not weights_only:
        raise ValueError("load_state_dict_from_url: flambeau loads weights only (weights_only=False is not "
                         "supported: it would let a downloaded file run code)")
    import flambeau

    model_dir = os.path.join(get_dir(), "checkpoints") if model_dir is None else os.path.expanduser(model_dir)
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or os.path.basename(urllib.request.urlparse(url).path)
    cached = os.path.join(model_dir, filename)
    if not os.path.exists(cached):
        sys.stderr.write(f'Downloading: "{url}" to {cached}\n')
        hash_prefix = None
        if check_hash:
            found = _HASH_IN_NAME.search(filename)
            hash_prefix = found.group(1) if found else None
        download_url_to_file(url, cached, hash_prefix, progress=progress)
    return flambeau.load(cached, map_location=map_location)


# --- repositories ----------------------------------------------------------------------------------
def _parse_repo(github: str) -> tuple[str, str, str]:
    owner_name, _, ref = github.partition(":")
    if "/" not in owner_name:
        raise ValueError(f'Invalid input: repo_or_dir should be of the form "repo_owner/repo_name[:ref]", '
                         f"got {github!r}")
    owner, name = owner_name.split("/", 1)
    return owner, name, ref or "main"


def _check_trust(owner: str, name: str, trust_repo) -> None:
    """torch's trust_repo: True records the repository as trusted; False or "check" ask (in a terminal)
    unless it was trusted before; None (torch's default today) warns that the repository is not checked."""
    path = os.path.join(get_dir(), _TRUSTED_LIST)
    trusted = set()
    if os.path.exists(path):
        with open(path) as f:
            trusted = {line.strip() for line in f if line.strip()}
    key = f"{owner}_{name}"
    if trust_repo is True or key in trusted:
        if key not in trusted:
            os.makedirs(get_dir(), exist_ok=True)
            with open(path, "a") as f:
                f.write(key + "\n")
        return
    if trust_repo is None:
        warnings.warn(f"You are about to download and run code from an untrusted repository ({owner}/{name}). "
                      "Pass trust_repo=True to trust it, or trust_repo='check' to be asked.", UserWarning,
                      stacklevel=4)
        return
    answer = builtins.input(f"The repository {owner}/{name} does not belong to the list of trusted repositories "
                            "and as such cannot be downloaded. Do you trust this repository and wish to add it to "
                            "the trusted list of repositories (y/N)?")
    if answer.strip().lower() not in ("y", "yes"):
        raise Exception("Untrusted repository.")
    os.makedirs(get_dir(), exist_ok=True)
    with open(path, "a") as f:
        f.write(key + "\n")


def _github_dir(github: str, force_reload: bool, trust_repo, verbose: bool) -> str:
    """The local directory of GitHub repository ``owner/name[:ref]``, downloaded as a zip archive if needed."""
    owner, name, ref = _parse_repo(github)
    _check_trust(owner, name, trust_repo)
    hub_dir = get_dir()
    target = os.path.join(hub_dir, f"{owner}_{name}_{ref.replace('/', '_')}")
    if os.path.exists(target) and not force_reload:
        if verbose:
            sys.stderr.write(f"Using cache found in {target}\n")
        return target
    os.makedirs(hub_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=hub_dir) as tmp:
        archive = os.path.join(tmp, "repo.zip")
        url = f"https://github.com/{owner}/{name}/zipball/{ref}"
        if verbose:
            sys.stderr.write(f'Downloading: "{url}" to {archive}\n')
        download_url_to_file(url, archive, progress=False)
        with zipfile.ZipFile(archive) as z:
            top = z.namelist()[0].split("/")[0]
            z.extractall(tmp)
        if os.path.exists(target):
            shutil.rmtree(target)
        shutil.move(os.path.join(tmp, top), target)
    return target


def _hubconf(repo_dir: str):
    """The repository's ``hubconf.py`` as a module, its ``dependencies`` checked."""
    path = os.path.join(repo_dir, "hubconf.py")
    if not os.path.exists(path):
        raise FileNotFoundError(f"Cannot find hubconf.py in {repo_dir}")
    spec = importlib.util.spec_from_file_location(f"hubconf_{uuid.uuid4().hex}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, repo_dir)  # hubconf imports its repository's own modules
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(repo_dir)
    missing = [d for d in getattr(module, "dependencies", []) if importlib.util.find_spec(d) is None]
    if missing:
        raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
    return module


def _repo_dir(repo_or_dir: str, source: str, force_reload: bool, trust_repo, verbose: bool) -> str:
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "local":
        return os.path.expanduser(repo_or_dir)
    return _github_dir(repo_or_dir, force_reload, trust_repo, verbose)


def _entrypoint(module, model: str):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    fn = getattr(module, model, None)
    if fn is None or not callable(fn):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return fn


def list(github: str, force_reload: bool = False, skip_validation: bool = False, trust_repo=None,  # noqa: A001
         verbose: bool = True) -> builtins.list:
    """The entrypoints (public callables of ``hubconf.py``) of GitHub repository ``owner/name[:ref]``."""
    module = _hubconf(_github_dir(github, force_reload, trust_repo, verbose))
    return [name for name, value in vars(module).items() if callable(value) and not name.startswith("_")]


def help(github: str, model: str, force_reload: bool = False, skip_validation: bool = False,  # noqa: A001
         trust_repo=None) -> str:
    """The docstring of entrypoint ``model`` of GitHub repository ``owner/name[:ref]``."""
    return _entrypoint(_hubconf(_github_dir(github, force_reload, trust_repo, True)), model).__doc__


def load(repo_or_dir: str, model: str, *args, source: str = "github", trust_repo=None, force_reload: bool = False,
         verbose: bool = True, skip_validation: bool = False, **kwargs):
    """Call entrypoint ``model`` of a hub repository with ``*args, **kwargs`` and return what it builds.

    Args:
        repo_or_dir: ``"owner/name[:ref]"`` (``source="github"``, ref defaults to ``main``) or a local
            directory holding ``hubconf.py`` (``source="local"``).
        model: the entrypoint's name.
        trust_repo: see ``torch.hub.load`` (True, False, ``"check"`` or None).
        force_reload: download the repository again even if it is cached.
    """
    source = source.lower()
    module = _hubconf(_repo_dir(repo_or_dir, source, force_reload, trust_repo, verbose))
    return _entrypoint(module, model)(*args, **kwargs)
