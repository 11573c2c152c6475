"""Pooling operators: max, average and adaptive pooling over 1-D and 2-D planes.

Every pooling reduces windows of each ``(H, W)`` plane of its input; the leading dimensions (batch
and channels, or channels alone for unbatched inputs) are just a list of planes, and 1-D pooling is
2-D pooling over planes of height 1. Regular and adaptive pooling share their kernels, which differ
only in the per-position window tables (the CPU kernels: ``flambeau/_kernels/cpu/pooling.py``).

Max pooling indices are flat positions within the input plane (``ih * W + iw``), as torch's
``max_pool2d_with_indices``; its backward scatters the gradient through them
(``max_pool2d_backward``). Integer inputs pool exactly below 2**53 (average pooling truncates, as
torch does).

Kernel convention (every device; arrays in, arrays out; ``x`` is ``(..., H, W)``):
    max_pool2d_with_indices: ``kernel(x, (kh, kw), (sh, sw), (ph, pw), (dh, dw), ceil_mode)
        -> (values, int64 indices)``.
    adaptive_max_pool2d: ``kernel(x, (oh, ow)) -> (values, indices)``.
    max_pool2d_backward: ``kernel(g, indices, input_size) -> grad_input``.
    avg_pool2d: ``kernel(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)``.
    avg_pool2d_backward: ``kernel(g, input_size, kernel_size, stride, padding, ceil_mode, count_include_pad,
        divisor_override)``.
    adaptive_avg_pool2d: ``kernel(x, output_size)``; adaptive_avg_pool2d_backward: ``kernel(g, input_size)``.
"""

from __future__ import annotations

from flambeau._kernels.cpu.pooling import _out_len
from flambeau._ops._common import Tensor, _wrap, check_tensor, grad_state, record
from flambeau._ops._registry import declare

__all__ = ["max_pool1d", "max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices", "avg_pool1d",
           "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d"]


# --- argument checks -----------------------------------------------------------------------------------
def _tuple(value, n: int, argname: str, opname: str):
    if isinstance(value, bool):
        raise TypeError(f"{opname}(): argument '{argname}' must be an int or a tuple of {n} ints, not bool")
    if isinstance(value, int):
        return (value,) * n
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if len(value) == 1:
            return (value[0],) * n
        if len(value) == n:
            return tuple(value)
        raise RuntimeError(f"{opname}: {argname} must either be a single int, or a tuple of {n} ints")
    raise TypeError(f"{opname}(): argument '{argname}' must be an int or a tuple of {n} ints, "
                    f"not {type(value).__name__}")


