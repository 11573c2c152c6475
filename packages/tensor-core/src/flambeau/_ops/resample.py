"""Resampling operators: nearest and (bi)linear upsampling, pixel_shuffle / pixel_unshuffle.

Nearest and linear interpolation follow torch's source-index formulas exactly (``nearest_idx``,
``area_pixel_compute_source_index`` with ``align_corners``, user scales or ``in / out``). Each is
linear in its input: its backward is the transposed interpolation, and the backward operators' own
derivative is the forward operator again (double backward is exact). The CPU kernels (separable
interpolation matrices applied with BLAS) are in ``flambeau/_kernels/cpu/resample.py``.
pixel_shuffle and pixel_unshuffle are reshape/permute composites.

Kernel convention (every device; arrays in, array out):
    upsample_nearest1d / 2d: ``kernel(x, output_size, scales...) -> array``.
    upsample_linear1d / upsample_bilinear2d: ``kernel(x, output_size, align_corners, scales...)``.
    <op>_backward: ``kernel(grad, output_size, input_size, [align_corners,] scales...) -> array``
        of shape ``input_size``.
``scales`` are the user's scale factors (None: ``in / out`` is used), as in torch.
    grid_sampler_2d / 3d: ``kernel(x, grid, interpolation_mode, padding_mode, align_corners) -> array``
        ``(N, C, *grid.shape[1:-1])``; their _backward: ``kernel(grad, x, grid, ...) -> (grad_input,
        grad_grid)``. Modes are torch's enums (interpolation bilinear 0, nearest 1, bicubic 2; padding
        zeros 0, border 1, reflection 2); the fronts checked shapes, dtypes and devices.
"""

from __future__ import annotations

from flambeau._ops._common import Tensor, _wrap, check_tensor, record_if_needed
from flambeau._ops._registry import declare

__all__ = ["upsample_nearest1d", "upsample_nearest2d", "upsample_linear1d", "upsample_bilinear2d",
           "pixel_shuffle", "pixel_unshuffle", "grid_sampler_2d", "grid_sampler_2d_backward", "grid_sampler_3d",
           "grid_sampler_3d_backward"]


_S1 = "float? scales=None"
_S2 = "float? scales_h=None, float? scales_w=None"
NEAREST1D = declare(f"upsample_nearest1d(Tensor input, int[1] output_size, {_S1}) -> Tensor",
                    category="resampling", method=False)
NEAREST2D = declare(f"upsample_nearest2d(Tensor input, int[2] output_size, {_S2}) -> Tensor",
                    category="resampling", method=False)
LINEAR1D = declare(f"upsample_linear1d(Tensor input, int[1] output_size, bool align_corners, {_S1}) -> Tensor",
                   category="resampling", method=False)
BILINEAR2D = declare(f"upsample_bilinear2d(Tensor input, int[2] output_size, bool align_corners, {_S2}) -> Tensor",
                     category="resampling", method=False)
NEAREST1D_BACKWARD = declare(f"upsample_nearest1d_backward(Tensor grad_output, int[1] output_size, "
                             f"int[3] input_size, {_S1}) -> Tensor",
                             category="resampling", method=False)
NEAREST2D_BACKWARD = declare(f"upsample_nearest2d_backward(Tensor grad_output, int[2] output_size, "
                             f"int[4] input_size, {_S2}) -> Tensor",
                             category="resampling", method=False)
LINEAR1D_BACKWARD = declare(f"upsample_linear1d_backward(Tensor grad_output, int[1] output_size, int[3] input_size, "
                            f"bool align_corners, {_S1}) -> Tensor",
                            category="resampling", method=False)
BILINEAR2D_BACKWARD = declare(f"upsample_bilinear2d_backward(Tensor grad_output, int[2] output_size, "
                              f"int[4] input_size, bool align_corners, {_S2}) -> Tensor",
                              category="resampling", method=False)


def _size(output_size, n, name):
    if isinstance(output_size, int):
        output_size = (output_size,)
    try:
        size = tuple(int(s) for s in output_size)
    except TypeError:
        raise TypeError(f"{name}(): argument 'output_size' must be a sequence of {n} ints, "
                        f"not {type(output_size).__name__}") from None
    if len(size) != n:
        raise RuntimeError(f"{name}(): It is expected output_size equals to {n}, but got size {len(size)}")
    if any(s <= 0 for s in size):
        raise RuntimeError(f"{name}(): Input and output sizes should be greater than 0, but got output_size "
                           f"{list(size)}")
    return size


