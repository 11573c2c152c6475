"""Run public PyTorch example programs on flambeau with only their imports changed.

Usage::

    python examples/ported/run_ported.py                 # every program, on flambeau
    python examples/ported/run_ported.py --torch         # also each one, unmodified, on PyTorch
    python examples/ported/run_ported.py --only vae dcgan --show-diff

Each program (listed in ``PROGRAMS`` below and in README.md, with its source and licence) is read
from ``--sources`` (default ``examples/ported/build/sources``, a copy of the pytorch/examples files
named in README.md; ``build/`` is not committed), and the runner rewrites its ``import torch...``
and ``from torch... import`` lines to flambeau's (``import torch`` -> ``import flambeau as torch``,
``import torch.nn as nn`` -> ``import flambeau.nn as nn``, ``from torch.x import y`` -> ``from
flambeau.x import y``) — nothing else in the program changes; a ``torch`` package that raises
``ImportError`` comes first on the path of these runs, so an import the rewrite missed fails
instead of running on PyTorch. ``torchvision`` and ``gym`` resolve to
the small shims in ``_shims/`` (synthetic data, no network). Each program then runs in a fresh
temporary folder, in its own process, with the short command line given below and a timeout.

The report gives, per program: ran / FAILED / TIMEOUT, the time, and for a failure the first
error line (the exception the program died of). The exit status is 1 when a flambeau run fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
SHIMS = HERE / "_shims"
NO_TORCH = HERE / "_no_torch"  # first on the path of flambeau runs: `import torch` fails there
DEFAULT_SOURCES = HERE / "build" / "sources"


@dataclasses.dataclass
class Program:
    name: str
    script: str  # path in the pytorch/examples tree
    args: list[str]
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    before: list[str] = dataclasses.field(default_factory=list)  # scripts of the same folder run first
    mkdirs: list[str] = dataclasses.field(default_factory=list)  # folders the program expects to exist
    timeout: float = 300.0


# Command lines chosen for a run of seconds to a minute on a CPU: one epoch, small batches, small
# synthetic datasets (PORTED_DATASET_SIZE), a few episodes (PORTED_GYM_EPISODES).
PROGRAMS = [
    Program("mnist", "mnist/main.py",
            ["--epochs", "1", "--batch-size", "32", "--test-batch-size", "64", "--log-interval", "4"],
            env={"PORTED_DATASET_SIZE": "256"}),
    Program("reinforce", "reinforcement_learning/reinforce.py", ["--log-interval", "2"],
            env={"PORTED_GYM_API": "new", "PORTED_GYM_EPISODES": "6"}),
    Program("actor_critic", "reinforcement_learning/actor_critic.py", ["--log-interval", "2"],
            env={"PORTED_GYM_API": "old", "PORTED_GYM_EPISODES": "6"}),
    Program("vae", "vae/main.py", ["--epochs", "1", "--batch-size", "32", "--log-interval", "4"],
            env={"PORTED_DATASET_SIZE": "256"}, mkdirs=["results"]),
    Program("dcgan", "dcgan/main.py",
            ["--dataset", "fake", "--dry-run", "--batchSize", "8", "--workers", "0", "--ngf", "16", "--ndf", "16",
             "--manualSeed", "1", "--outf", "out"]),
    Program("time_sequence_prediction", "time_sequence_prediction/train.py", ["--steps", "1"],
            before=["generate_sine_wave.py"], timeout=400.0),
    Program("regression", "regression/main.py", [], timeout=120.0),
    Program("mnist_rnn", "mnist_rnn/main.py",
            ["--epochs", "1", "--batch-size", "32", "--test-batch-size", "64", "--log-interval", "4"],
            env={"PORTED_DATASET_SIZE": "256"}),
    Program("mnist_forward_forward", "mnist_forward_forward/main.py",
            ["--epochs", "20", "--train_size", "256", "--test_size", "64", "--log-interval", "5"],
            env={"PORTED_DATASET_SIZE": "256"}),
    Program("siamese_network", "siamese_network/main.py",
            ["--epochs", "1", "--batch-size", "16", "--test-batch-size", "32", "--dry-run", "--log-interval", "1"],
            env={"PORTED_DATASET_SIZE": "256"}),
    Program("vision_transformer", "vision_transformer/main.py",
            ["--dry-run", "--epochs", "1", "--img-size", "32", "--patch-size", "8", "--latent-size", "64",
             "--num-heads", "4", "--num-encoders", "2", "--batch-size", "4"],
            env={"PORTED_DATASET_SIZE": "64"}),
]

_IMPORT = re.compile(r"^(?P<indent>[ \t]*)import torch(?P<sub>(?:\.\w+)*)(?P<alias>[ \t]+as[ \t]+\w+)?[ \t]*(#.*)?$")
_FROM = re.compile(r"^(?P<indent>[ \t]*)from torch(?P<sub>(?:\.\w+)*)[ \t]+import\b")


def port_imports(source: str) -> str:
    """``source`` with its torch imports made flambeau's; every other line unchanged."""
    out = []
    for line in source.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        end = line[len(body):]
        m = _IMPORT.match(body)
        if m:
            indent, sub, alias = m["indent"], m["sub"], m["alias"]
            if alias:
                body = f"{indent}import flambeau{sub}{alias}"
            elif sub:  # `import torch.utils.data` binds `torch` too
                body = f"{indent}import flambeau{sub}; import flambeau as torch"
            else:
                body = f"{indent}import flambeau as torch"
        else:
            m = _FROM.match(body)
            if m:
                body = f"{m['indent']}from flambeau{m['sub']} import" + body[m.end():]
        out.append(body + end)
    return "".join(out)