def _check_input(input, opname: str, dim: int):
    check_tensor(input, "input", opname)
    if input.ndim not in (dim + 1, dim + 2) or any(n == 0 for n in input.shape[-dim - 1:]):
        if dim == 2:
            raise RuntimeError(f"{opname}: non-empty 3D or 4D (batch mode) tensor expected for input, but got "
                               f"input of size: {list(input.shape)}")
        raise RuntimeError(f"{opname}: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                           f"input, but got: {list(input.shape)}")
    if input.dtype.name == "bool":
        raise NotImplementedError(f"\"{opname}\" not implemented for 'Bool'")


def _check_window(opname, shape, kernel, stride, padding, dilation, ceil_mode):
    if any(k <= 0 for k in kernel):
        raise RuntimeError(f"{opname}: kernel_size must be greater than zero, but got {list(kernel)}")
    if any(s <= 0 for s in stride):
        raise RuntimeError(f"{opname}: stride should not be zero, but got {list(stride)}")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"{opname}: dilation should be greater than zero, but got {list(dilation)}")
    for k, p, d in zip(kernel, padding, dilation):
        if p < 0 or p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(f"{opname}: pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
    spatial = shape[-2:]
    out = [_out_len(n, k, s, p, d, ceil_mode) for n, k, s, p, d in zip(spatial, kernel, stride, padding, dilation)]
    if any(o <= 0 for o in out):
        c = shape[-3] if len(shape) >= 3 else 1
        raise RuntimeError(f"{opname}: Given input size: ({c}x{'x'.join(map(str, spatial))}). Calculated output "
                           f"size: ({c}x{'x'.join(map(str, out))}). Output size is too small")


def _lift(input, dim):
    """A 1-D pooling's input as 2-D planes of height 1."""
    return input.unsqueeze(-2) if dim == 1 else input


def _drop(out, dim):
    return out.squeeze(-2) if dim == 1 else out


def _check_pool_backward(opname, grad_output, input_size: tuple, out_hw: tuple) -> None:
    """``grad_output`` must be ``input_size``'s planes pooled to ``out_hw``: the backward kernels loop over
    the planes and windows of ``grad_output`` and write into planes of ``input_size``."""
    check_tensor(grad_output, "grad_output", opname)
    expected = input_size[:-2] + tuple(out_hw)
    if len(input_size) < 2 or tuple(grad_output.shape) != expected:
        raise RuntimeError(f"{opname}(): expected grad_output of shape {list(expected)} (input_size "
                           f"{list(input_size)} pooled), got {list(grad_output.shape)}")


# --- max pooling -------------------------------------------------------------------------------------------
MAX_POOL2D_WITH_INDICES = declare(
    "max_pool2d_with_indices(Tensor input, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
    "int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
    category="pooling", method=False)
MAX_POOL2D_BACKWARD = declare(
    "max_pool2d_backward(Tensor grad_output, Tensor indices, int[] input_size) -> Tensor",
    category="pooling", method=False, function=False)


def _max_pool(opname, dim, input, kernel_size, stride, padding, dilation, ceil_mode):
    _check_input(input, opname, dim)
    k = _tuple(kernel_size, dim, "kernel_size", opname)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _tuple(stride, dim, "stride", opname)
    p = _tuple(padding, dim, "padding", opname)
    d = _tuple(dilation, dim, "dilation", opname)
    if dim == 1:
        if k[0] > 0 and not 0 <= p[0] <= k[0] // 2:  # torch's 1-D check ignores the dilation
            raise RuntimeError(f"{opname}: pad should be smaller than or equal to half of kernel size, but got "
                               f"padW = {p[0]}, padH = 0, kW = {k[0]}, kH = 1")
        k, s, p, d = (1,) + k, (1,) + s, (0,) + p, (1,) + d
    x = _lift(input, dim)
    _check_window(opname, x.shape, k, s, p, d, ceil_mode)
    return max_pool2d_with_indices(x, k, s, p, d, bool(ceil_mode), _checked=True)


@MAX_POOL2D_WITH_INDICES.front
def max_pool2d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False, return_indices: bool = False, *, _checked: bool = False):
    """2-D max pooling that also returns where each maximum came from (torch's ``max_pool2d_with_indices``).

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``.
        kernel_size: int or pair, the window.
        stride: int or pair; defaults to ``kernel_size``.
        padding: implicit ``-inf`` padding on both sides (at most half the effective kernel size).
        dilation: spacing between window taps.
        ceil_mode: round the output size up instead of down.
        return_indices: taken and ignored, as torch's (both are always returned).

    Returns:
        ``(values, indices)``: values of ``input``'s dtype and int64 indices, both
        ``(N, C, H_out, W_out)``; indices are flat positions ``ih * W + iw`` within each input plane.
        A NaN in a window wins, as in torch.
    """
    if not _checked:
        return _max_pool("max_pool2d_with_indices", 2, input, kernel_size, stride, padding, dilation, ceil_mode)
    out, idx = MAX_POOL2D_WITH_INDICES.kernel(input._device.type)(
        input._data, kernel_size, stride, padding, dilation, ceil_mode)
    dev = input._device
    res = (_wrap(out, dev), _wrap(idx, dev))
    if grad_state.enabled and input._requires_grad:
        record(MAX_POOL2D_WITH_INDICES, (input, kernel_size, stride, padding, dilation, ceil_mode), {}, res)
    return res


