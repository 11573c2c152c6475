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

    def graph_plans():
        """Which API planned each convolution call (Note [cuDNN's graph API]), with and without TF32, float64:
        all "graph" where cuDNN's graph API and its engines' notes are read as expected."""
        seen = {}
        for name, dtype, tf32 in (("tf32", fl.float32, True), ("fp32", fl.float32, False), ("fp64", fl.float64, True)):
            _cudnn._PLANS.clear()
            fl.backends.cudnn.allow_tf32 = tf32
            x = fl.randn(4, 8, 12, 12, device="cuda", dtype=dtype, requires_grad=True)
            w = fl.randn(16, 8, 3, 3, device="cuda", dtype=dtype, requires_grad=True)
            fl.nn.functional.conv2d(x, w, padding=1).sum().backward()
            seen[name] = {key[0]: "graph" if plan.graph else "legacy" for key, plan in _cudnn._PLANS.items()
                          if key[0] in ("forward", "data", "filter")}
        fl.backends.cudnn.allow_tf32 = True
        return seen

    check("cuDNN plans by API", graph_plans)

    def batch_norm():
        """Training batch norm through cuDNN (Note [Batch norm through cuDNN]) against torch's: the output, the
        running statistics and the three gradients, and whether cuDNN took both calls."""
        from flambeau._kernels.cuda import _cudnn_bn

        taken = []
        real = _cudnn_bn.forward, _cudnn_bn.backward

        def noting(i):
            def call(*args):
                result = real[i](*args)
                taken.append(result is not None)
                return result
            return call

        _cudnn_bn.forward, _cudnn_bn.backward = noting(0), noting(1)
        try:
            x = rng.standard_normal((8, 6, 10, 10)).astype(np.float32)
            g = rng.standard_normal(x.shape).astype(np.float32)
            mf, mt = fl.nn.BatchNorm2d(6).to("cuda"), torch.nn.BatchNorm2d(6).to(tdev)
            xf, xt = fl.tensor(x, device="cuda", requires_grad=True), torch.tensor(x, device=tdev, requires_grad=True)
            yf, yt = mf(xf), mt(xt)
            yf.backward(fl.tensor(g, device="cuda"))
            yt.backward(torch.tensor(g, device=tdev))
        finally:
            _cudnn_bn.forward, _cudnn_bn.backward = real
        pairs = ((yf, yt), (mf.running_mean, mt.running_mean), (mf.running_var, mt.running_var), (xf.grad, xt.grad),
                 (mf.weight.grad, mt.weight.grad), (mf.bias.grad, mt.bias.grad))
        errs = [float(np.abs(a.detach().cpu().numpy() - b.detach().cpu().numpy()).max()) for a, b in pairs]
        return {"cuDNN took forward, backward": taken, "max abs err": errs}

    check("batch_norm training vs torch", batch_norm)

    def per_call_us(fn, synchronize, calls):
        """Microseconds per call of ``fn``, after warm-up calls, queued work included."""
        for _ in range(3):
            fn()
        synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        synchronize()
        return (time.perf_counter() - t0) / calls * 1e6

    def side_by_side(what, make, op, size, calls):
        """``op`` on a tensor from ``make`` of each library, timed per call, as one line."""
        x, xt = make(fl, size, device="cuda"), make(torch, size, device=tdev)
        us = per_call_us(lambda: op(x), fl.cuda.synchronize, calls)
        ust = per_call_us(lambda: op(xt), sync_torch, calls)
        return f"{what}: flambeau {us:.1f} us, torch {ust:.1f} us per call"

    check("elementwise speed", lambda: side_by_side(f"{big} x*2", lambda m, n, device: m.randn(n, device=device),
                                                     lambda x: x * 2.0, big, 20))
    check("launch overhead", lambda: side_by_side("small x+1", lambda m, n, device: m.ones(n, device=device),
                                                   lambda x: x + 1, 8, 1000))


if __name__ == "__main__":
    main()
