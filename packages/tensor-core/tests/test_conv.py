"""Convolution operators (``flambeau/_ops/conv.py``) against torch: every option, dtypes, layouts, errors."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau._kernels.cpu import conv as conv_mod
from flambeau._kernels.cpu import conv_winograd as winograd_mod
from flambeau._ops import get_op

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("ignore:Using padding=.same.")

TOL = {np.float32: dict(rtol=1e-4, atol=1e-4), np.float64: dict(rtol=1e-10, atol=1e-10)}


def check(out, ref, dtype=np.float64):
    assert isinstance(out, fl.Tensor)
    assert tuple(out.shape) == tuple(ref.shape), (out.shape, ref.shape)
    assert str(out.dtype).split(".")[1] == str(ref.dtype).split(".")[1], (out.dtype, ref.dtype)
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref.numpy().astype(np.float64), **TOL[dtype])


def both(a):
    return fl.from_numpy(a.copy()), torch.from_numpy(a.copy())


# (input shape, weight shape, kwargs): 2-D convolutions.
CONV2D = [
    ((2, 3, 8, 7), (4, 3, 3, 3), {}),
    ((2, 3, 8, 7), (4, 3, 3, 3), dict(stride=2, padding=1)),
    ((2, 4, 9, 8), (6, 2, 3, 2), dict(stride=(2, 1), padding=(0, 2), dilation=(2, 1), groups=2)),
    ((2, 4, 9, 8), (4, 1, 3, 3), dict(padding=1, groups=4)),                 # depthwise
    ((2, 4, 9, 8), (8, 1, 3, 3), dict(stride=2, padding=1, groups=4)),       # depthwise, multiplier 2
    ((2, 4, 9, 8), (4, 1, 5, 5), dict(padding=2, dilation=2, groups=4)),
    ((3, 5, 6, 6), (7, 5, 1, 1), {}),                                        # pointwise
    ((3, 5, 6, 6), (7, 5, 1, 1), dict(stride=2)),
    ((3, 5, 20, 20), (7, 5, 1, 1), {}),                                      # pointwise, wide images
    ((2, 3, 7, 8), (4, 3, 3, 3), dict(padding="same")),
    ((2, 3, 7, 8), (4, 3, 4, 2), dict(padding="same", dilation=(1, 3))),     # asymmetric 'same'
    ((2, 3, 7, 8), (4, 3, 3, 3), dict(padding="valid")),
    ((3, 7, 8), (4, 3, 3, 3), dict(padding=1)),                              # unbatched
    ((1, 2, 5, 5), (3, 2, 5, 5), {}),                                        # kernel = image
    ((2, 3, 17, 19), (5, 3, 3, 3), dict(stride=3, padding=1)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xs,ws,kw", CONV2D)
def test_conv2d_matches_torch(rng, xs, ws, kw, bias, dtype):
    x, tx = both(rng.standard_normal(xs).astype(dtype))
    w, tw = both(rng.standard_normal(ws).astype(dtype))
    b, tb = both(rng.standard_normal(ws[0]).astype(dtype)) if bias else (None, None)
    check(fl.conv2d(x, w, b, **kw), F.conv2d(tx, tw, tb, **kw), dtype)


CONV1D = [
    ((2, 3, 10), (4, 3, 3), {}),
    ((2, 4, 11), (6, 2, 3), dict(stride=2, padding=2, dilation=2, groups=2)),
    ((2, 4, 11), (4, 1, 5), dict(padding="same", groups=4)),
    ((3, 9), (5, 3, 2), dict(padding="same")),
    ((2, 3, 10), (4, 3, 1), dict(stride=3)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ws,kw", CONV1D)
def test_conv1d_matches_torch(rng, xs, ws, kw, dtype):
    x, tx = both(rng.standard_normal(xs).astype(dtype))
    w, tw = both(rng.standard_normal(ws).astype(dtype))
    b, tb = both(rng.standard_normal(ws[0]).astype(dtype))
    check(fl.conv1d(x, w, b, **kw), F.conv1d(tx, tw, tb, **kw), dtype)


CONV_T2D = [
    ((2, 3, 4, 5), (3, 2, 3, 3), {}),
    ((2, 3, 4, 5), (3, 2, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 4, 5), (4, 3, 3, 2), dict(stride=(2, 3), padding=(1, 0), output_padding=(0, 2), groups=2)),
    ((2, 4, 4, 5), (4, 1, 3, 3), dict(stride=2, padding=1, groups=4, output_padding=1)),   # depthwise
    ((2, 4, 4, 5), (4, 2, 3, 3), dict(groups=4, dilation=2)),
    ((2, 3, 4, 5), (3, 2, 3, 3), dict(dilation=(2, 3), output_padding=(1, 2), stride=1)),
    ((2, 3, 4, 5), (3, 6, 1, 1), {}),
    ((2, 3, 4, 5), (3, 6, 2, 2), dict(stride=2)),
    ((3, 4, 5), (3, 2, 3, 3), dict(stride=2)),                                            # unbatched
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ws,kw", CONV_T2D)
def test_conv_transpose2d_matches_torch(rng, xs, ws, kw, dtype):
    x, tx = both(rng.standard_normal(xs).astype(dtype))
    w, tw = both(rng.standard_normal(ws).astype(dtype))
    b, tb = both(rng.standard_normal(ws[1] * kw.get("groups", 1)).astype(dtype))
    check(fl.conv_transpose2d(x, w, b, **kw), F.conv_transpose2d(tx, tw, tb, **kw), dtype)


@pytest.mark.parametrize("kw", [{}, dict(stride=3, padding=1, output_padding=2), dict(groups=3, dilation=2),
                                dict(stride=2, output_padding=1, groups=3)])
def test_conv_transpose1d_matches_torch(rng, kw):
    x, tx = both(rng.standard_normal((2, 3, 7)))
    w, tw = both(rng.standard_normal((3, 2, 3)))
    check(fl.conv_transpose1d(x, w, **kw), F.conv_transpose1d(tx, tw, **kw))


def test_convolution_primitive_and_backward_weight(rng):
    x, tx = both(rng.standard_normal((2, 3, 7, 6)))
    w, tw = both(rng.standard_normal((4, 3, 3, 3)))
    kw = dict(stride=[2, 1], padding=[1, 1], dilation=[1, 2], transposed=False, output_padding=[0, 0], groups=1)
    out = fl.convolution(x, w, None, *kw.values())
    check(out, torch.convolution(tx, tw, None, *kw.values()))
    g = rng.standard_normal(tuple(out.shape))
    tw.requires_grad_(True)
    torch.convolution(tx, tw, None, *kw.values()).backward(torch.from_numpy(g))
    gw = get_op("convolution_backward_weight").fn(fl.from_numpy(g), x, [4, 3, 3, 3], *kw.values())
    check(gw, tw.grad)


def test_non_contiguous_inputs(rng):
    base = rng.standard_normal((3, 8, 10, 2))
    x = fl.from_numpy(base).permute(3, 0, 1, 2)[:, :, ::2]              # (2, 3, 4, 10), strided
    tx = torch.from_numpy(base).permute(3, 0, 1, 2)[:, :, ::2]
    w, tw = both(rng.standard_normal((5, 3, 3, 2)))
    wt = w.transpose(2, 3).transpose(2, 3)
    check(fl.conv2d(x, wt, padding=1), F.conv2d(tx, tw, padding=1))
    wb = fl.from_numpy(rng.standard_normal((3, 3, 2, 5))).permute(3, 0, 1, 2)  # non-contiguous weight
    check(fl.conv2d(x, wb), F.conv2d(tx, torch.from_numpy(wb.numpy().copy())))
    check(fl.conv_transpose2d(x, wt.transpose(0, 1), stride=2), F.conv_transpose2d(tx, tw.transpose(0, 1), stride=2))


def test_many_chunks_match_one(rng, monkeypatch):
    """The batch is processed in chunks (Note [Convolution as chunked GEMMs]); tiny chunks agree."""
    x, tx = both(rng.standard_normal((5, 3, 9, 9)))
    w, tw = both(rng.standard_normal((4, 3, 3, 3)))
    monkeypatch.setattr(conv_mod, "_CHUNK_BYTES", 1)
    check(fl.conv2d(x, w, padding=1, stride=2), F.conv2d(tx, tw, padding=1, stride=2))
    check(fl.conv_transpose2d(x, w.transpose(0, 1), stride=2), F.conv_transpose2d(tx, tw.transpose(0, 1), stride=2))
    g = rng.standard_normal((5, 4, 5, 5))
    gw = get_op("convolution_backward_weight").fn(fl.from_numpy(g), x, [4, 3, 3, 3], [2, 2], [1, 1], [1, 1],
                                                  False, [0, 0], 1)
    tw.requires_grad_(True)
    F.conv2d(tx, tw, padding=1, stride=2).backward(torch.from_numpy(g))
    check(gw, tw.grad)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_channel_layers_run_image_by_image(rng, dtype):
    """Stems and 1x1 convolutions with few column bytes but a GEMM of _PER_IMAGE_WORK or more per image run
    image by image; grouped, strided and padded ones against torch."""
    cases = [((3, 3, 32, 32), (32, 3, 3, 3), dict(padding=1)),
             ((3, 3, 48, 48), (32, 3, 3, 3), dict(stride=2, padding=1)),
             ((2, 8, 32, 32), (48, 8, 1, 1), {}), ((2, 8, 32, 32), (96, 4, 1, 1), dict(groups=2))]
    for xs, ws, kw in cases:
        x, tx = both(rng.standard_normal(xs).astype(dtype))
        w, tw = both(rng.standard_normal(ws).astype(dtype))
        oh = (xs[2] + 2 * kw.get("padding", 0) - ws[2]) // kw.get("stride", 1) + 1
        work = ws[0] * ws[1] * ws[2] * ws[3] * oh * oh  # (O x C/groups x KH x KW: the forward's O * K * L)
        assert oh * oh >= conv_mod._WIDE_BELOW and work >= conv_mod._PER_IMAGE_WORK
        check(fl.conv2d(x, w, **kw), F.conv2d(tx, tw, **kw), dtype)


def test_float16_and_integer_dtypes(rng):
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float16)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float16)
    out = fl.conv2d(fl.from_numpy(x), fl.from_numpy(w))
    assert out.dtype == fl.float16
    ref = F.conv2d(torch.from_numpy(x.astype(np.float32)), torch.from_numpy(w.astype(np.float32)))
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref.numpy(), rtol=1e-2, atol=1e-2)
    xi = rng.integers(-5, 5, (2, 3, 6, 6))
    wi = rng.integers(-3, 3, (4, 3, 3, 3))
    out = fl.conv2d(fl.from_numpy(xi), fl.from_numpy(wi), padding=1, stride=2)
    assert out.dtype == fl.int64
    np.testing.assert_array_equal(out.numpy(), F.conv2d(torch.from_numpy(xi), torch.from_numpy(wi), padding=1,
                                                        stride=2).numpy())
    wti = rng.integers(-3, 3, (3, 2, 3, 3))
    np.testing.assert_array_equal(fl.conv_transpose2d(fl.from_numpy(xi), fl.from_numpy(wti), stride=2).numpy(),
                                  F.conv_transpose2d(torch.from_numpy(xi), torch.from_numpy(wti), stride=2).numpy())


def test_grads_match_torch(rng):
    x, tx = both(rng.standard_normal((2, 4, 7, 6)).astype(np.float32))
    w, tw = both(rng.standard_normal((6, 2, 3, 3)).astype(np.float32))
    b, tb = both(rng.standard_normal(6).astype(np.float32))
    for t in (x, w, b, tx, tw, tb):
        t.requires_grad_(True)
    g = rng.standard_normal((2, 6, 4, 6)).astype(np.float32)
    fl.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2).backward(fl.from_numpy(g))
    F.conv2d(tx, tw, tb, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2).backward(torch.from_numpy(g))
    for a, ref in ((x, tx), (w, tw), (b, tb)):
        check(a.grad, ref.grad, np.float32)


@pytest.mark.parametrize("xs,ws", [((0, 3, 5, 5), (4, 3, 3, 3)),
                                   ((0, 16, 8, 8), (16, 16, 3, 3)),     # Winograd's channels-last layout
                                   ((0, 16, 28, 28), (16, 16, 3, 3)),   # its planar one
                                   ((0, 16, 3, 3), (16, 16, 3, 3))])    # rows of channel vectors
def test_empty_batch(rng, xs, ws):
    """An empty batch: an empty output, an empty input gradient and a zero weight gradient, as torch's."""
    arrays = [np.zeros(xs), rng.standard_normal(ws)]
    ours = [fl.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    ref = [torch.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    out, tout = fl.conv2d(*ours, padding=1), F.conv2d(*ref, padding=1)
    check(out.detach(), tout.detach())
    out.sum().backward()
    tout.sum().backward()
    for a, t in zip(ours, ref):
        check(a.grad, t.grad)


ERRORS = [
    (lambda x, w: fl.conv2d(x[0, 0], w), RuntimeError, r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d"),
    (lambda x, w: fl.conv2d(x, fl.zeros(6, 3, 3, 3)), RuntimeError,
     r"Given groups=1, weight of size \[6, 3, 3, 3\], expected input\[2, 4, 8, 8\] to have 3 channels, but got 4"),
    (lambda x, w: fl.conv2d(x, fl.zeros(6, 2, 3, 3), groups=3), RuntimeError, r"expected input.* to have 6 channels"),
    (lambda x, w: fl.conv2d(x, fl.zeros(5, 2, 3, 3), groups=2), RuntimeError, "divisible by 2 at dimension 0"),
    (lambda x, w: fl.conv2d(x, w, fl.zeros(5)), RuntimeError, "expected bias to be 1-dimensional with 6 elements"),
    (lambda x, w: fl.conv2d(x, fl.zeros(6, 4, 10, 10)), RuntimeError,
     r"Calculated padded input size per channel: \(8 x 8\). Kernel size: \(10 x 10\)"),
    (lambda x, w: fl.conv2d(x, w, stride=0), RuntimeError, "non-positive stride is not supported"),
    (lambda x, w: fl.conv2d(x, w, padding=-1), RuntimeError, "negative padding is not supported"),
    (lambda x, w: fl.conv2d(x, w, dilation=0), RuntimeError, "non-positive dilation is not supported"),
    (lambda x, w: fl.conv2d(x, w, groups=0), RuntimeError, "non-positive groups is not supported"),
    (lambda x, w: fl.conv2d(x, w, padding="same", stride=2), RuntimeError,
     "padding='same' is not supported for strided convolutions"),
    (lambda x, w: fl.conv2d(x, w, padding="foo"), RuntimeError, "Invalid padding string: 'foo'"),
    (lambda x, w: fl.conv2d(x, w.double()), RuntimeError, r"Input type \(Float\) and weight type \(Double\)"),
    (lambda x, w: fl.conv2d(x, fl.zeros(6, 4, 3)), RuntimeError, "Expected 4-dimensional weight"),
    (lambda x, w: fl.conv2d(x, w, stride=(1, 1, 1)), RuntimeError,
     r"expected stride to be a single integer value or a list of 2 values"),
    (lambda x, w: fl.conv2d(x, w, stride=1.5), TypeError, "stride must be an int or a tuple of ints"),
    (lambda x, w: fl.conv2d(x.numpy(), w), TypeError, r"conv2d\(\): argument 'input' must be Tensor"),
    (lambda x, w: fl.conv1d(x, w), RuntimeError, r"Expected 2D \(unbatched\) or 3D \(batched\) input to conv1d"),
    (lambda x, w: fl.conv_transpose2d(x, fl.zeros(4, 3, 3, 3), stride=2, output_padding=2), RuntimeError,
     "output padding must be smaller than either stride or dilation"),
    (lambda x, w: fl.conv_transpose2d(x, fl.zeros(5, 3, 3, 3)), RuntimeError,
     r"Given transposed=1, weight of size \[5, 3, 3, 3\], expected input\[2, 4, 8, 8\] to have 5 channels"),
    (lambda x, w: fl.conv_transpose2d(x, fl.zeros(4, 3, 3, 3), padding=6), RuntimeError, "Output size is too small"),
    (lambda x, w: fl.conv2d(x.bool(), w.bool()), NotImplementedError, "not implemented for 'Bool'"),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors(i):
    fn, exc, match = ERRORS[i]
    with pytest.raises(exc, match=match):
        fn(fl.zeros(2, 4, 8, 8), fl.zeros(6, 4, 3, 3))


def test_table_declarations():
    assert get_op("convolution").category == "convolution"
    assert get_op("conv2d").composite and not get_op("conv2d").method
    assert not get_op("convolution_backward_weight").function
    assert not hasattr(fl, "convolution_backward_weight")


@pytest.mark.parametrize("kw", [dict(padding=1), dict(padding=(2, 0), dilation=(1, 2), groups=2),
                                dict(padding=0), dict(stride=2, padding=1)])
def test_per_image_paths_with_gradients(rng, monkeypatch, kw):
    """Every image alone (stride 1 takes Note [Stride-1 columns over the padded width]); grads vs torch."""
    monkeypatch.setattr(conv_mod, "_PER_IMAGE_BYTES", 0)
    monkeypatch.setattr(conv_mod, "_WIDE_BELOW", 0)
    arrays = [rng.standard_normal((3, 4, 9, 8)), rng.standard_normal((6, 4 // kw.get("groups", 1), 3, 3)),
              rng.standard_normal(6)]
    ours = [fl.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    ref = [torch.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    out, tout = fl.conv2d(*ours, **kw), F.conv2d(*ref, **kw)
    check(out.detach(), tout.detach())
    g = rng.standard_normal(tuple(tout.shape))
    out.backward(fl.from_numpy(g))
    tout.backward(torch.from_numpy(g))
    for a, t in zip(ours, ref):
        check(a.grad, t.grad)
    tw = ref[1].detach().transpose(0, 1).contiguous() if kw.get("groups", 1) == 1 else None
    if tw is not None:
        check(fl.conv_transpose2d(ours[0].detach(), fl.from_numpy(tw.numpy()), padding=kw.get("padding", 0)
                                  if isinstance(kw.get("padding", 0), int) else 0),
              F.conv_transpose2d(ref[0].detach(), tw, padding=kw.get("padding", 0)
                                 if isinstance(kw.get("padding", 0), int) else 0))


@pytest.mark.parametrize("xs,ws,kw", [
    ((5, 6, 4, 4), (7, 6, 3, 3), dict(padding=1)),                       # deep-layer planes, one wide GEMM
    ((5, 6, 4, 5), (8, 3, 3, 3), dict(stride=2, padding=2, dilation=2, groups=2)),
    ((4, 3, 28, 28), (8, 3, 3, 3), {}),                                  # per-image GEMMs
    ((5, 6, 3, 3), (7, 6, 1, 1), dict(stride=2)),
])
def test_threads_over_images_with_gradients(rng, monkeypatch, xs, ws, kw):
    """Small convolutions run on one thread (``_SERIAL_BELOW``); with it at 0 the batch is split between
    threads: forward, input and weight gradients agree with torch either way."""
    arrays = [rng.standard_normal(xs), rng.standard_normal(ws)]
    for serial_below in (conv_mod._SERIAL_BELOW, 0):
        monkeypatch.setattr(conv_mod, "_SERIAL_BELOW", serial_below)
        ours = [fl.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
        ref = [torch.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
        out, tout = fl.conv2d(*ours, **kw), F.conv2d(*ref, **kw)
        check(out.detach(), tout.detach())
        g = np.random.default_rng(1).standard_normal(tuple(tout.shape))
        out.backward(fl.from_numpy(g))
        tout.backward(torch.from_numpy(g))
        for a, t in zip(ours, ref):
            check(a.grad, t.grad)


def test_cached_checks_still_raise(rng):
    """Note [Cached convolution checks]: a bad call raises every time, and a bool or float parameter is not
    taken for the int of an earlier valid call."""
    x, w = fl.zeros(2, 4, 8, 8), fl.zeros(6, 4, 3, 3)
    assert fl.conv2d(x, w, stride=(1, 1)).shape == (2, 6, 6, 6)
    assert fl.conv2d(x, w, stride=[2, 2], padding=[1, 1]).shape == (2, 6, 4, 4)  # lists: checked uncached
    with pytest.raises(TypeError, match="stride must be an int or a tuple of ints"):
        fl.conv2d(x, w, stride=(True, True))
    with pytest.raises(TypeError, match="stride must be an int or a tuple of ints"):
        fl.conv2d(x, w, stride=(1.0, 1.0))
    with pytest.raises(TypeError, match="argument 'groups' must be int"):
        fl.conv2d(x, w, groups=True)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="non-positive stride"):
            fl.conv2d(x, w, stride=(0, 1))
    with pytest.raises(RuntimeError, match=r"Input type \(Float\) and weight type \(Double\)"):
        fl.conv2d(x, w.double(), stride=(1, 1))  # same shapes as a cached valid call, other dtype


@pytest.mark.parametrize("groups", [1, 2])
def test_chunks_then_one_wide_image(rng, monkeypatch, groups):
    """Chunks of two images, then a last one alone that takes the padded-width path with its own scratch
    buffers (Note [Scratch buffers per thread, not per image]): one-column images, where those buffers are
    larger than the chunks' ones."""
    arrays = [rng.standard_normal((3, 2, 6, 1)), rng.standard_normal((4, 2 // groups, 3, 3))]
    per_image = 2 * 9 * 6 * 8  # column bytes of one float64 image
    monkeypatch.setattr(conv_mod, "_CHUNK_BYTES", 2 * per_image)  # a tiny convolution: one thread runs all three
    assert conv_mod._chunks(0, 3, per_image, 6) == [(0, 2), (2, 3)]
    ours = [fl.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    ref = [torch.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    out, tout = fl.conv2d(*ours, padding=1, groups=groups), F.conv2d(*ref, padding=1, groups=groups)
    check(out.detach(), tout.detach())
    g = rng.standard_normal(tuple(tout.shape))
    out.backward(fl.from_numpy(g))
    tout.backward(torch.from_numpy(g))
    for a, t in zip(ours, ref):
        check(a.grad, t.grad)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ws,kw", [
    ((5, 16, 3, 3), (12, 16, 3, 3), dict(padding=1)),                     # AlexNet's last planes
    ((4, 20, 7, 6), (8, 20, 5, 3), dict(padding=(2, 1))),
    ((3, 16, 8, 7), (6, 16, 3, 3), dict(stride=2, padding=1)),
    ((3, 16, 8, 8), (6, 16, 3, 2), dict(stride=(1, 2), padding=(2, 0), dilation=(2, 1))),
    ((2, 17, 4, 4), (5, 17, 3, 3), {}),
])
def test_channel_vector_rows_with_gradients(rng, monkeypatch, xs, ws, kw, dtype):
    """Note [Columns as rows of channel vectors]: 16 channels or more on planes of at most 8x8; the input and
    weight gradients (and the transposed convolution, which runs the input gradient's path) against torch,
    in one chunk, in chunks of an image and split between threads."""
    arrays = [rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)]
    ref = [torch.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    tout = F.conv2d(*ref, **kw)
    OH, OW = tout.shape[2:]
    stride = kw.get("stride", 1)
    stride = stride if isinstance(stride, tuple) else (stride, stride)
    pad = kw.get("padding", 0)
    pad = pad if isinstance(pad, tuple) else (pad, pad)
    assert conv_mod._rows_ok(xs, ws[2], ws[3], stride, pad, OH, OW, 1, np.dtype(dtype))
    g = rng.standard_normal(tuple(tout.shape)).astype(dtype)
    tout.backward(torch.from_numpy(g))
    for chunk_bytes, serial_below in ((conv_mod._CHUNK_BYTES, conv_mod._SERIAL_BELOW), (1, conv_mod._SERIAL_BELOW),
                                      (1, 0)):
        monkeypatch.setattr(conv_mod, "_CHUNK_BYTES", chunk_bytes)
        monkeypatch.setattr(conv_mod, "_SERIAL_BELOW", serial_below)
        ours = [fl.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
        out = fl.conv2d(*ours, **kw)
        check(out.detach(), tout.detach(), dtype)
        out.backward(fl.from_numpy(g))
        for a, t in zip(ours, ref):
            check(a.grad, t.grad, dtype)
    if "dilation" not in kw and stride == (1, 1):  # the transposed convolution runs the input gradient's path
        tw = torch.from_numpy(arrays[1].copy())  # (in, out, KH, KW): the forward weight as it is
        y = rng.standard_normal((xs[0], ws[0], OH, OW)).astype(dtype)
        check(fl.conv_transpose2d(fl.from_numpy(y), fl.from_numpy(tw.numpy()), padding=pad),
              F.conv_transpose2d(torch.from_numpy(y), tw, padding=pad), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ws,pad", [
    ((1, 16, 28, 27), (17, 16, 3, 3), (1, 1)),     # planar kernels (Note [Winograd transforms, planar]);
    ((1, 16, 29, 26), (16, 16, 3, 3), (0, 2)),     # odd output rows: the last tiles are cropped
    ((2, 16, 13, 14), (16, 16, 3, 3), (1, 1)),     # channels-last kernels below 27x27
    ((2, 16, 15, 16), (20, 16, 3, 3), (0, 0)),
    ((2, 17, 14, 16), (16, 17, 3, 3), (2, 0)),     # the input gradient runs with padding (0, 2)
    ((2, 16, 10, 10), (16, 16, 3, 3), (3, 3)),     # the input gradient's padding -1: im2col runs it
    ((2, 16, 8, 8), (16, 16, 3, 3), (1, 1)),       # small planes: Note [Winograd on small planes]
    ((3, 16, 9, 7), (17, 16, 3, 3), (1, 1)),
    ((2, 17, 10, 12), (16, 17, 3, 3), (0, 2)),
])
def test_winograd_layers_with_gradients(rng, monkeypatch, xs, ws, pad, dtype):
    """3x3 stride-1 layers of 16 channels or more on planes of 7x7 or more (Note [When Winograd pays]), planar
    and channels-last: forward, input and weight gradients and the transposed convolution against torch, in
    one chunk, in chunks of an image and split between threads."""
    arrays = [rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)]
    ref = [torch.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    tout = F.conv2d(*ref, padding=pad)
    OH, OW = tout.shape[2:]
    assert winograd_mod.usable(xs[1], ws[0], OH, OW, (3, 3), (1, 1), (1, 1), 1, np.dtype(dtype))
    g = rng.standard_normal(tuple(tout.shape)).astype(dtype)
    tout.backward(torch.from_numpy(g))
    for chunk_bytes, min_tiles, serial_below in ((winograd_mod._CHUNK_BYTES, winograd_mod._MIN_CHUNK_TILES,
                                                  conv_mod._SERIAL_BELOW), (1, 1, conv_mod._SERIAL_BELOW), (1, 1, 0)):
        monkeypatch.setattr(winograd_mod, "_CHUNK_BYTES", chunk_bytes)
        monkeypatch.setattr(winograd_mod, "_MIN_CHUNK_TILES", min_tiles)
        monkeypatch.setattr(conv_mod, "_SERIAL_BELOW", serial_below)
        ours = [fl.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
        out = fl.conv2d(*ours, padding=pad)
        check(out.detach(), tout.detach(), dtype)
        out.backward(fl.from_numpy(g))
        for a, t in zip(ours, ref):
            check(a.grad, t.grad, dtype)
    y = rng.standard_normal((xs[0], ws[0], OH, OW)).astype(dtype)  # (in, out, 3, 3): the forward's weight
    check(fl.conv_transpose2d(fl.from_numpy(y), fl.from_numpy(arrays[1]), padding=pad),
          F.conv_transpose2d(torch.from_numpy(y), torch.from_numpy(arrays[1]), padding=pad), dtype)


def test_winograd_only_where_it_pays():
    """Note [When Winograd pays]: 3x3, stride 1, no dilation or groups, float32 or float64, 16 channels or
    more each way, 4x4 tiles or more; everything else takes im2col."""
    ok = dict(C=16, O=16, OH=7, OW=8, kernel_size=(3, 3), stride=(1, 1), dilation=(1, 1), groups=1,
              dtype=np.dtype(np.float32))
    assert winograd_mod.usable(**ok)
    for change in (dict(C=15), dict(O=8), dict(OH=6, OW=6), dict(kernel_size=(5, 5)), dict(stride=(2, 2)),
                   dict(dilation=(1, 2)), dict(groups=2), dict(dtype=np.dtype(np.int64))):
        assert not winograd_mod.usable(**{**ok, **change}), change