@MAX_POOL2D_BACKWARD.front
def max_pool2d_backward(grad_output: Tensor, indices: Tensor, input_size) -> Tensor:
    """Gradient of max pooling: ``grad_output`` scattered (summed) into zeros of ``input_size`` at ``indices``.

    Args:
        grad_output: ``(..., H_out, W_out)`` gradient of the pooled values.
        indices: int64 flat positions in each ``(H, W)`` input plane, shaped like ``grad_output``.
        input_size: the shape of the pooled input ``(..., H, W)``.

    Returns:
        A tensor of ``input_size`` and ``grad_output``'s dtype (used by max and adaptive max pooling).
    """
    size = tuple(input_size)
    _check_pool_backward("max_pool2d_backward", grad_output, size, tuple(grad_output.shape[-2:]))
    check_tensor(indices, "indices", "max_pool2d_backward")
    if tuple(indices.shape) != tuple(grad_output.shape) or indices.dtype.name != "int64" \
            or indices._device is not grad_output._device:
        raise RuntimeError(f"max_pool2d_backward(): expected int64 indices of grad_output's shape "
                           f"{list(grad_output.shape)} on {grad_output._device}, got {indices.dtype} of shape "
                           f"{list(indices.shape)} on {indices._device}")
    out = _wrap(MAX_POOL2D_BACKWARD.kernel(grad_output._device.type)(grad_output._data, indices._data, size),
                grad_output._device)
    if grad_state.enabled and grad_output._requires_grad:
        record(MAX_POOL2D_BACKWARD, (grad_output, indices, size), {}, out)
    return out


MAX_POOL1D_WITH_INDICES = declare(
    "max_pool1d_with_indices(Tensor input, int[1] kernel_size, int[1] stride=[], int[1] padding=0, "
    "int[1] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
    category="pooling", method=False, composite=True)
MAX_POOL1D = declare("max_pool1d(Tensor input, int[1] kernel_size, int[1] stride=[], int[1] padding=0, "
                     "int[1] dilation=1, bool ceil_mode=False) -> Tensor",
                     category="pooling", method=False, composite=True)
MAX_POOL2D = declare("max_pool2d(Tensor input, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
                     "int[2] dilation=1, bool ceil_mode=False) -> Tensor",
                     category="pooling", method=False, composite=True)


@MAX_POOL1D_WITH_INDICES.front
def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False, return_indices: bool = False):
    """1-D max pooling over ``(N, C, L)`` or ``(C, L)`` returning ``(values, indices)`` (indices into ``L``;
    ``return_indices`` is taken and ignored, as torch's: both are always returned).

    Arguments as :func:`max_pool1d`.
    """
    out, idx = _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode)
    return _drop(out, 1), _drop(idx, 1)


@MAX_POOL1D.front
def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """1-D max pooling over ``(N, C, L)`` or ``(C, L)``.

    Args:
        input: a tensor ``(N, C, L)`` or unbatched ``(C, L)``.
        kernel_size: the window length.
        stride: defaults to ``kernel_size``.
        padding: implicit ``-inf`` padding on both sides (at most half the effective kernel size).
        dilation: spacing between taps.
        ceil_mode: round the output length up.
        return_indices: also return the int64 positions of the maxima along ``L``.

    Returns:
        ``(N, C, L_out)`` with ``L_out = (L + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1``
        (rounded up with ``ceil_mode``), or ``(values, indices)``.
    """
    out, idx = max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, idx) if return_indices else out


@MAX_POOL2D.front
def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """2-D max pooling over ``(N, C, H, W)`` or ``(C, H, W)``.

    Args:
        input: a tensor ``(N, C, H, W)`` or unbatched ``(C, H, W)``.
        kernel_size: int or pair.
        stride: int or pair; defaults to ``kernel_size``.
        padding: implicit ``-inf`` padding (at most half the effective kernel size).
        dilation: spacing between window taps.
        ceil_mode: round output sizes up.
        return_indices: also return the int64 flat positions ``ih * W + iw`` of the maxima.

    Returns:
        ``(N, C, H_out, W_out)``, or ``(values, indices)`` with ``return_indices``.
    """
    out, idx = _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, idx) if return_indices else out