def _check_input(input, ndim, name):
    check_tensor(input, "input", name)
    if input.ndim != ndim:
        raise RuntimeError(f"{name}(): Expected {ndim}D input tensor, but got {input.ndim}D input "
                           f"of shape {list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name}(): expected a floating input, got {input.dtype}")
    if any(s == 0 for s in input.shape[2:]):
        raise RuntimeError(f"{name}(): Input and output sizes should be greater than 0, but got input "
                           f"{list(input.shape)}")


def _norm_args(args, takes_align):
    return tuple(None if a is None else (bool(a) if i == 0 and takes_align else float(a)) for i, a in enumerate(args))


def _run_forward(op, ndim, takes_align, input, output_size, args):
    _check_input(input, ndim, op.name)
    size = _size(output_size, ndim - 2, op.name)
    args = _norm_args(args, takes_align)
    dev = input._device
    out = _wrap(op.kernel(dev.type)(input._data, size, *args), dev)
    record_if_needed(op, (input, size) + args, {}, out)
    return out


def _run_backward(op, ndim, takes_align, grad_output, output_size, input_size, args):
    name = op.name
    check_tensor(grad_output, "grad_output", name)
    size = _size(output_size, ndim - 2, name)
    in_size = tuple(int(s) for s in input_size)
    if len(in_size) != ndim:
        raise RuntimeError(f"{name}(): It is expected input_size equals to {ndim}, but got size {len(in_size)}")
    expected = in_size[:2] + size
    if tuple(grad_output.shape) != expected:
        raise RuntimeError(f"{name}(): expected grad_output of shape {list(expected)}, got "
                           f"{list(grad_output.shape)}")
    args = _norm_args(args, takes_align)
    dev = grad_output._device
    out = _wrap(op.kernel(dev.type)(grad_output._data, size, in_size, *args), dev)
    record_if_needed(op, (grad_output, size, in_size) + args, {}, out)
    return out


@NEAREST1D.front
def upsample_nearest1d(input: Tensor, output_size, scales=None) -> Tensor:
    """Nearest-neighbour upsampling of ``(N, C, W)`` to ``(N, C, output_size[0])``, as torch's kernel.

    Args:
        input: floating ``(N, C, W)`` tensor.
        output_size: ``(W_out,)``.
        scales: the user's scale factor, used in the source index ``floor(dst * (1 / scales))``
            instead of ``in / out`` when given.

    Returns:
        ``(N, C, W_out)`` tensor of ``input``'s dtype.
    """
    return _run_forward(NEAREST1D, 3, False, input, output_size, (scales,))


@NEAREST2D.front
def upsample_nearest2d(input: Tensor, output_size, scales_h=None, scales_w=None) -> Tensor:
    """Nearest-neighbour upsampling of ``(N, C, H, W)`` to ``(N, C, *output_size)``, as torch's kernel.

    Args:
        input: floating ``(N, C, H, W)`` tensor.
        output_size: ``(H_out, W_out)``.
        scales_h, scales_w: the user's scale factors, used in the source index instead of
            ``in / out`` when given.

    Returns:
        ``(N, C, H_out, W_out)`` tensor of ``input``'s dtype.
    """
    return _run_forward(NEAREST2D, 4, False, input, output_size, (scales_h, scales_w))


@LINEAR1D.front
def upsample_linear1d(input: Tensor, output_size, align_corners: bool = False, scales=None) -> Tensor:
    """Linear interpolation of ``(N, C, W)`` to ``(N, C, output_size[0])``, as torch's kernel.

    Args:
        input: floating ``(N, C, W)`` tensor.
        output_size: ``(W_out,)``.
        align_corners: map the corner pixels' centres onto each other (source index
            ``dst * (in - 1) / (out - 1)``) instead of the half-pixel rule.
        scales: the user's scale factor, used instead of ``in / out`` when given.

    Returns:
        ``(N, C, W_out)`` tensor of ``input``'s dtype.
    """
    return _run_forward(LINEAR1D, 3, True, input, output_size, (align_corners, scales))


