"""ops.py benchmarks of the activation operators and of nn.Module call overhead.

Rows: the new activation operators (forward, and forward+backward) on 1M float32 elements, gelu on
the GPT MLP activation of benchmarks/train.py (2048x512), the nn.Linear layer 128x784 -> 1024
(forward, and forward+backward), and the per-call Python overhead of ``Module.__call__`` and
``Module.__getattr__`` against torch's.

    python benchmarks/_bench_act.py            # this family alone (3 quick repeats)
    python benchmarks/ops.py --quick           # with every other operator benchmark
"""

from __future__ import annotations

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import numpy as np

import flambeau as fl


def _activations(r, torch, n: int = 1_000_000) -> None:
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(n, dtype=np.float32)
    x = fl.from_numpy(x_np)
    tx = torch.from_numpy(x_np) if torch else None
    F = torch.nn.functional if torch else None
    size = f"{n:,} float32"
    cases = [
        ("leaky_relu", lambda a: fl.leaky_relu(a, 0.01), lambda a: F.leaky_relu(a, 0.01)),
        ("elu", lambda a: fl.elu(a), lambda a: F.elu(a)),
        ("selu", lambda a: fl.selu(a), lambda a: F.selu(a)),
        ("hardtanh", lambda a: fl.hardtanh(a), lambda a: F.hardtanh(a)),
        ("mish", lambda a: fl.mish(a), lambda a: F.mish(a)),
        ("hardswish", lambda a: fl.hardswish(a), lambda a: F.hardswish(a)),
        ("hardsigmoid", lambda a: fl.hardsigmoid(a), lambda a: F.hardsigmoid(a)),
        ("log_sigmoid", lambda a: fl.log_sigmoid(a), lambda a: F.logsigmoid(a)),
        ("silu", lambda a: fl.silu(a), lambda a: F.silu(a)),
    ]
    for name, f_fl, f_th in cases:
        r.compare(name, size, lambda f=f_fl: f(x), (lambda f=f_th: f(tx)) if torch else None)
    xg = fl.from_numpy(x_np.copy()).requires_grad_()
    txg = torch.from_numpy(x_np.copy()).requires_grad_() if torch else None
    for name, f_fl, f_th in [c for c in cases if c[0] in ("leaky_relu", "elu", "mish", "hardswish", "silu")]:
        def fb_fl(f=f_fl):
            xg.grad = None
            f(xg).sum().backward()

        def fb_th(f=f_th):
            txg.grad = None
            f(txg).sum().backward()

        r.compare(f"{name} fwd+bwd", size, fb_fl, fb_th if torch else None)


def _gelu(r, torch) -> None:
    """gelu (both formulas) on the MLP activation of benchmarks/train.py's GPT: (2048, 512) float32."""
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((2048, 512), dtype=np.float32)
    g_np = rng.standard_normal((2048, 512), dtype=np.float32)
    x, g = fl.from_numpy(x_np), fl.from_numpy(g_np)
    xg = fl.from_numpy(x_np.copy()).requires_grad_()
    if torch:
        F = torch.nn.functional
        tx, tg = torch.from_numpy(x_np), torch.from_numpy(g_np)
        txg = torch.from_numpy(x_np.copy()).requires_grad_()
    size = "2048x512 float32"
    for approx in ("none", "tanh"):
        r.compare(f"gelu({approx})", size, lambda a=approx: fl.gelu(x, approximate=a),
                  (lambda a=approx: F.gelu(tx, approximate=a)) if torch else None)

        def fb_fl(a=approx):
            xg.grad = None
            fl.gelu(xg, approximate=a).backward(g)

        def fb_th(a=approx):
            txg.grad = None
            F.gelu(txg, approximate=a).backward(tg)

        r.compare(f"gelu({approx}) fwd+bwd", size, fb_fl, fb_th if torch else None)


def _linear(r, torch) -> None:
    import flambeau.nn as nn

    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((128, 784), dtype=np.float32)
    lin = nn.Linear(784, 1024)
    x = fl.from_numpy(x_np)
    size = "128x784 -> 1024 float32"
    if torch:
        tlin = torch.nn.Linear(784, 1024)
        with torch.no_grad():
            tlin.weight.copy_(torch.from_numpy(lin.weight.detach().numpy()))
            tlin.bias.copy_(torch.from_numpy(lin.bias.detach().numpy()))
        tx = torch.from_numpy(x_np)
    r.compare("Linear forward", size, lambda: lin(x), (lambda: tlin(tx)) if torch else None)

    def fb_fl():
        lin.weight.grad = lin.bias.grad = None
        lin(x).sum().backward()

    def fb_th():
        tlin.weight.grad = tlin.bias.grad = None
        tlin(tx).sum().backward()

    r.compare("Linear fwd+bwd", size, fb_fl, fb_th if torch else None)


def _module_overhead(r, torch) -> None:
    import flambeau.nn as nn

    ident = nn.Identity()
    x = fl.ones(1)
    lin = nn.Linear(2, 2)
    if torch:
        tident = torch.nn.Identity()
        tx = torch.ones(1)
        tlin = torch.nn.Linear(2, 2)
    r.compare("Module.__call__ (Identity)", "overhead", lambda: ident(x), (lambda: tident(tx)) if torch else None)
    r.compare("Module.__getattr__ (.weight)", "overhead", lambda: lin.weight, (lambda: tlin.weight) if torch else None)
    seq = nn.Sequential(*[nn.Identity() for _ in range(10)])
    tseq = torch.nn.Sequential(*[torch.nn.Identity() for _ in range(10)]) if torch else None
    r.compare("Sequential of 10 Identity", "overhead", lambda: seq(x), (lambda: tseq(tx)) if torch else None)
    xs = fl.ones(2, 2)
    txs = torch.ones(2, 2) if torch else None
    r.compare("Linear(2, 2) call", "2x2 float32", lambda: lin(xs), (lambda: tlin(txs)) if torch else None)


def run(r, torch) -> None:
    """Add this family's comparisons to the report ``r`` (``torch`` is None when not installed)."""
    _activations(r, torch)
    _gelu(r, torch)
    _linear(r, torch)
    _module_overhead(r, torch)


if __name__ == "__main__":
    report = _harness.Report("act", "Activations and nn.Module overhead (benchmarks/_bench_act.py)", repeat=3,
                             target=0.01)
    report.header()
    run(report, report.torch)
