"""Large operators on a CUDA GPU, flambeau against torch on the same card: the kernels whose device time
decides Table 1's models at the paper's sizes.

Batch norm (forward, and forward with backward) at ResNet-50's and VGG's sizes, elementwise operators,
reductions over the spatial dims and over a batch (a bias gradient), layer norm, softmax, cross-entropy,
and 3x3 convolutions: plain (cuDNN on both sides) and depthwise (MobileNet's; flambeau's direct kernels,
as torch runs its own), with a last row for flambeau's depthwise through cuDNN instead. Each timed call is
``BURST`` calls of the operator then the device's ``synchronize``, so a device-bound operator's time is
its device time; rounds alternate flambeau and torch (``_harness``), float32 without TF32 on both sides.

    python benchmarks/gpu_ops.py            # RESULTS.md section "gpu_ops" rewritten
    python benchmarks/gpu_ops.py --quick    # 3 rounds, RESULTS.md untouched

Needs a CUDA GPU, numba-cuda and a CUDA build of torch; otherwise it prints why and measures nothing.
"""

from __future__ import annotations

import argparse

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported

import flambeau as fl

BURST = 10  # operator calls per timed call (then one synchronize)
# (N, C, H, W) of batch norms: ResNet-50's stem and stages at batch 32, VGG's first layers at batch 64
NORM_SHAPES = ((32, 64, 112, 112), (32, 64, 56, 56), (32, 256, 56, 56), (32, 2048, 7, 7), (64, 64, 224, 224))
# label -> (input shape, output channels, groups, stride) of 3x3 convolutions, padding 1, with backward
CONV_CASES = {"conv2d+backward 3x3, 64 -> 64": ((32, 64, 56, 56), 64, 1, 1),
              "depthwise+backward 3x3": ((64, 144, 56, 56), 144, 144, 1),
              "depthwise+backward 3x3, stride 2": ((64, 96, 112, 112), 96, 96, 2)}


def cases(lib, dev: str) -> list:
    """``(op, size, thunk)`` of every row: each thunk runs one call in ``lib`` (flambeau or torch) on ``dev``."""
    F = lib.nn.functional

    def randn(*shape, grad=False):
        return lib.randn(*shape, device=dev, requires_grad=grad)

    rows = []
    for shape in NORM_SHAPES:
        x, gy = randn(*shape, grad=True), randn(*shape)
        c = shape[1]
        w, b = lib.ones(c, device=dev, requires_grad=True), lib.zeros(c, device=dev, requires_grad=True)
        rm, rv = lib.zeros(c, device=dev), lib.ones(c, device=dev)
        size = "x".join(map(str, shape))
        rows.append(("batch_norm", size, lambda x=x, w=w, b=b, rm=rm, rv=rv: F.batch_norm(x, rm, rv, w, b, True)))
        rows.append(("batch_norm+backward", size, lambda x=x, w=w, b=b, rm=rm, rv=rv, gy=gy:
                     F.batch_norm(x, rm, rv, w, b, True).backward(gy)))
    x, y = randn(32, 256, 56, 56), randn(32, 256, 56, 56)
    bias = randn(256, 1, 1)
    cols = randn(8192, 1000)
    rows += [("relu", "32x256x56x56", lambda: F.relu(x)), ("add", "32x256x56x56", lambda: x + y),
             ("x * 2", "32x256x56x56", lambda: x * 2),
             ("add a channel bias", "32x256x56x56 + 256x1x1", lambda: x + bias),
             ("sum over (0, 2, 3)", "32x256x56x56", lambda: x.sum(dim=(0, 2, 3))),
             ("sum over 0 (a bias gradient)", "8192x1000", lambda: cols.sum(dim=0))]
    t, gt = randn(8192, 768, grad=True), randn(8192, 768)
    ln_w, ln_b = lib.ones(768, device=dev, requires_grad=True), lib.zeros(768, device=dev, requires_grad=True)
    logits = randn(8192, 1024)
    z, target = randn(256, 1000, grad=True), lib.randint(0, 1000, (256,), device=dev)
    rows += [("layer_norm+backward", "8192x768", lambda: F.layer_norm(t, (768,), ln_w, ln_b).backward(gt)),
             ("softmax", "8192x1024", lambda: logits.softmax(-1)),
             ("cross_entropy+backward", "256x1000", lambda: F.cross_entropy(z, target).backward())]
    for label, (shape, cout, groups, stride) in CONV_CASES.items():
        xc, wc = randn(*shape, grad=True), randn(cout, shape[1] // groups, 3, 3, grad=True)
        rows.append((label, "x".join(map(str, shape)), lambda xc=xc, wc=wc, groups=groups, stride=stride:
                     F.conv2d(xc, wc, None, stride, 1, 1, groups).sum().backward()))
    return rows


def _burst(fn, sync):
    def call():
        for _ in range(BURST):
            fn()
        sync()
    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds, RESULTS.md untouched")
    args = parser.parse_args()
    r = _harness.Report("gpu_ops", "Large operators on a GPU (benchmarks/gpu_ops.py)", repeat=3 if args.quick else 5,
                        target=0.2)
    torch = _harness.cuda_torch(r)
    if torch is None:
        return
    fl.backends.cudnn.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # full float32 on both sides
    r.add_note(f"GPU: {fl.cuda.get_device_name()}, torch CUDA {torch.version.cuda}; each time is {BURST} calls "
               "and one synchronize; float32, TF32 off on both sides")
    r.header()
    fl_rows, th_rows = cases(fl, "cuda"), cases(torch, "cuda")
    for (op, size, f_fl), (_, _, f_th) in zip(fl_rows, th_rows):
        r.compare(op, size, _burst(f_fl, fl.cuda.synchronize), _burst(f_th, torch.cuda.synchronize))
    # flambeau's depthwise convolutions by its own direct kernels instead of cuDNN's grouped ones (torch's
    # column: torch's own kernels again), to check the choice (``conv.DEPTHWISE_BY_CUDNN``) on this card
    from flambeau._kernels.cuda import conv

    conv.DEPTHWISE_BY_CUDNN = False
    try:
        for (op, size, f_fl), (_, _, f_th) in zip(fl_rows, th_rows):
            if op.startswith("depthwise"):
                r.compare(op + " (flambeau's direct kernels)", size, _burst(f_fl, fl.cuda.synchronize),
                          _burst(f_th, torch.cuda.synchronize))
    finally:
        conv.DEPTHWISE_BY_CUDNN = True
    if not args.quick:
        r.finish()


if __name__ == "__main__":
    main()
