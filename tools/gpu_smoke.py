"""First look at a real GPU: what flambeau loads there and whether its basic paths agree with torch.

Prints one line per check (``ok`` / ``FAIL`` with the error) and never stops at the first failure, so
one short run on a lent machine says which libraries load (cuBLAS, cuDNN, the allocator's C core) and
which paths work before the long test tier runs. Part of ``tools/gpu_session.sh``.
"""

from __future__ import annotations

import time
import traceback

import numpy as np


def check(name, fn):
    t0 = time.perf_counter()
    try:
        detail = fn()
    except Exception as exc:  # report and go on: the point is to see every failure in one run
        print(f"FAIL {name}: {type(exc).__name__}: {exc}")
        traceback.print_exc(limit=-6)  # the deepest frames say why
        return
    print(f"ok   {name} ({time.perf_counter() - t0:.2f} s){': ' + str(detail) if detail is not None else ''}")


def main() -> None:
    import torch

    import flambeau as fl

    tdev = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a dry run under numba's simulator
    big = 1 << 24 if tdev == "cuda" else 64
    from flambeau._kernels.cuda import _cublas, _cudnn

    def sync_torch():
        if tdev == "cuda":
            torch.cuda.synchronize()

    check("fl.cuda.is_available", lambda: (fl.cuda.is_available(), getattr(fl.cuda, "_why_not", None)))
    check("device", lambda: (fl.cuda.get_device_name(), fl.cuda.get_device_capability()))
    check("cuBLAS", lambda: (_cublas.available(), _cublas.find_library()))
    check("cuDNN", lambda: (_cudnn.available(), _cudnn.find_library()))

    def allocator_core():
        import flambeau.cuda_alloc as ca
        from flambeau.cuda_alloc import _ccore

        x = fl.ones(1000, device="cuda")
        total = x.sum().item()
        allocator = ca.get_allocator()
        return type(getattr(allocator, "_core", None)).__name__, total, _ccore.load_error

    check("allocator core", allocator_core)

    rng = np.random.default_rng(0)

    def matmul(dtype):
        a, b = rng.standard_normal((257, 129)), rng.standard_normal((129, 65))
        got = (fl.tensor(a, dtype=dtype, device="cuda") @ fl.tensor(b, dtype=dtype, device="cuda")).cpu().numpy()
        want = a @ b
        return float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())

    for dt in ("float32", "float64", "float16", "bfloat16"):
        check(f"matmul {dt} (max rel err)", lambda dt=dt: matmul(getattr(fl, dt)))

    def conv():
        x = rng.standard_normal((4, 8, 16, 16)).astype(np.float32)
        w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
        xf, wf = fl.tensor(x, device="cuda", requires_grad=True), fl.tensor(w, device="cuda", requires_grad=True)
        xt, wt = torch.tensor(x, device=tdev, requires_grad=True), torch.tensor(w, device=tdev, requires_grad=True)
        yf, yt = fl.nn.functional.conv2d(xf, wf, padding=1), torch.nn.functional.conv2d(xt, wt, padding=1)
        yf.sum().backward()
        yt.sum().backward()
        errs = [float(np.abs(a.detach().cpu().numpy() - b.detach().cpu().numpy()).max())
                for a, b in ((yf, yt), (xf.grad, xt.grad), (wf.grad, wt.grad))]
        return errs

    check("conv2d forward/backward vs torch (max abs err)", conv)

    def elementwise_speed():
        x = fl.randn(big, device="cuda")
        for _ in range(3):
            (x * 2 + 1).relu()
        fl.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            y = x * 2.0
        fl.cuda.synchronize()
        dt = (time.perf_counter() - t0) / 20
        xt = torch.randn(big, device=tdev)
        for _ in range(3):
            xt * 2.0
        sync_torch()
        t0 = time.perf_counter()
        for _ in range(20):
            y = xt * 2.0
        sync_torch()
        return f"{big} x*2: flambeau {dt * 1e6:.0f} us, torch {(time.perf_counter() - t0) / 20 * 1e6:.0f} us", y.shape

    check("elementwise speed", elementwise_speed)

    def launch_overhead():
        x = fl.ones(8, device="cuda")
        for _ in range(10):
            x = x + 1
        fl.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(1000):
            x = x + 1
        fl.cuda.synchronize()
        fl_us = (time.perf_counter() - t0) * 1e3
        xt = torch.ones(8, device=tdev)
        sync_torch()
        t0 = time.perf_counter()
        for _ in range(1000):
            xt = xt + 1
        sync_torch()
        return f"small add per op: flambeau {fl_us:.1f} us, torch {(time.perf_counter() - t0) * 1e3:.1f} us"

    check("launch overhead", launch_overhead)


if __name__ == "__main__":
    main()
