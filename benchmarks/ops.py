"""Operator benchmarks: flambeau against PyTorch on the CPU, 2 threads each.

Covers the per-operator Python overhead (a binary op on tiny tensors, where torch spends about
1.7 µs), 1M-element elementwise operators and reductions, 1024x1024 matrix products (also against
numpy, and as a share of the machine's GEMM peak, measured as numpy's float32 2048^3 GFLOP/s),
batched matrix products, softmax over 4096x1000 and gather / scatter_add / index_select on 1M
elements. Operators flambeau does not have yet are listed as skipped.

    nox -s bench                       # all benchmark scripts, results into RESULTS.md
    python benchmarks/ops.py --quick   # fewer repeats, RESULTS.md untouched
"""

from __future__ import annotations

import argparse

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import numpy as np

import flambeau as fl

fmt_time = _harness.fmt_time


def has(name: str, method: bool = False) -> bool:
    return hasattr(fl.Tensor if method else fl, name)


def overhead(r: _harness.Report, torch) -> None:
    def binary(shape):
        a, b = fl.ones(*shape), fl.ones(*shape)
        ta, tb = (torch.ones(*shape), torch.ones(*shape)) if torch else (None, None)
        size = "x".join(map(str, shape)) + " float32"
        r.compare("a + b (overhead)", size, lambda: a + b, (lambda: ta + tb) if torch else None)

    binary((1,))
    binary((4, 4))
    a, b = fl.ones(4, 4), fl.ones(4, 4)
    ta, tb = (torch.ones(4, 4), torch.ones(4, 4)) if torch else (None, None)
    r.compare("add(a, b, alpha=2)", "4x4 float32", lambda: fl.add(a, b, alpha=2),
              (lambda: torch.add(ta, tb, alpha=2)) if torch else None)
    r.compare("a.sum()", "4x4 float32", lambda: a.sum(), (lambda: ta.sum()) if torch else None)


def elementwise(r: _harness.Report, torch, n: int) -> None:
    rng = np.random.default_rng(0)
    x_np, y_np = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    x, y = fl.from_numpy(x_np), fl.from_numpy(y_np)
    tx, ty = (torch.from_numpy(x_np), torch.from_numpy(y_np)) if torch else (None, None)
    size = f"{n:,} float32"
    for name, f_fl, f_th in [
        ("add", lambda: x + y, lambda: tx + ty),
        ("mul", lambda: x * y, lambda: tx * ty),
        ("exp", lambda: fl.exp(x), lambda: torch.exp(tx)),
        ("add_ (in place)", lambda: x.add_(y), lambda: tx.add_(ty)),
    ]:
        r.compare(name, size, f_fl, f_th if torch else None)
    for name in ("sum", "mean", "max"):
        if not has(name, method=True):
            r.skip(name, size, f"Tensor.{name} not implemented yet")
            continue
        r.compare(name, size, getattr(x, name), getattr(tx, name) if torch else None)


def matmul(r: _harness.Report, torch, n: int) -> None:
    rng = np.random.default_rng(0)
    # The machine's GEMM peak as numpy's BLAS reaches it on a large float32 product.
    big = rng.standard_normal((2048, 2048), dtype=np.float32)
    t_big = r.median(lambda: big @ big)
    peak = 2 * 2048**3 / t_big / 1e9
    r.add_note(f"GEMM peak (numpy float32 2048^3 on {_harness.THREADS} threads): {peak:.1f} GFLOP/s")
    if not has("matmul"):
        r.skip("matmul", f"{n}x{n} @ {n}x{n}", "flambeau.matmul not implemented yet")
        return
    a_np, b_np = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    a, b = fl.from_numpy(a_np), fl.from_numpy(b_np)
    ta, tb = (torch.from_numpy(a_np), torch.from_numpy(b_np)) if torch else (None, None)
    t_np = r.median(lambda: a_np @ b_np)
    flops = 2 * n**3
    t_fl, _ = r.compare("matmul", f"{n}x{n} @ {n}x{n} float32", lambda: a @ b, (lambda: ta @ tb) if torch else None,
                        note=f"numpy {fmt_time(t_np)}")
    gflops = flops / t_fl / 1e9
    r.rows[-1]["note"] += f"; flambeau {gflops:.1f} GFLOP/s = {100 * gflops / peak:.0f}% of peak"
    # The target is numpy's BLAS (faster than torch's here): measure it interleaved too.
    r.compare("matmul vs numpy", f"{n}x{n} @ {n}x{n} float32", lambda: a @ b, lambda: a_np @ b_np,
              note="torch column: numpy's a @ b", baseline_required=False)

    bsz, m = 64, 128
    x_np, y_np = (rng.standard_normal((bsz, m, m), dtype=np.float32) for _ in range(2))
    x, y = fl.from_numpy(x_np), fl.from_numpy(y_np)
    tx, ty = (torch.from_numpy(x_np), torch.from_numpy(y_np)) if torch else (None, None)
    t_np = r.median(lambda: np.matmul(x_np, y_np))
    r.compare("matmul (batched)", f"{bsz}x{m}x{m} @ {bsz}x{m}x{m}", lambda: fl.matmul(x, y),
              (lambda: torch.matmul(tx, ty)) if torch else None, note=f"numpy {fmt_time(t_np)}")
    r.compare("matmul (batched) vs numpy", f"{bsz}x{m}x{m} @ {bsz}x{m}x{m}", lambda: fl.matmul(x, y),
              lambda: np.matmul(x_np, y_np), note="torch column: numpy's matmul", baseline_required=False)
    if has("bmm"):
        r.compare("bmm", f"{bsz}x{m}x{m} @ {bsz}x{m}x{m}", lambda: fl.bmm(x, y),
                  (lambda: torch.bmm(tx, ty)) if torch else None)


