"""The example programs run and reach what their docstrings promise (run by ``nox -s tests``)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).parent


def load(name: str):
    """Import ``examples/<name>.py`` as a module (the examples are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_train_digits_reaches_97_percent(capsys):
    accuracy = load("train_digits").main([])
    out = capsys.readouterr().out
    assert accuracy >= 0.97
    assert "epoch  20/20" in out and "images/s" in out


def test_demo_throughput_leaves_out_the_first_epoch():
    # The first epoch of a fresh install compiles the kernels: 15 s here against 0.3 s for the others.
    throughput = load("train_digits").throughput
    assert throughput([15.0, 0.5, 0.5], [1000, 1000, 1000]).startswith("training throughput 2,000 images/s "
                                                                        "(epochs 2-3; the first took 15.0 s")
    assert throughput([2.0], [1000]) == "training throughput 500 images/s"


def test_listing1_custom_layer_learns(capsys):
    # The listing's model sees only the mean of each feature map: far from state of the art, but
    # well above chance (0.1) after a few hundred steps.
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        accuracy = load("listing1").main(["--steps", "300"])
    assert accuracy > 0.6


def test_gan_generator_moves_towards_the_data(capsys):
    # The generated images' per-pixel means get several times closer to the real digits' means.
    assert load("gan").main(["--steps", "1000"]) < 0.5


def test_ddp_digits_trains_on_two_ranks():
    # Starts itself through flambeau.distributed.run: 2 ranks, DDP with SyncBatchNorm, 3 epochs.
    pytest.importorskip("mpi4py", reason="needs flambeau-distributed's MPI")
    import subprocess

    done = subprocess.run([sys.executable, str(HERE / "ddp_digits.py"), "--epochs", "3", "--target", "0.9"],
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "epoch   3/3" in done.stdout and "on 2 ranks" in done.stdout, done.stdout
