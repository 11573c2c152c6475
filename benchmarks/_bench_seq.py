"""ops.py benchmarks of the seq operators: attention, recurrent layers and cells, resampling.

Rows (float32, forward and forward+backward, flambeau against torch 2 threads each):
scaled_dot_product_attention (batch 8, heads 8, seq 128, dim 64, causal), a 2-layer LSTM
(seq 50, batch 32, 256 -> 256), a GRU cell step (batch 32, 256 -> 256), bilinear and nearest
interpolate 2x on 16x32x32x32.

On this shared 2-core machine, wall-clock timings swing by 10x with the other processes' load
(OpenBLAS and numba threads waiting for a core); compare ratios from one run only.

    python benchmarks/_bench_seq.py            # this family alone (3 quick repeats)
    python benchmarks/ops.py --quick           # with every other operator benchmark
"""

from __future__ import annotations

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import numpy as np

import flambeau as fl


def _leaf(a):
    return fl.from_numpy(a.copy()).requires_grad_()


def _fwd_bwd(r, torch, label, size, f_fl, f_th, leaves_fl, leaves_th):
    def fb_fl():
        for x in leaves_fl:
            x.grad = None
        f_fl().sum().backward()

    def fb_th():
        for x in leaves_th:
            x.grad = None
        f_th().sum().backward()

    r.compare(label + " forward", size, lambda: f_fl(), (lambda: f_th()) if torch else None)
    r.compare(label + " fwd+bwd", size, fb_fl, fb_th if torch else None)


def _sdpa(r, torch) -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((8, 8, 128, 64), dtype=np.float32) for _ in range(3))
    fq, fk, fv = _leaf(q), _leaf(k), _leaf(v)
    size = "8x8x128x64 causal float32"
    if torch:
        F = torch.nn.functional
        tq, tk, tv = (torch.from_numpy(a.copy()).requires_grad_() for a in (q, k, v))
        dq, dk, dv = fq.detach(), fk.detach(), fv.detach()
        with torch.no_grad():
            r.compare("sdpa no_grad", size, lambda: fl.scaled_dot_product_attention(dq, dk, dv, is_causal=True),
                      lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=True))
    _fwd_bwd(r, torch, "sdpa", size, lambda: fl.scaled_dot_product_attention(fq, fk, fv, is_causal=True),
             (lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)) if torch else None,
             (fq, fk, fv), (tq, tk, tv) if torch else ())


def _lstm(r, torch) -> None:
    import flambeau.nn as nn

    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 32, 256), dtype=np.float32)
    fl.manual_seed(0)
    m = nn.LSTM(256, 256, num_layers=2)
    fx = _leaf(x)
    size = "seq 50, batch 32, 256->256, 2 layers"
    tm = tx = None
    if torch:
        tm = torch.nn.LSTM(256, 256, num_layers=2)
        tm.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in m.state_dict().items()})
        tx = torch.from_numpy(x.copy()).requires_grad_()
    leaves_fl = (fx, *m.parameters())
    leaves_th = (tx, *tm.parameters()) if torch else ()
    _fwd_bwd(r, torch, "LSTM", size, lambda: m(fx)[0], (lambda: tm(tx)[0]) if torch else None, leaves_fl, leaves_th)


def _gru_cell(r, torch) -> None:
    import flambeau.nn as nn

    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 256), dtype=np.float32)
    h = rng.standard_normal((32, 256), dtype=np.float32)
    fl.manual_seed(0)
    m = nn.GRUCell(256, 256)
    fx, fh = _leaf(x), _leaf(h)
    size = "batch 32, 256->256"
    tm = tx = th = None
    if torch:
        tm = torch.nn.GRUCell(256, 256)
        tm.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in m.state_dict().items()})
        tx, th = (torch.from_numpy(a.copy()).requires_grad_() for a in (x, h))
    _fwd_bwd(r, torch, "GRUCell", size, lambda: m(fx, fh), (lambda: tm(tx, th)) if torch else None,
             (fx, fh, *m.parameters()), (tx, th, *tm.parameters()) if torch else ())


def _interpolate(r, torch) -> None:
    import flambeau.nn.functional as F

    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32, 32, 32), dtype=np.float32)
    fx = _leaf(x)
    size = "16x32x32x32 -> 64x64 float32"
    tx = torch.from_numpy(x.copy()).requires_grad_() if torch else None
    TF = torch.nn.functional if torch else None
    _fwd_bwd(r, torch, "interpolate bilinear 2x", size,
             lambda: F.interpolate(fx, scale_factor=2, mode="bilinear"),
             (lambda: TF.interpolate(tx, scale_factor=2, mode="bilinear")) if torch else None, (fx,),
             (tx,) if torch else ())
    _fwd_bwd(r, torch, "interpolate nearest 2x", size, lambda: F.interpolate(fx, scale_factor=2),
             (lambda: TF.interpolate(tx, scale_factor=2)) if torch else None, (fx,), (tx,) if torch else ())


def run(r, torch) -> None:
    """Add this family's comparisons to the report ``r`` (``torch`` is None when not installed)."""
    _sdpa(r, torch)
    _lstm(r, torch)
    _gru_cell(r, torch)
    _interpolate(r, torch)


if __name__ == "__main__":
    report = _harness.Report("seq", "Attention, recurrent and resampling (benchmarks/_bench_seq.py)", repeat=3,
                             target=0.05)
    report.header()
    run(report, report.torch)