def _first_error(output: str) -> str:
    """The exception line of the last traceback in ``output`` (or its last line), without terminal colours."""
    output = re.sub(r"\x1b\[[0-9;]*m", "", output)
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    if "Traceback (most recent call last):" in output:
        tail = output[output.rindex("Traceback (most recent call last):"):].splitlines()
        for ln in tail[1:]:
            if ln and not ln.startswith((" ", "\t", "Traceback")):
                return ln.strip()[:300]
    return (lines[-1] if lines else "(no output)")[:300]


@dataclasses.dataclass
class Result:
    program: str
    framework: str
    status: str  # "ran", "FAILED", "TIMEOUT", "MISSING"
    seconds: float
    error: str = ""


def run_one(prog: Program, sources: pathlib.Path, framework: str, show_diff: bool, verbose: bool) -> Result:
    script = sources / prog.script
    if not script.exists():
        return Result(prog.name, framework, "MISSING", 0.0, f"{script} not found (see README.md)")
    with tempfile.TemporaryDirectory(prefix=f"ported_{prog.name}_") as tmp:
        work = pathlib.Path(tmp)
        for py in script.parent.glob("*.py"):  # the program's sibling modules (model.py, data.py ...) too
            text = py.read_text(encoding="utf-8")
            ported = port_imports(text) if framework == "flambeau" else text
            if show_diff and ported != text and framework == "flambeau":
                changed = [(a, b) for a, b in zip(text.splitlines(), ported.splitlines()) if a != b]
                print(f"--- {prog.name}: {py.name}")
                for a, b in changed:
                    print(f"-   {a}\n+   {b}")
            (work / py.name).write_text(ported, encoding="utf-8")
        for folder in prog.mkdirs:
            (work / folder).mkdir(parents=True, exist_ok=True)
        path = [str(NO_TORCH)] if framework == "flambeau" else []
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([*path, str(SHIMS), os.environ.get("PYTHONPATH", "")]),
                   PORTED_FRAMEWORK=framework, MPLBACKEND="Agg", **prog.env)
        start = time.perf_counter()
        output = ""
        try:
            for step in [*([b] for b in prog.before), [script.name, *prog.args]]:
                done = subprocess.run([sys.executable, *step], cwd=work, env=env, capture_output=True, text=True,
                                      timeout=max(prog.timeout - (time.perf_counter() - start), 1),
                                      stdin=subprocess.DEVNULL)
                output += done.stdout + done.stderr
                if done.returncode != 0:
                    break
        except subprocess.TimeoutExpired as e:
            seconds = time.perf_counter() - start
            out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            if verbose:
                print(out[-3000:])
            return Result(prog.name, framework, "TIMEOUT", seconds, f"no exit within {prog.timeout:.0f} s")
        seconds = time.perf_counter() - start
        if verbose:
            print(f"===== {prog.name} on {framework}\n{output[-4000:]}")
        if done.returncode != 0:
            return Result(prog.name, framework, "FAILED", seconds, _first_error(output))
        return Result(prog.name, framework, "ran", seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=pathlib.Path, default=DEFAULT_SOURCES,
                        help="a pytorch/examples tree holding the programs (default: %(default)s)")
    parser.add_argument("--only", nargs="*", help="run only these programs")
    parser.add_argument("--torch", action="store_true", help="also run each program unmodified on PyTorch")
    parser.add_argument("--show-diff", action="store_true", help="print the lines the port changes")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each program's output")
    args = parser.parse_args(argv)
    unknown = set(args.only or ()) - {p.name for p in PROGRAMS}
    if unknown:
        parser.error(f"unknown programs {sorted(unknown)}; known: {[p.name for p in PROGRAMS]}")
    programs = [p for p in PROGRAMS if not args.only or p.name in args.only]
    frameworks = ["flambeau", "torch"] if args.torch else ["flambeau"]
    results = []
    for prog in programs:
        for fw in frameworks:
            r = run_one(prog, args.sources, fw, args.show_diff, args.verbose)
            results.append(r)
            print(f"{r.program:<26} {r.framework:<9} {r.status:<8} {r.seconds:7.1f} s  {r.error}", flush=True)
    ported = [r for r in results if r.framework == "flambeau"]
    ran = [r.program for r in ported if r.status == "ran"]
    print(f"\n{len(ran)} of {len(ported)} programs ran on flambeau: {', '.join(ran) or '-'}")
    if any(r.status == "MISSING" for r in results):
        print("Some sources are missing: see examples/ported/README.md for where to get them.")
    return 0 if len(ran) == len(ported) else 1


if __name__ == "__main__":
    sys.exit(main())
