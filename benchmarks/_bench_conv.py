"""ops.py benchmarks of the convolution and pooling operators.

Rows (float32, forward and forward+backward, flambeau against torch, 2 threads each): the layers
that dominate the issue's CNN targets: a ResNet 64->64 3x3 convolution on 32x32 (batch 32), the
LeNet first and second convolutions on 28x28 (batch 64), a MobileNet depthwise 3x3 on 32 channels
(batch 16, stride 1 and 2), 1x1 convolutions (wide and small images), a strided 3x3 convolution on
small images, 3x3 layers on 4x4, 8x8 and 56x56 planes (im2col, and Winograd's two layouts), a transposed
convolution, max pooling 2x2, average pooling 3x3 and global average
pooling.

    python benchmarks/_bench_conv.py          # this family alone (3 quick repeats)
    python benchmarks/ops.py --quick          # with every other operator benchmark
"""

from __future__ import annotations

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import numpy as np

import flambeau as fl

CONVS = [
    # label, size label, input shape, weight shape, kwargs
    ("conv2d 3x3", "64->64 32x32 b32", (32, 64, 32, 32), (64, 64, 3, 3), dict(padding=1)),
    ("conv2d 3x3 (LeNet 1)", "1->32 28x28 b64", (64, 1, 28, 28), (32, 1, 3, 3), {}),
    ("conv2d 3x3 (LeNet 2)", "32->64 26x26 b64", (64, 32, 26, 26), (64, 32, 3, 3), {}),
    ("conv2d 3x3 s2", "128->128 16x16 b32", (32, 128, 16, 16), (128, 128, 3, 3), dict(padding=1, stride=2)),
    ("conv2d 3x3", "256->256 4x4 b32", (32, 256, 4, 4), (256, 256, 3, 3), dict(padding=1)),
    ("conv2d 3x3", "128->128 8x8 b32", (32, 128, 8, 8), (128, 128, 3, 3), dict(padding=1)),
    ("conv2d 3x3", "64->64 56x56 b8", (8, 64, 56, 56), (64, 64, 3, 3), dict(padding=1)),
    ("depthwise 3x3", "32ch 32x32 b16", (16, 32, 32, 32), (32, 1, 3, 3), dict(padding=1, groups=32)),
    ("depthwise 3x3 s2", "96ch 32x32 b16", (16, 96, 32, 32), (96, 1, 3, 3), dict(padding=1, groups=96, stride=2)),
    ("conv2d 1x1", "64->128 32x32 b16", (16, 64, 32, 32), (128, 64, 1, 1), {}),
    ("conv2d 1x1", "96->32 8x8 b16", (16, 96, 8, 8), (32, 96, 1, 1), {}),
]


def _pair(r, torch, label, size, make_fl, make_th, leaves_fl, leaves_th) -> None:
    """Forward, then forward+backward (gradients of ``sum()``), of one operator call."""
    r.compare(label, size, make_fl, make_th if torch else None)

    def fb_fl():
        for t in leaves_fl:
            t.grad = None
        make_fl().sum().backward()

    def fb_th():
        for t in leaves_th:
            t.grad = None
        make_th().sum().backward()

    r.compare(label + " fwd+bwd", size, fb_fl, fb_th if torch else None)


def _conv_case(r, torch, rng, label, size, xs, ws, kw, transposed=False) -> None:
    arrays = [rng.standard_normal(xs, dtype=np.float32), rng.standard_normal(ws, dtype=np.float32) * 0.1,
              rng.standard_normal(ws[1] if transposed else ws[0], dtype=np.float32)]
    ours = [fl.from_numpy(a).requires_grad_() for a in arrays]
    theirs = [torch.from_numpy(a).requires_grad_() for a in arrays] if torch else []
    f_fl = fl.conv_transpose2d if transposed else fl.conv2d
    f_th = (torch.nn.functional.conv_transpose2d if transposed else torch.nn.functional.conv2d) if torch else None
    _pair(r, torch, label, size, lambda: f_fl(*ours, **kw), lambda: f_th(*theirs, **kw), ours, theirs)


def _conv(r, torch) -> None:
    rng = np.random.default_rng(0)
    for label, size, xs, ws, kw in CONVS:
        _conv_case(r, torch, rng, label, size, xs, ws, kw)
    # A DCGAN-style upsampling layer.
    _conv_case(r, torch, rng, "conv_transpose2d 4x4 s2", "64->32 16x16 b16", (16, 64, 16, 16), (64, 32, 4, 4),
               dict(stride=2, padding=1), transposed=True)


def _pool_case(r, torch, rng, label, size, shape, fn) -> None:
    x_np = rng.standard_normal(shape, dtype=np.float32)
    x = fl.from_numpy(x_np).requires_grad_()
    tx = torch.from_numpy(x_np).requires_grad_() if torch else None
    F = torch.nn.functional if torch else None
    _pair(r, torch, label, size, lambda: fn(fl, x), lambda: fn(F, tx), [x], [tx])


def _pool(r, torch) -> None:
    rng = np.random.default_rng(0)
    cases = [
        ("max_pool2d 2x2", "64ch 32x32 b32", (32, 64, 32, 32), lambda m, a: m.max_pool2d(a, 2)),
        ("max_pool2d 3x3 s2 p1", "64ch 56x56 b8", (8, 64, 56, 56), lambda m, a: m.max_pool2d(a, 3, 2, 1)),
        ("avg_pool2d 3x3 s2 p1", "64ch 32x32 b32", (32, 64, 32, 32), lambda m, a: m.avg_pool2d(a, 3, 2, 1)),
        ("adaptive_avg_pool2d 1x1", "256ch 4x4 b32", (32, 256, 4, 4), lambda m, a: m.adaptive_avg_pool2d(a, 1)),
        ("adaptive_avg_pool2d 1x1", "640ch 2x2 b16", (16, 640, 2, 2), lambda m, a: m.adaptive_avg_pool2d(a, 1)),
    ]
    for label, size, shape, fn in cases:
        _pool_case(r, torch, rng, label, size, shape, fn)


def run(r, torch) -> None:
    """Add this family's comparisons to the report ``r`` (``torch`` is None when not installed)."""
    _conv(r, torch)
    _pool(r, torch)


if __name__ == "__main__":
    report = _harness.Report("conv", "Convolution and pooling (benchmarks/_bench_conv.py)", repeat=3, target=0.05)
    report.header()
    run(report, report.torch)