def softmax(r: _harness.Report, torch) -> None:
    x_np = np.random.default_rng(0).standard_normal((4096, 1000), dtype=np.float32)
    x = fl.from_numpy(x_np)
    tx = torch.from_numpy(x_np) if torch else None
    for name in ("softmax", "log_softmax"):
        if not has(name):
            r.skip(name, "4096x1000, dim=1", f"flambeau.{name} not implemented yet")
            continue
        f_fl, f_th = getattr(fl, name), getattr(torch, name, None)
        r.compare(name, "4096x1000 float32, dim=1", lambda f=f_fl: f(x, dim=1),
                  (lambda f=f_th: f(tx, dim=1)) if torch else None)


def indexing(r: _harness.Report, torch, n: int) -> None:
    rng = np.random.default_rng(0)
    src_np = rng.standard_normal(n, dtype=np.float32)
    idx_np = rng.integers(0, n, n)
    bins_np = rng.integers(0, 1000, n)
    src, idx, bins = fl.from_numpy(src_np), fl.from_numpy(idx_np), fl.from_numpy(bins_np)
    if torch:
        t_src, t_idx, t_bins = torch.from_numpy(src_np), torch.from_numpy(idx_np), torch.from_numpy(bins_np)
    size = f"{n:,} float32, int64 index"
    cases = [
        ("gather", lambda: fl.gather(src, 0, idx), lambda: torch.gather(t_src, 0, t_idx)),
        ("index_select", lambda: fl.index_select(src, 0, idx), lambda: torch.index_select(t_src, 0, t_idx)),
        ("scatter_add", lambda: fl.zeros(1000).scatter_add_(0, bins, src),
         lambda: torch.zeros(1000).scatter_add_(0, t_bins, t_src)),
        ("x[idx] (advanced indexing)", lambda: src[idx], lambda: t_src[t_idx]),
    ]
    for name, f_fl, f_th in cases:
        if name.isidentifier() and not has(name):
            r.skip(name, size, f"flambeau.{name} not implemented yet")
            continue
        try:
            f_fl()
        except Exception as exc:  # an operator still being written must not stop the others
            r.skip(name, size, f"{type(exc).__name__}: {exc}"[:80])
            continue
        r.compare(name, size + (" into 1000 bins" if name == "scatter_add" else ""), f_fl, f_th if torch else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats of ~10 ms, RESULTS.md untouched")
    args = parser.parse_args()
    r = _harness.Report("ops", "Operators (benchmarks/ops.py)",
                        **({"repeat": 3, "target": 0.01} if args.quick else {}))
    torch = r.torch
    r.header()
    overhead(r, torch)
    elementwise(r, torch, 1_000_000)
    matmul(r, torch, 1024)
    softmax(r, torch)
    indexing(r, torch, 1_000_000)
    # The nn issue's operator families, one module each (imported here: _harness must come first).
    import _bench_act
    import _bench_conv
    import _bench_norm
    import _bench_seq
    for family in (_bench_act, _bench_conv, _bench_norm, _bench_seq):
        family.run(r, torch)
    if not args.quick:
        r.finish()


if __name__ == "__main__":
    main()