@BILINEAR2D.front
def upsample_bilinear2d(input: Tensor, output_size, align_corners: bool = False, scales_h=None,
                        scales_w=None) -> Tensor:
    """Bilinear interpolation of ``(N, C, H, W)`` to ``(N, C, *output_size)``, as torch's kernel.

    Args:
        input: floating ``(N, C, H, W)`` tensor.
        output_size: ``(H_out, W_out)``.
        align_corners: map the corner pixels' centres onto each other (source index
            ``dst * (in - 1) / (out - 1)``) instead of the half-pixel rule.
        scales_h, scales_w: the user's scale factors, used instead of ``in / out`` when given.

    Returns:
        ``(N, C, H_out, W_out)`` tensor of ``input``'s dtype.
    """
    return _run_forward(BILINEAR2D, 4, True, input, output_size, (align_corners, scales_h, scales_w))


_BACKWARD_DOC = """Gradient of ``{fwd}``: ``grad_output`` (shape ``input_size[:2] + output_size``) spread back
    onto ``input_size`` (the transposed interpolation). Linear in ``grad_output``; its own derivative
    is ``{fwd}``.

    Args:
        grad_output: gradient of the upsampled output.
        output_size: the forward's output spatial sizes.
        input_size: the forward input's shape.
        align_corners, scales...: as given to ``{fwd}``.

    Returns:
        tensor of shape ``input_size``.
    """


@NEAREST1D_BACKWARD.front
def upsample_nearest1d_backward(grad_output: Tensor, output_size, input_size, scales=None) -> Tensor:
    return _run_backward(NEAREST1D_BACKWARD, 3, False, grad_output, output_size, input_size, (scales,))


@NEAREST2D_BACKWARD.front
def upsample_nearest2d_backward(grad_output: Tensor, output_size, input_size, scales_h=None,
                                scales_w=None) -> Tensor:
    return _run_backward(NEAREST2D_BACKWARD, 4, False, grad_output, output_size, input_size, (scales_h, scales_w))


@LINEAR1D_BACKWARD.front
def upsample_linear1d_backward(grad_output: Tensor, output_size, input_size, align_corners: bool = False,
                               scales=None) -> Tensor:
    return _run_backward(LINEAR1D_BACKWARD, 3, True, grad_output, output_size, input_size, (align_corners, scales))


@BILINEAR2D_BACKWARD.front
def upsample_bilinear2d_backward(grad_output: Tensor, output_size, input_size, align_corners: bool = False,
                                 scales_h=None, scales_w=None) -> Tensor:
    return _run_backward(BILINEAR2D_BACKWARD, 4, True, grad_output, output_size, input_size,
                         (align_corners, scales_h, scales_w))


for _f in (upsample_nearest1d_backward, upsample_nearest2d_backward, upsample_linear1d_backward,
           upsample_bilinear2d_backward):
    _f.__doc__ = _BACKWARD_DOC.format(fwd=_f.__name__[:-9])


# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
def _declare_samples():
    from flambeau._ops._samples import SampleInput as S
    from flambeau._ops._samples import cases

    def aten(name):
        def ref(*args, **kwargs):
            import torch

            return getattr(torch.ops.aten, name)(*args, **kwargs)

        return ref

    def add(op, *builders):
        op.samples(cases(*builders), ref=aten(op.name))

    add(NEAREST1D, lambda mk, mki: S(mk((1, 2, 5)), (8,)), lambda mk, mki: S(mk((2, 2, 3)), (7,), 2.5).named("scale"),
        lambda mk, mki: S(mk((2, 2, 6)), (3,)).named("down"))
    add(NEAREST2D, lambda mk, mki: S(mk((1, 2, 3, 4)), (5, 7)), lambda mk, mki: S(mk((1, 2, 3, 2)), (6, 4)),
        lambda mk, mki: S(mk((1, 1, 3, 4), noncontiguous=True), (4, 9), 1.5, 2.3).named("scales"))
    add(LINEAR1D, lambda mk, mki: S(mk((1, 2, 5)), (8,), False), lambda mk, mki: S(mk((2, 2, 4)), (7,), True),
        lambda mk, mki: S(mk((1, 2, 5)), (3,), False, 1.7).named("scale"))
    add(BILINEAR2D, lambda mk, mki: S(mk((1, 2, 3, 4)), (5, 7), False),
        lambda mk, mki: S(mk((1, 2, 3, 4), noncontiguous=True), (4, 6), True).named("align noncontiguous"),
        lambda mk, mki: S(mk((1, 1, 3, 4)), (4, 9), False, 1.5, 2.3).named("scales"))
    add(NEAREST1D_BACKWARD, lambda mk, mki: S(mk((1, 2, 8)), (8,), (1, 2, 5)),
        lambda mk, mki: S(mk((2, 2, 7)), (7,), (2, 2, 3), 2.5).named("scale"))
    add(NEAREST2D_BACKWARD, lambda mk, mki: S(mk((1, 2, 5, 7)), (5, 7), (1, 2, 3, 4)),
        lambda mk, mki: S(mk((1, 1, 4, 9)), (4, 9), (1, 1, 3, 4), 1.5, 2.3).named("scales"))
    add(LINEAR1D_BACKWARD, lambda mk, mki: S(mk((1, 2, 8)), (8,), (1, 2, 5), False),
        lambda mk, mki: S(mk((2, 2, 7)), (7,), (2, 2, 4), True),
        lambda mk, mki: S(mk((1, 2, 3)), (3,), (1, 2, 5), False, 1.7).named("scale"))
    add(BILINEAR2D_BACKWARD, lambda mk, mki: S(mk((1, 2, 5, 7)), (5, 7), (1, 2, 3, 4), False),
        lambda mk, mki: S(mk((1, 2, 4, 6)), (4, 6), (1, 2, 3, 4), True),
        lambda mk, mki: S(mk((1, 1, 4, 9)), (4, 9), (1, 1, 3, 4), False, 1.5, 2.3).named("scales"))


_declare_samples()


# --- pixel shuffle (composites of reshape and permute) ------------------------------------------------
PIXEL_SHUFFLE = declare("pixel_shuffle(Tensor input, int upscale_factor) -> Tensor", category="resampling",
                        method=False, composite=True)
PIXEL_UNSHUFFLE = declare("pixel_unshuffle(Tensor input, int downscale_factor) -> Tensor", category="resampling",
                          method=False, composite=True)


