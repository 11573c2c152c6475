"""ops.py benchmarks of the normalisation and loss operators, flambeau against torch (2 threads, float32).

Rows, forward and forward+backward: batch_norm (training) on 32x64x32x32 (the ResNet-18 layer
shape), layer_norm on 64x128x512, group_norm with 32 groups on 16x256x16x16, cross_entropy on
128x10 and 256x10000, nll_loss on 256x10000, mse_loss and binary_cross_entropy_with_logits on 1M
elements. Gradients are reset to None before each backward (as ``zero_grad`` does).

    python benchmarks/_bench_norm.py           # this family alone (3 quick repeats)
    python benchmarks/ops.py --quick           # with every other operator benchmark
"""

from __future__ import annotations

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import numpy as np

import flambeau as fl


def _pair(arrays, torch, grad=()):
    """flambeau and torch tensors over copies of ``arrays``; those at positions ``grad`` require grad."""
    fls = [fl.from_numpy(a.copy()) for a in arrays]
    ths = [torch.from_numpy(a.copy()) for a in arrays] if torch else [None] * len(arrays)
    for i in grad:
        fls[i].requires_grad_(True)
        if torch:
            ths[i].requires_grad_(True)
    return fls, ths


def _both(r, torch, label, size, arrays, grad, f_fl, f_th):
    """Rows ``label`` (forward, no grad) and ``label fwd+bwd`` for one operator call."""
    fls, ths = _pair(arrays, torch, grad)
    F = torch.nn.functional if torch else None

    def fwd_fl():
        with fl.no_grad():
            return f_fl(*fls)

    def fwd_th():
        with torch.no_grad():
            return f_th(F, *ths)

    r.compare(label, size, fwd_fl, fwd_th if torch else None)
    g_fl = fl.ones(f_fl(*fls).shape)
    g_th = torch.ones(tuple(g_fl.shape)) if torch else None

    def fb_fl():
        for i in grad:
            fls[i].grad = None
        f_fl(*fls).backward(g_fl)

    def fb_th():
        for i in grad:
            ths[i].grad = None
        f_th(F, *ths).backward(g_th)

    r.compare(f"{label} fwd+bwd", size, fb_fl, fb_th if torch else None)


def _norms(r, torch) -> None:
    rng = np.random.default_rng(0)
    f32 = np.float32
    x = rng.standard_normal((32, 64, 32, 32), dtype=f32)
    w, b = rng.standard_normal(64, dtype=f32), rng.standard_normal(64, dtype=f32)
    rm, rv = np.zeros(64, f32), np.ones(64, f32)
    frm, frv = fl.from_numpy(rm.copy()), fl.from_numpy(rv.copy())
    trm, trv = (torch.from_numpy(rm.copy()), torch.from_numpy(rv.copy())) if torch else (None, None)
    _both(r, torch, "batch_norm (training)", "32x64x32x32 float32", [x, w, b], (0, 1, 2),
          lambda x, w, b: fl.batch_norm(x, frm, frv, w, b, True),
          lambda F, x, w, b: F.batch_norm(x, trm, trv, w, b, True))
    _both(r, torch, "batch_norm (eval)", "32x64x32x32 float32", [x, w, b], (0, 1, 2),
          lambda x, w, b: fl.batch_norm(x, frm, frv, w, b, False),
          lambda F, x, w, b: F.batch_norm(x, trm, trv, w, b, False))
    x = rng.standard_normal((64, 128, 512), dtype=f32)
    w, b = rng.standard_normal(512, dtype=f32), rng.standard_normal(512, dtype=f32)
    _both(r, torch, "layer_norm", "64x128x512 float32", [x, w, b], (0, 1, 2),
          lambda x, w, b: fl.layer_norm(x, (512,), w, b), lambda F, x, w, b: F.layer_norm(x, (512,), w, b))
    x = rng.standard_normal((16, 256, 16, 16), dtype=f32)
    w, b = rng.standard_normal(256, dtype=f32), rng.standard_normal(256, dtype=f32)
    _both(r, torch, "group_norm (32 groups)", "16x256x16x16 float32", [x, w, b], (0, 1, 2),
          lambda x, w, b: fl.group_norm(x, 32, w, b), lambda F, x, w, b: F.group_norm(x, 32, w, b))


def _losses(r, torch) -> None:
    rng = np.random.default_rng(0)
    f32 = np.float32
    for n, c in ((128, 10), (256, 10000)):
        x = rng.standard_normal((n, c), dtype=f32)
        t = rng.integers(0, c, n)
        ft, tt = fl.from_numpy(t), torch.from_numpy(t) if torch else None
        _both(r, torch, "cross_entropy", f"{n}x{c} float32", [x], (0,),
              lambda x, ft=ft: fl.cross_entropy(x, ft), lambda F, x, tt=tt: F.cross_entropy(x, tt))
    _both(r, torch, "cross_entropy (label_smoothing=0.1)", f"{n}x{c} float32", [x], (0,),
          lambda x: fl.cross_entropy(x, ft, label_smoothing=0.1),
          lambda F, x: F.cross_entropy(x, tt, label_smoothing=0.1))
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    _both(r, torch, "nll_loss", f"{n}x{c} float32", [logp.astype(f32)], (0,),
          lambda x: fl.nll_loss(x, ft), lambda F, x: F.nll_loss(x, tt))
    m = 1_000_000
    x, y = rng.standard_normal(m, dtype=f32), rng.standard_normal(m, dtype=f32)
    _both(r, torch, "mse_loss", f"{m:,} float32", [x, y], (0,), lambda x, y: fl.mse_loss(x, y),
          lambda F, x, y: F.mse_loss(x, y))
    y = rng.uniform(0, 1, m).astype(f32)
    _both(r, torch, "binary_cross_entropy_with_logits", f"{m:,} float32", [x, y], (0,),
          lambda x, y: fl.binary_cross_entropy_with_logits(x, y),
          lambda F, x, y: F.binary_cross_entropy_with_logits(x, y))


def run(r, torch) -> None:
    """Add this family's comparisons to the report ``r`` (``torch`` is None when not installed)."""
    _norms(r, torch)
    _losses(r, torch)


if __name__ == "__main__":
    report = _harness.Report("norm", "Normalisation and losses (benchmarks/_bench_norm.py)", repeat=3,
                             target=0.01)
    report.header()
    run(report, report.torch)