# --- average pooling ---------------------------------------------------------------------------------------
AVG_POOL2D = declare(
    "avg_pool2d(Tensor input, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, "
    "bool count_include_pad=True, int? divisor_override=None) -> Tensor",
    category="pooling", method=False)
AVG_POOL2D_BACKWARD = declare(
    "avg_pool2d_backward(Tensor grad_output, int[] input_size, int[2] kernel_size, int[2] stride, int[2] padding, "
    "bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor",
    category="pooling", method=False, function=False)
AVG_POOL1D = declare(
    "avg_pool1d(Tensor input, int[1] kernel_size, int[1] stride=[], int[1] padding=0, bool ceil_mode=False, "
    "bool count_include_pad=True) -> Tensor",
    category="pooling", method=False, composite=True)


def _avg_args(opname, dim, input, kernel_size, stride, padding, ceil_mode, divisor_override):
    _check_input(input, opname, dim)
    k = _tuple(kernel_size, dim, "kernel_size", opname)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _tuple(stride, dim, "stride", opname)
    p = _tuple(padding, dim, "padding", opname)
    if dim == 1:
        k, s, p = (1,) + k, (1,) + s, (0,) + p
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    x = _lift(input, dim)
    _check_window(opname, x.shape, k, s, p, (1, 1), ceil_mode)
    return x, k, s, p


@AVG_POOL2D.front
def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None, *, _checked: bool = False) -> Tensor:
    """2-D average pooling over ``(N, C, H, W)`` or ``(C, H, W)``.

    Args:
        input: a tensor ``(N, C, H, W)`` or unbatched ``(C, H, W)``.
        kernel_size: int or pair.
        stride: int or pair; defaults to ``kernel_size``.
        padding: implicit zero padding on both sides (at most half the kernel size).
        ceil_mode: round output sizes up.
        count_include_pad: count the zero padding in the divisor.
        divisor_override: if given, divide every window's sum by it instead.

    Returns:
        ``(N, C, H_out, W_out)`` of ``input``'s dtype (integer inputs truncate, as in torch).
    """
    if not _checked:
        input, kernel_size, stride, padding = _avg_args("avg_pool2d", 2, input, kernel_size, stride, padding,
                                                        ceil_mode, divisor_override)
    args = (tuple(kernel_size), tuple(stride), tuple(padding), bool(ceil_mode), bool(count_include_pad),
            divisor_override)
    out = _wrap(AVG_POOL2D.kernel(input._device.type)(input._data, *args), input._device)
    if grad_state.enabled and input._requires_grad:
        record(AVG_POOL2D, (input, *args), {}, out)
    return out


@AVG_POOL2D_BACKWARD.front
def avg_pool2d_backward(grad_output: Tensor, input_size, kernel_size, stride, padding, ceil_mode: bool,
                        count_include_pad: bool, divisor_override) -> Tensor:
    """Gradient of :func:`avg_pool2d`: each window's gradient spread evenly over the window.

    Args:
        grad_output: ``(..., H_out, W_out)``.
        input_size: shape of the pooled input.
        kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override: as given to the pooling.

    Returns:
        A tensor of ``input_size`` and ``grad_output``'s dtype.
    """
    size = tuple(input_size)
    args = (tuple(kernel_size), tuple(stride), tuple(padding), bool(ceil_mode), bool(count_include_pad),
            divisor_override)
    if len(size) >= 2:
        (kh, kw), (sh, sw), (ph, pw) = args[:3]
        out_hw = (_out_len(size[-2], kh, sh, ph, 1, ceil_mode), _out_len(size[-1], kw, sw, pw, 1, ceil_mode))
    else:
        out_hw = ()
    _check_pool_backward("avg_pool2d_backward", grad_output, size, out_hw)
    out = _wrap(AVG_POOL2D_BACKWARD.kernel(grad_output._device.type)(grad_output._data, size, *args),
                grad_output._device)
    if grad_state.enabled and grad_output._requires_grad:
        record(AVG_POOL2D_BACKWARD, (grad_output, size, *args), {}, out)
    return out