@PIXEL_SHUFFLE.front
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """Rearrange ``(*, C * r**2, H, W)`` into ``(*, C, H * r, W * r)`` (sub-pixel convolution).

    Args:
        input: tensor with at least 3 dims; dim -3 divisible by ``upscale_factor ** 2``.
        upscale_factor: ``r``, a positive int.

    Returns:
        ``(*, C, H * r, W * r)`` tensor (a copy).
    """
    check_tensor(input, "input", "pixel_shuffle")
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError("pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                           f"of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


@PIXEL_UNSHUFFLE.front
def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """Rearrange ``(*, C, H * r, W * r)`` into ``(*, C * r**2, H, W)``: the inverse of pixel_shuffle.

    Args:
        input: tensor with at least 3 dims; its last two dims divisible by ``downscale_factor``.
        downscale_factor: ``r``, a positive int.

    Returns:
        ``(*, C * r**2, H, W)`` tensor (a copy).
    """
    check_tensor(input, "input", "pixel_unshuffle")
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} and input.size(-1)={w} are not divisible by {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


# --- grid sampling ---------------------------------------------------------------------------------------
_GRID_ARGS = "int interpolation_mode, int padding_mode, bool align_corners"
GRID_SAMPLER_2D = declare(f"grid_sampler_2d(Tensor input, Tensor grid, {_GRID_ARGS}) -> Tensor",
                          category="resampling", method=False)
GRID_SAMPLER_2D_BACKWARD = declare(f"grid_sampler_2d_backward(Tensor grad_output, Tensor input, Tensor grid, "
                                   f"{_GRID_ARGS}) -> (Tensor, Tensor)",
                                   category="resampling", method=False, differentiable=False)
GRID_SAMPLER_3D = declare(f"grid_sampler_3d(Tensor input, Tensor grid, {_GRID_ARGS}) -> Tensor",
                          category="resampling", method=False)
GRID_SAMPLER_3D_BACKWARD = declare(f"grid_sampler_3d_backward(Tensor grad_output, Tensor input, Tensor grid, "
                                   f"{_GRID_ARGS}) -> (Tensor, Tensor)",
                                   category="resampling", method=False, differentiable=False)

def _check_grid_sampler(input, grid, interpolation_mode, padding_mode, ndim, name):
    """torch's check_grid_sampler_common and check_grid_sampler_2d / _3d (``ndim`` 4 / 5), with its messages."""
    check_tensor(input, "input", name)
    check_tensor(grid, "grid", name)
    if input._device != grid._device:
        raise RuntimeError(f"grid_sampler(): expected input and grid to be on same device, but input is on "
                           f"{input._device} and grid is on {grid._device}")
    if input.ndim < 1 or grid.ndim < 1:
        raise RuntimeError(f"grid_sampler(): expected {ndim}D input and grid with same number of dimensions, but "
                           f"got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != input.ndim - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.ndim - 2} in last dimension, but got "
                           f"grid with sizes {list(grid.shape)}")
    for i in range(2, input.ndim):
        if input.shape[i] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {list(input.shape)} with dimension {i} being empty")
    if input.ndim != ndim or grid.ndim != ndim:
        raise RuntimeError(f"grid_sampler(): expected {ndim}D input and grid with same number of dimensions, but "
                           f"got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if ndim == 5 and interpolation_mode == 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input.dtype.is_floating_point or input.dtype.is_complex:
        raise NotImplementedError(f'"{name}" not implemented for {input.dtype}')
    if grid.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {input.dtype.scalar_name} but found {grid.dtype.scalar_name}")
    if interpolation_mode not in (0, 1, 2):
        raise RuntimeError(f"grid_sampler(): interpolation_mode must be 0 (bilinear), 1 (nearest) or 2 (bicubic), "
                           f"got {interpolation_mode}")
    if padding_mode not in (0, 1, 2):
        raise RuntimeError(f"grid_sampler(): padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), "
                           f"got {padding_mode}")


def _grid_forward(op, ndim, input, grid, interpolation_mode, padding_mode, align_corners):
    interpolation_mode, padding_mode, align_corners = int(interpolation_mode), int(padding_mode), bool(align_corners)
    _check_grid_sampler(input, grid, interpolation_mode, padding_mode, ndim, op.name)
    dev = input._device
    out = _wrap(op.kernel(dev.type)(input._data, grid._data, interpolation_mode, padding_mode, align_corners), dev)
    record_if_needed(op, (input, grid, interpolation_mode, padding_mode, align_corners), {}, out)
    return out


def _grid_backward(op, ndim, grad_output, input, grid, interpolation_mode, padding_mode, align_corners):
    interpolation_mode, padding_mode, align_corners = int(interpolation_mode), int(padding_mode), bool(align_corners)
    name = op.name
    _check_grid_sampler(input, grid, interpolation_mode, padding_mode, ndim, name)
    check_tensor(grad_output, "grad_output", name)
    expected = tuple(input.shape[:2]) + tuple(grid.shape[1:-1])
    if tuple(grad_output.shape) != expected or grad_output._device != input._device:
        raise RuntimeError(f"{name}(): expected grad_output of shape {list(expected)} on {input._device}, got "
                           f"{list(grad_output.shape)} on {grad_output._device}")
    dev = input._device
    gi, gg = op.kernel(dev.type)(grad_output._data, input._data, grid._data, interpolation_mode, padding_mode,
                                 align_corners)
    return _wrap(gi, dev), _wrap(gg, dev)


@GRID_SAMPLER_2D.front
def grid_sampler_2d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    """Sample ``input`` at the normalized locations of ``grid`` (the primitive of ``F.grid_sample``).

    Args:
        input: floating ``(N, C, H, W)`` tensor.
        grid: ``(N, OH, OW, 2)`` tensor of ``input``'s dtype; ``grid[n, h, w] = (x, y)`` in ``[-1, 1]``
            spans the input's width and height (``-1`` the left/top edge, ``1`` the right/bottom one).
        interpolation_mode: 0 bilinear, 1 nearest (halves round to even), 2 bicubic (``A = -0.75``).
        padding_mode: 0 zeros, 1 border, 2 reflection: the value of locations outside the input.
        align_corners: ``-1`` and ``1`` are the corner pixels' centres (True) or their outer edges (False).

    Returns:
        ``(N, C, OH, OW)`` tensor of ``input``'s dtype.
    """
    return _grid_forward(GRID_SAMPLER_2D, 4, input, grid, interpolation_mode, padding_mode, align_corners)


@GRID_SAMPLER_3D.front
def grid_sampler_3d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    """Volumetric :func:`grid_sampler_2d`: ``input`` ``(N, C, D, H, W)``, ``grid`` ``(N, OD, OH, OW, 3)``.

    ``grid[n, d, h, w] = (x, y, z)`` (x along W, z along D); interpolation 0 (trilinear) or 1
    (nearest), bicubic is refused as torch does. Returns ``(N, C, OD, OH, OW)``.
    """
    return _grid_forward(GRID_SAMPLER_3D, 5, input, grid, interpolation_mode, padding_mode, align_corners)


_GRID_BACKWARD_DOC = """Gradients of :func:`{fwd}` with respect to ``input`` and ``grid``.

    Args:
        grad_output: gradient of the output, ``input.shape[:2] + grid.shape[1:-1]``.
        input, grid, interpolation_mode, padding_mode, align_corners: the forward's arguments.

    Returns:
        ``(grad_input, grad_grid)`` of ``input``'s and ``grid``'s shapes; ``grad_grid`` is zero for
        nearest interpolation. Not differentiable again (as torch's).
    """


@GRID_SAMPLER_2D_BACKWARD.front
def grid_sampler_2d_backward(grad_output: Tensor, input: Tensor, grid: Tensor, interpolation_mode: int,
                             padding_mode: int, align_corners: bool) -> tuple:
    return _grid_backward(GRID_SAMPLER_2D_BACKWARD, 4, grad_output, input, grid, interpolation_mode, padding_mode,
                          align_corners)


@GRID_SAMPLER_3D_BACKWARD.front
def grid_sampler_3d_backward(grad_output: Tensor, input: Tensor, grid: Tensor, interpolation_mode: int,
                             padding_mode: int, align_corners: bool) -> tuple:
    return _grid_backward(GRID_SAMPLER_3D_BACKWARD, 5, grad_output, input, grid, interpolation_mode, padding_mode,
                          align_corners)


for _f in (grid_sampler_2d_backward, grid_sampler_3d_backward):
    _f.__doc__ = _GRID_BACKWARD_DOC.format(fwd=_f.__name__[:-9])


def _declare_grid_samples():
    from flambeau._ops._samples import SampleInput as S
    from flambeau._ops._samples import cases

    def ref(name):
        def call(*args):
            import torch

            if name.endswith("_backward"):
                return getattr(torch.ops.aten, name)(*args, [True, True])
            return getattr(torch, name)(*args)

        return call

    def grid(mk, shape):
        return mk(shape, low=-1.2, high=1.2)

    builders2, builders3 = [], []
    for mode, pad, align in ((0, 0, False), (0, 1, True), (0, 2, False), (1, 0, True), (1, 2, False),
                             (2, 1, False), (2, 2, True), (2, 0, False)):
        def build(mk, mki, mode=mode, pad=pad, align=align):
            return S(mk((2, 2, 3, 4)), grid(mk, (2, 3, 2, 2)), mode, pad, align).named(f"m{mode}p{pad}a{int(align)}")
        builders2.append(build)
        if mode != 2:
            def build3(mk, mki, mode=mode, pad=pad, align=align):
                return S(mk((1, 2, 2, 3, 2)), grid(mk, (1, 2, 2, 1, 3)), mode, pad, align).named(
                    f"m{mode}p{pad}a{int(align)}")
            builders3.append(build3)
    GRID_SAMPLER_2D.samples(cases(*builders2), ref=ref("grid_sampler_2d"))
    GRID_SAMPLER_3D.samples(cases(*builders3), ref=ref("grid_sampler_3d"))
    GRID_SAMPLER_2D_BACKWARD.samples(
        cases(lambda mk, mki: S(mk((1, 2, 3, 2)), mk((1, 2, 3, 4)), grid(mk, (1, 3, 2, 2)), 0, 2, False)),
        ref=ref("grid_sampler_2d_backward"), gradcheck=False)
    GRID_SAMPLER_3D_BACKWARD.samples(
        cases(lambda mk, mki: S(mk((1, 2, 2, 1, 3)), mk((1, 2, 2, 3, 2)), grid(mk, (1, 2, 1, 3, 3)), 0, 1, True)),
        ref=ref("grid_sampler_3d_backward"), gradcheck=False)


_declare_grid_samples()