@AVG_POOL1D.front
def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """1-D average pooling over ``(N, C, L)`` or ``(C, L)``.

    Args:
        input: a tensor ``(N, C, L)`` or unbatched ``(C, L)``.
        kernel_size: the window length.
        stride: defaults to ``kernel_size``.
        padding: implicit zero padding on both sides (at most half the kernel size).
        ceil_mode: round the output length up.
        count_include_pad: count the zero padding in the divisor.

    Returns:
        ``(N, C, L_out)`` with ``L_out = (L + 2 * padding - kernel_size) // stride + 1``.
    """
    x, k, s, p = _avg_args("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, None)
    return _drop(avg_pool2d(x, k, s, p, ceil_mode, count_include_pad, None, _checked=True), 1)


# --- adaptive pooling ----------------------------------------------------------------------------------------
ADAPTIVE_AVG_POOL2D = declare("adaptive_avg_pool2d(Tensor input, int[2] output_size) -> Tensor",
                              category="pooling", method=False)
ADAPTIVE_AVG_POOL2D_BACKWARD = declare(
    "adaptive_avg_pool2d_backward(Tensor grad_output, int[] input_size) -> Tensor",
    category="pooling", method=False, function=False)
ADAPTIVE_MAX_POOL2D = declare("adaptive_max_pool2d(Tensor input, int[2] output_size) -> (Tensor, Tensor)",
                              category="pooling", method=False)
ADAPTIVE_AVG_POOL1D = declare("adaptive_avg_pool1d(Tensor input, int[1] output_size) -> Tensor",
                              category="pooling", method=False, composite=True)
ADAPTIVE_MAX_POOL1D = declare("adaptive_max_pool1d(Tensor input, int[1] output_size) -> (Tensor, Tensor)",
                              category="pooling", method=False, composite=True)


def _adaptive_args(opname, dim, input, output_size):
    check_tensor(input, "input", opname)
    if input.ndim not in (dim + 1, dim + 2):
        raise RuntimeError(f"{opname}(): Expected {dim + 1}D or {dim + 2}D tensor, but got {list(input.shape)}")
    if any(n == 0 for n in input.shape[1:]):
        raise RuntimeError(f"{opname}(): Expected input to have non-zero size for non-batch dimensions, but input "
                           f"has sizes {list(input.shape)} with dimension {input.shape[1:].index(0) + 1} being "
                           "empty")
    if isinstance(output_size, int) and not isinstance(output_size, bool):
        size = (output_size,) * dim
    elif isinstance(output_size, (tuple, list)) and len(output_size) == dim:
        spatial = input.shape[-dim:]
        size = tuple(spatial[i] if v is None else v for i, v in enumerate(output_size))
    else:
        raise RuntimeError(f"{opname}(): internal error: output_size.size() must be {dim}")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in size):
        raise RuntimeError(f"{opname}(): elements of output_size must be greater than or equal to 0 but received "
                           f"{list(size)}")
    if input.dtype.name == "bool":
        raise NotImplementedError(f"\"{opname}\" not implemented for 'Bool'")
    return _lift(input, dim), ((1,) + size if dim == 1 else size)


@ADAPTIVE_AVG_POOL2D.front
def adaptive_avg_pool2d(input: Tensor, output_size, *, _checked: bool = False) -> Tensor:
    """2-D adaptive average pooling: ``input`` ``(N, C, H, W)`` or ``(C, H, W)`` to ``output_size``.

    Output position ``i`` of a dimension of size ``n`` averages input positions
    ``floor(i * n / out)`` to ``ceil((i + 1) * n / out)`` (exclusive), as in torch.

    Args:
        input: a float tensor ``(N, C, H, W)`` or ``(C, H, W)``.
        output_size: int or pair ``(H_out, W_out)``; None in the pair keeps that input size.

    Returns:
        ``(N, C, H_out, W_out)`` (or ``(C, H_out, W_out)``).
    """
    if not _checked:
        input, output_size = _adaptive_args("adaptive_avg_pool2d", 2, input, output_size)
    size = tuple(output_size)
    out = _wrap(ADAPTIVE_AVG_POOL2D.kernel(input._device.type)(input._data, size), input._device)
    if grad_state.enabled and input._requires_grad:
        record(ADAPTIVE_AVG_POOL2D, (input, size), {}, out)
    return out


@ADAPTIVE_AVG_POOL2D_BACKWARD.front
def adaptive_avg_pool2d_backward(grad_output: Tensor, input_size) -> Tensor:
    """Gradient of :func:`adaptive_avg_pool2d`: each output's gradient spread evenly over its window.

    Args:
        grad_output: ``(..., H_out, W_out)``.
        input_size: shape of the pooled input ``(..., H, W)``.

    Returns:
        A tensor of ``input_size`` and ``grad_output``'s dtype.
    """
    size = tuple(input_size)
    _check_pool_backward("adaptive_avg_pool2d_backward", grad_output, size, tuple(grad_output.shape[-2:]))
    out = _wrap(ADAPTIVE_AVG_POOL2D_BACKWARD.kernel(grad_output._device.type)(grad_output._data, size),
                grad_output._device)
    if grad_state.enabled and grad_output._requires_grad:
        record(ADAPTIVE_AVG_POOL2D_BACKWARD, (grad_output, size), {}, out)
    return out


@ADAPTIVE_MAX_POOL2D.front
def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False, *, _checked: bool = False):
    """2-D adaptive max pooling: ``input`` ``(N, C, H, W)`` or ``(C, H, W)`` to ``output_size``.

    Args:
        input: a tensor ``(N, C, H, W)`` or ``(C, H, W)``.
        output_size: int or pair ``(H_out, W_out)``; None in the pair keeps that input size.
        return_indices: also return the int64 flat positions ``ih * W + iw`` of the maxima.

    Returns:
        ``(N, C, H_out, W_out)``, or ``(values, indices)`` with ``return_indices`` (windows as in
        :func:`adaptive_avg_pool2d`).
    """
    if not _checked:
        input, output_size = _adaptive_args("adaptive_max_pool2d", 2, input, output_size)
    size = tuple(output_size)
    out, idx = ADAPTIVE_MAX_POOL2D.kernel(input._device.type)(input._data, size)
    dev = input._device
    res = (_wrap(out, dev), _wrap(idx, dev))
    if grad_state.enabled and input._requires_grad:
        record(ADAPTIVE_MAX_POOL2D, (input, size), {}, res)
    return res if return_indices else res[0]


@ADAPTIVE_AVG_POOL1D.front
def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """1-D adaptive average pooling of ``(N, C, L)`` or ``(C, L)`` to length ``output_size``.

    Args:
        input: a float tensor ``(N, C, L)`` or ``(C, L)``.
        output_size: the output length (int or 1-tuple).

    Returns:
        ``(N, C, output_size)`` (or ``(C, output_size)``).
    """
    x, size = _adaptive_args("adaptive_avg_pool1d", 1, input, output_size)
    return _drop(adaptive_avg_pool2d(x, size, _checked=True), 1)


@ADAPTIVE_MAX_POOL1D.front
def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """1-D adaptive max pooling of ``(N, C, L)`` or ``(C, L)`` to length ``output_size``.

    Args:
        input: a tensor ``(N, C, L)`` or ``(C, L)``.
        output_size: the output length (int or 1-tuple).
        return_indices: also return the int64 positions of the maxima along ``L``.

    Returns:
        ``(N, C, output_size)``, or ``(values, indices)`` with ``return_indices``.
    """
    x, size = _adaptive_args("adaptive_max_pool1d", 1, input, output_size)
    out, idx = adaptive_max_pool2d(x, size, True, _checked=True)
    out, idx = _drop(out, 1), _drop(idx, 1)
    return (out, idx) if return_indices else out


# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
def _declare_samples():
    from flambeau._ops._samples import FLOAT, FLOAT_INT, cases
    from flambeau._ops._samples import SampleInput as S

    def torch_op(name):
        """``torch.ops.aten.<name>`` called with a zero tensor of ``input_size`` for the input (the
        backward operators take the input's size, torch's the input)."""
        def ref(g, size, *args):
            import torch

            return getattr(torch.ops.aten, name)(g, torch.zeros(tuple(size), dtype=g.dtype), *args)

        return ref

    def max_backward_ref(g, indices, size):
        import torch

        size = tuple(size)
        flat = torch.zeros(size, dtype=g.dtype).flatten(-2)
        return flat.scatter_add(-1, indices.flatten(-2), g.flatten(-2)).reshape(size)

    f = "nn.functional."
    MAX_POOL2D_WITH_INDICES.samples(cases(
        lambda mk, mki: S(mk((1, 2, 4, 5)), (2, 2)),
        lambda mk, mki: S(mk((2, 5, 4)), (3, 2), (2, 1), (1, 1), (1, 2), True).named("ceil dilation"),
        lambda mk, mki: S(mk((1, 1, 7, 5), noncontiguous=True), 3, 2, 1, 2).named("noncontiguous")),
        dtypes=FLOAT_INT, ref=f + "max_pool2d_with_indices")
    MAX_POOL2D_BACKWARD.samples(cases(
        lambda mk, mki: S(mk((1, 2, 2, 2)), mki((1, 2, 2, 2), 20), (1, 2, 4, 5)),
        lambda mk, mki: S(mk((2, 3, 2)), mki((2, 3, 2), 12), (2, 4, 3)).named("repeated indices")),
        ref=max_backward_ref)
    AVG_POOL2D.samples(cases(
        lambda mk, mki: S(mk((1, 2, 4, 5)), (2, 2)),
        lambda mk, mki: S(mk((2, 5, 4)), (3, 2), (2, 1), (1, 1), True, False).named("ceil no pad count"),
        lambda mk, mki: S(mk((1, 1, 5, 6), noncontiguous=True), 3, 2, 1, False, True, 5).named("divisor")),
        dtypes=FLOAT_INT, ref=f + "avg_pool2d")
    AVG_POOL2D_BACKWARD.samples(cases(
        lambda mk, mki: S(mk((1, 2, 2, 2)), (1, 2, 4, 5), (2, 2), (2, 2), (0, 0), False, True, None),
        lambda mk, mki: S(mk((2, 3, 5)), (2, 5, 4), (3, 2), (2, 1), (1, 1), True, False, None).named("ceil"),
        lambda mk, mki: S(mk((1, 1, 3, 3)), (1, 1, 5, 6), (3, 3), (2, 2), (1, 1), False, True, 5).named("divisor")),
        ref=torch_op("avg_pool2d_backward"))
    ADAPTIVE_AVG_POOL2D.samples(cases(
        lambda mk, mki: S(mk((1, 2, 5, 4)), (3, 2)),
        lambda mk, mki: S(mk((2, 4, 5), noncontiguous=True), 3).named("noncontiguous")),
        ref=f + "adaptive_avg_pool2d")
    ADAPTIVE_AVG_POOL2D_BACKWARD.samples(cases(
        lambda mk, mki: S(mk((1, 2, 3, 2)), (1, 2, 5, 4)),
        lambda mk, mki: S(mk((2, 3, 3)), (2, 4, 5))),
        ref=torch_op("_adaptive_avg_pool2d_backward"))
    ADAPTIVE_MAX_POOL2D.samples(cases(
        lambda mk, mki: S(mk((1, 2, 5, 4)), (3, 2)),
        lambda mk, mki: S(mk((2, 4, 5), noncontiguous=True), 3, True).named("indices")),
        dtypes=FLOAT, ref=f + "adaptive_max_pool2d")


_declare_samples()
