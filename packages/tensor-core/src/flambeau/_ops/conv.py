"""Convolution operators: conv1d, conv2d, conv_transpose1d, conv_transpose2d and their primitives.

Every convolution runs through one primitive, ``convolution`` (torch's ``aten::convolution``:
plain or transposed, 1-D or 2-D, any stride, padding, dilation and groups), and its weight
gradient ``convolution_backward_weight``. The input gradient of a convolution is the transposed
convolution of the output gradient and vice versa, so the derivative table needs nothing else and
double backward comes from the same two operators. A first-order backward takes all three
gradients from one call of ``convolution_backward`` (torch's ``aten::convolution_backward``; Note
[Convolution backward as one operator]). ``conv1d`` and friends are composites: they
check their arguments with torch's messages, add a batch dimension to unbatched inputs and call
``convolution``.

The CPU kernels (im2col and BLAS GEMMs, direct depthwise kernels) are in
``flambeau/_kernels/cpu/conv.py`` and ``conv_depthwise.py``; 1-D convolutions reach every kernel
as 2-D ones with a height of 1.

Kernel convention (every device; arrays in, array out; ``x`` is ``(N, C, H, W)``):
    convolution: ``kernel(x, w, b, stride, padding, dilation, transposed, output_padding, groups)``
        with ``w`` ``(O, C/groups, KH, KW)`` (``(C, O/groups, KH, KW)`` if ``transposed``), ``b``
        an ``(O,)`` array or None, the others pairs of ints and an int.
    convolution_backward_weight: ``kernel(g, x, weight_size, stride, padding, dilation, transposed,
        output_padding, groups)`` returning the weight gradient of shape ``weight_size``.
    convolution_backward: ``kernel(g, x, w, stride, padding, dilation, transposed, output_padding, groups,
        mask)`` returning ``(grad_input, grad_weight)``, each None where the pair of booleans ``mask``
        says so (the bias gradient is a sum the front takes).
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau import _dtype as dt
from flambeau._kernels.cpu.conv import _out_size
from flambeau._ops._common import Tensor, _wrap, check_tensor, grad_state, output_mask_of, record, same_device
from flambeau._ops._registry import declare, get_op

__all__ = ["convolution", "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"]

# Note [Convolution backward as one operator]
#     A convolution's backward was two operator calls, ``convolution`` (transposed) for the input's gradient and
#     ``convolution_backward_weight`` for the weight's, each paying its front's checks, dispatch and wrapping:
#     67 µs of host time per call on the fake device of tools/host_overhead.py, a fifth of a ResNet's backward.
#     Outside create_graph the derivative makes one ``convolution_backward`` call for all three gradients, as
#     torch's does: the call is checked once and its kernel makes cuDNN's two calls (or the numba path's
#     launches) back to back. It is not differentiable; double backward keeps the two differentiable operators.


# --- the primitives -----------------------------------------------------------------------------------
CONVOLUTION = declare(
    "convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, "
    "bool transposed, int[] output_padding, int groups) -> Tensor",
    category="convolution", method=False)

CONVOLUTION_BACKWARD_WEIGHT = declare(
    "convolution_backward_weight(Tensor grad_output, Tensor input, int[] weight_size, int[] stride, "
    "int[] padding, int[] dilation, bool transposed, int[] output_padding, int groups) -> Tensor",
    category="convolution", method=False, function=False)


def _as4d(a: np.ndarray, dim: int) -> np.ndarray:
    return a.reshape(a.shape[0], a.shape[1], 1, a.shape[2]) if dim == 1 else a


def _pad2(v, dim, fill):
    """A 1-D convolution's parameter as the 2-D kernels' pair (height 1)."""
    return (fill, v[0]) if dim == 1 else (v[0], v[1])


def _params_2d(dim: int, stride, padding, dilation, output_padding) -> tuple:
    """``(stride, padding, dilation, output_padding)`` of a ``dim``-D convolution as the 2-D kernels take them
    (pairs; a 1-D convolution's with a height of 1)."""
    return (_pad2(tuple(stride), dim, 1), _pad2(tuple(padding), dim, 0), _pad2(tuple(dilation), dim, 1),
            _pad2(tuple(output_padding), dim, 0))


def _check_dtypes(opname, x, w, b):
    if x.dtype is not w.dtype:
        raise RuntimeError(f"Input type ({x.dtype.scalar_name}) and weight type ({w.dtype.scalar_name}) "
                           "should be the same")
    if b is not None and b.dtype is not w.dtype:
        raise RuntimeError(f"Input type ({x.dtype.scalar_name}) and bias type ({b.dtype.scalar_name}) "
                           "should be the same")
    if x.dtype is dt.bool:
        raise NotImplementedError(f"\"{opname}\" not implemented for 'Bool'")
    same_device(x, w, b)


@CONVOLUTION.front
def convolution(input: Tensor, weight: Tensor, bias, stride, padding, dilation, transposed: bool,
                output_padding, groups: int) -> Tensor:
    """The general convolution of a batched ``input`` ``(N, C, L)`` or ``(N, C, H, W)`` (torch's ``convolution``).

    Args:
        input: float tensor ``(N, C_in, *spatial)`` with one or two spatial dimensions.
        weight: ``(C_out, C_in / groups, *kernel)``, or ``(C_in, C_out / groups, *kernel)`` if ``transposed``.
        bias: ``(C_out,)`` tensor or None.
        stride, padding, dilation, output_padding: one int per spatial dimension (lists or tuples).
        transposed: compute the transposed convolution (the adjoint of the plain one).
        groups: number of blocked connections from input to output channels.

    Returns:
        ``(N, C_out, *out_spatial)`` of ``input``'s dtype.

    Raises:
        RuntimeError: for shapes, parameters, dtypes or devices that do not make a convolution
            (torch's messages; the kernels index by these shapes without bounds checks). The checks
            are cached per distinct call (Note [Cached convolution checks]).
    """
    stride, padding, dilation, output_padding = _check_primitive(
        "convolution", input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    return _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


def _convolution(input: Tensor, weight: Tensor, bias, stride, padding, dilation, transposed: bool,
                 output_padding, groups: int) -> Tensor:
    """:func:`convolution` of checked arguments (what conv1d, conv2d and their transposes call)."""
    dim = input.ndim - 2
    stride, padding, dilation, output_padding = _params_2d(dim, stride, padding, dilation, output_padding)
    x, w = _as4d(input._data, dim), _as4d(weight._data, dim)
    out = CONVOLUTION.kernel(input._device.type)(x, w, None if bias is None else bias._data, stride, padding,
                                                 dilation, bool(transposed), output_padding, int(groups))
    if dim == 1:
        out = out.reshape(out.shape[0], out.shape[1], out.shape[3])
    out = _wrap(out, input._device)
    if grad_state.enabled and (input._requires_grad or weight._requires_grad
                               or (bias is not None and bias._requires_grad)):
        record(CONVOLUTION, (input, weight, bias, stride[2 - dim:], padding[2 - dim:], dilation[2 - dim:],
                             bool(transposed), output_padding[2 - dim:], int(groups)), {}, out)
    return out


@CONVOLUTION_BACKWARD_WEIGHT.front
def convolution_backward_weight(grad_output: Tensor, input: Tensor, weight_size, stride, padding, dilation,
                                transposed: bool, output_padding, groups: int) -> Tensor:
    """Gradient of :func:`convolution` with respect to its weight, given ``grad_output`` and ``input``.

    Args:
        grad_output: ``(N, C_out, *out_spatial)``, the gradient of the convolution's result.
        input: ``(N, C_in, *spatial)``, the convolution's input.
        weight_size: the shape of the weight.
        stride, padding, dilation, transposed, output_padding, groups: as given to :func:`convolution`.

    Returns:
        A tensor of shape ``weight_size``; it is bilinear in ``grad_output`` and ``input``, and
        differentiable in both (double backward of convolutions).
    """
    ws = tuple(weight_size)
    _check_grad_output("convolution_backward_weight", grad_output, input, ws, stride, padding, dilation, transposed,
                       output_padding, groups)
    dim = input.ndim - 2
    st, pa, di, op = _params_2d(dim, stride, padding, dilation, output_padding)
    ws4 = (ws[0], ws[1], 1, ws[2]) if dim == 1 else ws
    gw = CONVOLUTION_BACKWARD_WEIGHT.kernel(input._device.type)(
        _as4d(grad_output._data, dim), _as4d(input._data, dim), ws4, st, pa, di, bool(transposed), op, int(groups))
    out = _wrap(gw.reshape(ws), input._device)
    if grad_state.enabled and (input._requires_grad or grad_output._requires_grad):
        record(CONVOLUTION_BACKWARD_WEIGHT, (grad_output, input, ws, tuple(stride), tuple(padding), tuple(dilation),
                                             bool(transposed), tuple(output_padding), int(groups)), {}, out)
    return out


CONVOLUTION_BACKWARD = declare(
    "convolution_backward(Tensor grad_output, Tensor input, Tensor weight, int[]? bias_sizes, int[] stride, "
    "int[] padding, int[] dilation, bool transposed, int[] output_padding, int groups, bool[3] output_mask) "
    "-> (Tensor, Tensor, Tensor)", category="convolution", method=False, function=False, differentiable=False)


@CONVOLUTION_BACKWARD.front
def convolution_backward(grad_output: Tensor, input: Tensor, weight: Tensor, bias_sizes, stride, padding, dilation,
                         transposed: bool, output_padding, groups: int, output_mask=(True, True, True)) -> tuple:
    """The gradients of :func:`convolution` with respect to its input, weight and bias in one call (torch's
    ``convolution_backward``; Note [Convolution backward as one operator]; not differentiable).

    Args:
        grad_output: ``(N, C_out, *out_spatial)``, the gradient of the convolution's result.
        input: ``(N, C_in, *spatial)``, the convolution's input.
        weight: the convolution's weight.
        bias_sizes: ``[C_out]`` where the convolution had a bias, or None (checked where given: the bias's
            gradient is made where ``output_mask`` asks for it).
        stride, padding, dilation, transposed, output_padding, groups: as given to :func:`convolution`.
        output_mask: which of the three gradients to compute.

    Returns:
        ``(grad_input, grad_weight, grad_bias)`` of the shapes of ``input``, ``weight`` and ``bias_sizes``, None
        where ``output_mask`` is False; all of ``input``'s dtype.
    """
    opname = "convolution_backward"
    check_tensor(weight, "weight", opname)
    _check_dtypes(opname, check_tensor(input, "input", opname), weight, None)
    stride, padding, dilation, output_padding, expected = _check_grad_output(
        opname, grad_output, input, tuple(weight.shape), stride, padding, dilation, transposed, output_padding, groups)
    mask = output_mask_of(output_mask, opname)
    if bias_sizes is not None and tuple(bias_sizes) != expected[1:2]:
        raise RuntimeError(f"{opname}(): expected bias_sizes {list(expected[1:2])} (the output's channels), got "
                           f"{list(bias_sizes)}")
    dim = input.ndim - 2
    dev = input._device
    gx = gw = gb = None
    if mask[0] or mask[1]:
        st, pa, di, op = _params_2d(dim, stride, padding, dilation, output_padding)
        gx, gw = CONVOLUTION_BACKWARD.kernel(dev.type)(
            _as4d(grad_output._data, dim), _as4d(input._data, dim), _as4d(weight._data, dim), st, pa, di,
            bool(transposed), op, int(groups), mask[:2])
        gx = None if gx is None else _wrap(gx.reshape(tuple(input.shape)) if dim == 1 else gx, dev)
        gw = None if gw is None else _wrap(gw.reshape(tuple(weight.shape)) if dim == 1 else gw, dev)
    if mask[2]:  # the bias gradient: the output gradient summed over all but the channels
        dims = (0, *range(2, grad_output.ndim))
        gb = _wrap(get_op("sum").kernel(dev.type)(grad_output._data, dims, False, grad_output.dtype), dev)
    return gx, gw, gb


def _check_primitive(opname, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The checks of the :func:`convolution` primitive called directly (or by autograd): its input must be
    batched; returns ``(stride, padding, dilation, output_padding)`` as tuples of ints."""
    check_tensor(input, "input", opname)
    check_tensor(weight, "weight", opname)
    if bias is not None:
        check_tensor(bias, "bias", opname)
    _check_dtypes(opname, input, weight, bias)
    return _checked_call(opname, input, tuple(weight.shape), None if bias is None else tuple(bias.shape), stride,
                         padding, dilation, transposed, output_padding, groups)[:4]


def _check_grad_output(opname, grad_output, input, weight_size, stride, padding, dilation, transposed, output_padding,
                       groups) -> tuple:
    """``grad_output`` must be the gradient of the convolution of ``input`` with a weight of ``weight_size`` (of their
    dtype and device): backward operator ``opname``'s kernels index them by those shapes. Returns
    :func:`_checked_call`'s ``(stride, padding, dilation, output_padding, output_shape)``."""
    check_tensor(grad_output, "grad_output", opname)
    check_tensor(input, "input", opname)
    if grad_output.dtype is not input.dtype or grad_output._device is not input._device:
        raise RuntimeError(f"{opname}(): expected grad_output of input's dtype and device ({input.dtype} on "
                           f"{input._device}), got {grad_output.dtype} on {grad_output._device}")
    checked = _checked_call(opname, input, tuple(weight_size), None, stride, padding, dilation, transposed,
                            output_padding, groups)
    expected = checked[4]
    if tuple(grad_output.shape) != expected:
        raise RuntimeError(f"{opname}(): expected grad_output of size {list(expected)} (the output of the "
                           f"convolution of input {list(input.shape)} with weight {list(weight_size)}), got "
                           f"{list(grad_output.shape)}")
    return checked


def _checked_call(opname, input, w_shape, b_shape, stride, padding, dilation, transposed, output_padding, groups):
    """``(stride, padding, dilation, output_padding, output_shape)`` of a convolution of a batched ``input``
    with a weight of ``w_shape``, checked by :func:`_check_params` (cached: Note [Cached convolution checks])."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{opname}(): expected a batched input (N, C, L) or (N, C, H, W), but got input of size "
                           f"{list(input.shape)}")
    args = (opname, tuple(input.shape), w_shape, b_shape, input.ndim - 2, _key(stride), _key(padding), _key(dilation),
            groups, bool(transposed), _key(output_padding))
    plain = _plain(w_shape) and _plain(args[5]) and _plain(args[6]) and _plain(args[7]) and _plain(groups) \
        and _plain(args[10])
    return (_call_shape if plain else _call_shape.__wrapped__)(*args)


def _key(v):
    """A parameter as :func:`_check_params` takes it: lists become tuples (an int expands to every dimension)."""
    return tuple(v) if isinstance(v, (list, tuple)) else v


@functools.lru_cache(maxsize=512)
def _call_shape(opname, in_shape, w_shape, b_shape, dim, stride, padding, dilation, groups, transposed,
                output_padding):
    """The pure part of :func:`_checked_call` (cached)."""
    _, stride, padding, dilation, output_padding, _ = _check_params.__wrapped__(
        opname, in_shape, w_shape, b_shape, dim, stride, padding, dilation, groups, transposed, output_padding)
    k = w_shape[2:]
    if transposed:
        spatial = [(n - 1) * s - 2 * p + d * (kk - 1) + op + 1
                   for n, s, p, d, kk, op in zip(in_shape[2:], stride, padding, dilation, k, output_padding)]
        out = (in_shape[0], w_shape[1] * groups, *spatial)
    else:
        spatial = [_out_size(n, kk, s, p, d) for n, kk, s, p, d in zip(in_shape[2:], k, stride, padding, dilation)]
        out = (in_shape[0], w_shape[0], *spatial)
    return stride, padding, dilation, output_padding, out


# --- user-facing composites ---------------------------------------------------------------------------
def _expand(value, n: int, argname: str):
    if isinstance(value, bool):
        raise TypeError(f"{argname} must be an int or a tuple of ints, got bool")
    if isinstance(value, int):
        return (value,) * n
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if len(value) == 1:
            return tuple(value) * n
        if len(value) == n:
            return tuple(value)
        raise RuntimeError(f"expected {argname} to be a single integer value or a list of {n} values to match "
                           f"the convolution dimensions, but got {argname}={list(value)}")
    raise TypeError(f"{argname} must be an int or a tuple of ints, got {type(value).__name__}")


def _check_conv(opname, input, weight, bias, dim, stride, padding, dilation, groups, transposed, output_padding):
    """torch's argument checks; returns (batched input, stride, padding, dilation, output_padding, groups, asym)."""
    check_tensor(input, "input", opname)
    check_tensor(weight, "weight", opname)
    if bias is not None:
        check_tensor(bias, "bias", opname)
    args = (opname, input.shape, weight.shape, None if bias is None else bias.shape, dim, stride, padding,
            dilation, groups, transposed, output_padding)
    # Only ints, tuples of ints and strings go through the cache: a bool or float parameter (or one in
    # a tuple) compares equal to an int and would hit an entry made for valid arguments.
    plain = _plain(stride) and _plain(padding) and _plain(dilation) and _plain(groups) and _plain(output_padding)
    checked = _check_params if plain else _check_params.__wrapped__
    if input.ndim not in (dim + 1, dim + 2) or weight.ndim != dim + 2:
        checked(*args)  # raises torch's message
    _check_dtypes(opname, input, weight, bias)
    batched, stride, padding, dilation, output_padding, asym = checked(*args)
    if not input.dtype.is_floating_point and (
            input._requires_grad or weight._requires_grad):  # pragma: no cover - ints cannot require grad
        raise RuntimeError("only floating point tensors can require gradients")
    return input if batched else input.unsqueeze(0), batched, stride, padding, dilation, output_padding, asym


def _plain(v) -> bool:
    """Whether ``v`` is an int, a tuple of ints or a string (exact types: no bool, no float)."""
    t = type(v)
    if t is int or t is str:
        return True
    if t is not tuple:
        return False
    for e in v:
        if type(e) is not int:
            return False
    return True


# Note [Cached convolution checks]: the checks of a convolution's shapes and parameters depend on
# nothing else, and a model calls each layer with the same ones every step: they are computed once
# per distinct call (an exception is not cached, so a bad call raises every time). They cost ~15 µs
# a call otherwise, as much as the whole kernel of a small layer.
@functools.lru_cache(maxsize=512)
def _check_params(opname, in_shape, w_shape, b_shape, dim, stride, padding, dilation, groups, transposed,
                  output_padding):
    """The shape and parameter checks of :func:`_check_conv` (pure: cached); returns
    ``(batched, stride, padding, dilation, output_padding, asym)``."""
    if len(in_shape) not in (dim + 1, dim + 2):
        raise RuntimeError(f"Expected {dim + 1}D (unbatched) or {dim + 2}D (batched) input to {opname}, but got "
                           f"input of size: {list(in_shape)}")
    if len(w_shape) != dim + 2:
        raise RuntimeError(f"Expected {dim + 2}-dimensional weight for {dim + 2}-dimensional input "
                           f"{list(in_shape)}, but got {len(w_shape)}-dimensional weight of size "
                           f"{list(w_shape)} instead")
    if isinstance(groups, bool) or not isinstance(groups, int):
        raise TypeError(f"{opname}(): argument 'groups' must be int, not {type(groups).__name__}")
    stride = _expand(stride, dim, "stride")
    dilation = _expand(dilation, dim, "dilation")
    output_padding = _expand(output_padding, dim, "output_padding")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    k = tuple(w_shape[2:])
    if any(n <= 0 for n in k):  # (an empty kernel gave an output of zeros)
        raise RuntimeError(f"kernel size should be greater than zero, but got weight of size {list(w_shape)}")
    asym = None
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0,) * dim
        elif padding == "same":
            if transposed:
                raise RuntimeError(f"{opname}(): padding='same' is not supported for transposed convolutions")
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            totals = [d * (kk - 1) for d, kk in zip(dilation, k)]
            padding = tuple(t // 2 for t in totals)
            if any(t % 2 for t in totals):
                asym = tuple(t - t // 2 - t // 2 for t in totals)  # the extra pad on the right/bottom
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        padding = _expand(padding, dim, "padding")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    batched = len(in_shape) == dim + 2
    x_shape = tuple(in_shape) if batched else (1, *in_shape)
    C = x_shape[1]
    if transposed:
        if w_shape[0] != C:
            raise RuntimeError(f"Given transposed=1, weight of size {list(w_shape)}, expected input"
                               f"{list(x_shape)} to have {w_shape[0]} channels, but got {C} channels instead")
        if w_shape[0] % groups:
            raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                               f"but got weight of size {list(w_shape)} instead")
        out_channels = w_shape[1] * groups
        for i in range(dim):
            if output_padding[i] >= stride[i] and output_padding[i] >= dilation[i]:
                names = ("height", "width") if dim == 2 else ("",)
                raise RuntimeError(
                    "output padding must be smaller than either stride or dilation, but got "
                    + " ".join(f"output_padding_{n}: {output_padding[j]}" for j, n in enumerate(names)) + " "
                    + " ".join(f"stride_{n}: {stride[j]}" for j, n in enumerate(names)) + " "
                    + " ".join(f"dilation_{n}: {dilation[j]}" for j, n in enumerate(names)))
        spatial = x_shape[2:]
        size = [(n - 1) * s - 2 * p + d * (kk - 1) + op + 1
                for n, s, p, d, kk, op in zip(spatial, stride, padding, dilation, k, output_padding)]
        if any(n <= 0 for n in size):
            raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, spatial))}). Calculated output "
                               f"size per channel: ({' x '.join(map(str, size))}). Output size is too small")
    else:
        if w_shape[0] % groups:
            raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                               f"but got weight of size {list(w_shape)} instead")
        if w_shape[1] * groups != C:
            raise RuntimeError(f"Given groups={groups}, weight of size {list(w_shape)}, expected input"
                               f"{list(x_shape)} to have {w_shape[1] * groups} channels, but got {C} "
                               "channels instead")
        out_channels = w_shape[0]
        spatial = x_shape[2:]
        padded = tuple(n + 2 * p + (asym[i] if asym else 0) for i, (n, p) in enumerate(zip(spatial, padding)))
        eff = tuple(d * (kk - 1) + 1 for d, kk in zip(dilation, k))
        if any(e > pn for e, pn in zip(eff, padded)):
            raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
                               f"Kernel size: ({' x '.join(map(str, eff))}). Kernel size can't be greater than "
                               "actual input size")
    if b_shape is not None and (len(b_shape) != 1 or b_shape[0] != out_channels):
        raise RuntimeError(f"Given weight of size {list(w_shape)}, expected bias to be 1-dimensional with "
                           f"{out_channels} elements, but got bias of size {list(b_shape)} instead")
    return batched, stride, padding, dilation, output_padding, asym


def _pad_right(x, extra, dim):
    """``x`` with ``extra[i]`` zeros appended along spatial dimension ``i`` (asymmetric 'same' padding)."""
    import flambeau as fl

    for i, e in enumerate(extra):
        if e:
            shape = list(x.shape)
            shape[2 + i] = e
            x = fl.cat([x, fl.zeros(shape, dtype=x.dtype, device=x.device)], 2 + i)
    return x


def _conv(opname, dim, input, weight, bias, stride, padding, dilation, groups):
    x, batched, stride, padding, dilation, _, asym = _check_conv(
        opname, input, weight, bias, dim, stride, padding, dilation, groups, False, 0)
    if asym is not None:
        x = _pad_right(x, asym, dim)
    out = _convolution(x, weight, bias, stride, padding, dilation, False, (0,) * dim, groups)
    return out if batched else out.squeeze(0)


def _conv_t(opname, dim, input, weight, bias, stride, padding, output_padding, groups, dilation):
    x, batched, stride, padding, dilation, output_padding, _ = _check_conv(
        opname, input, weight, bias, dim, stride, padding, dilation, groups, True, output_padding)
    out = _convolution(x, weight, bias, stride, padding, dilation, True, output_padding, groups)
    return out if batched else out.squeeze(0)


CONV1D = declare("conv1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=1, "
                 "str padding=0, int[1] dilation=1, int groups=1) -> Tensor",
                 category="convolution", method=False, composite=True)
CONV2D = declare("conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, "
                 "str padding=0, int[2] dilation=1, int groups=1) -> Tensor",
                 category="convolution", method=False, composite=True)
CONV_TRANSPOSE1D = declare("conv_transpose1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=1, "
                           "int[1] padding=0, int[1] output_padding=0, int groups=1, int[1] dilation=1) -> Tensor",
                           category="convolution", method=False, composite=True)
CONV_TRANSPOSE2D = declare("conv_transpose2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, "
                           "int[2] padding=0, int[2] output_padding=0, int groups=1, int[2] dilation=1) -> Tensor",
                           category="convolution", method=False, composite=True)


@CONV1D.front
def conv1d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """1-D convolution (cross-correlation, as in torch) over ``input`` ``(N, C_in, L)`` or ``(C_in, L)``.

    Args:
        input: float tensor ``(N, C_in, L)`` or unbatched ``(C_in, L)``.
        weight: ``(C_out, C_in / groups, K)``.
        bias: optional ``(C_out,)``.
        stride: int or 1-tuple.
        padding: int, 1-tuple, ``"valid"`` (no padding) or ``"same"`` (output length = input length, stride 1).
        dilation: spacing between kernel taps.
        groups: ``C_in`` and ``C_out`` are split into this many independent groups.

    Returns:
        ``(N, C_out, L_out)`` (or ``(C_out, L_out)``) with
        ``L_out = (L + 2 * padding - dilation * (K - 1) - 1) // stride + 1``.
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


@CONV2D.front
def conv2d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation, as in torch) over ``input`` ``(N, C_in, H, W)`` or ``(C_in, H, W)``.

    Args:
        input: float tensor ``(N, C_in, H, W)`` or unbatched ``(C_in, H, W)``.
        weight: ``(C_out, C_in / groups, KH, KW)``.
        bias: optional ``(C_out,)``.
        stride: int or pair.
        padding: int, pair, ``"valid"`` or ``"same"`` (output size = input size; stride 1 only).
        dilation: int or pair, spacing between kernel taps.
        groups: blocked connections; ``groups == C_in`` with ``C_out = k * C_in`` is a depthwise convolution.

    Returns:
        ``(N, C_out, H_out, W_out)`` with ``H_out = (H + 2 * padding - dilation * (KH - 1) - 1) // stride + 1``
        (likewise ``W_out``).
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


@CONV_TRANSPOSE1D.front
def conv_transpose1d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1) -> Tensor:
    """1-D transposed convolution (the gradient of :func:`conv1d` with respect to its input).

    Args:
        input: float tensor ``(N, C_in, L)`` or unbatched ``(C_in, L)``.
        weight: ``(C_in, C_out / groups, K)``.
        bias: optional ``(C_out,)``.
        stride, padding, dilation: as for the convolution this transposes.
        output_padding: extra length added on one side of the output (smaller than stride or dilation).
        groups: blocked connections.

    Returns:
        ``(N, C_out, L_out)`` with ``L_out = (L - 1) * stride - 2 * padding + dilation * (K - 1) + output_padding + 1``.
    """
    return _conv_t("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups, dilation)


@CONV_TRANSPOSE2D.front
def conv_transpose2d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1) -> Tensor:
    """2-D transposed convolution ("deconvolution": the gradient of :func:`conv2d` with respect to its input).

    Args:
        input: float tensor ``(N, C_in, H, W)`` or unbatched ``(C_in, H, W)``.
        weight: ``(C_in, C_out / groups, KH, KW)``.
        bias: optional ``(C_out,)``.
        stride, padding, dilation: int or pair, as for the convolution this transposes.
        output_padding: int or pair added to one side of each output dimension (smaller than stride or dilation).
        groups: blocked connections.

    Returns:
        ``(N, C_out, H_out, W_out)`` with
        ``H_out = (H - 1) * stride - 2 * padding + dilation * (KH - 1) + output_padding + 1`` (likewise ``W_out``).
    """
    return _conv_t("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups, dilation)


# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
def _conv_bw_weight_ref(g, x, weight_size, stride, padding, dilation, transposed, output_padding, groups):
    """PyTorch's weight gradient of a convolution (``aten.convolution_backward``, weight only)."""
    import torch

    w = torch.zeros(tuple(weight_size), dtype=x.dtype)
    return torch.ops.aten.convolution_backward(g, x, w, None, list(stride), list(padding), list(dilation),
                                               bool(transposed), list(output_padding), groups,
                                               [False, True, False])[1]


def _conv_backward_ref(g, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask):
    """PyTorch's three gradients of a convolution (``aten.convolution_backward``), None where ``mask`` is False."""
    import torch

    return tuple(r if m else None for r, m in zip(torch.ops.aten.convolution_backward(
        g, x, w, bias_sizes, list(stride), list(padding), list(dilation), bool(transposed), list(output_padding),
        groups, list(mask)), mask))


def _declare_samples():
    from flambeau._ops._samples import FLOAT, cases
    from flambeau._ops._samples import SampleInput as S

    p2, z2 = [1, 1], [0, 0]
    CONVOLUTION.samples(cases(
        lambda mk, mki: S(mk((1, 2, 4, 4)), mk((3, 2, 2, 2)), mk((3,)), p2, z2, p2, False, z2, 1).named("plain"),
        lambda mk, mki: S(mk((1, 2, 4, 4), noncontiguous=True), mk((3, 2, 2, 2)), None, p2, z2, p2, False, z2,
                          1).named("noncontiguous"),
        lambda mk, mki: S(mk((1, 4, 3, 3)), mk((4, 2, 2, 2)), None, [2, 2], p2, p2, False, z2, 2).named("groups"),
        lambda mk, mki: S(mk((2, 2, 4, 3)), mk((2, 1, 2, 2)), mk((2,)), [2, 1], [1, 0], [1, 2], False, z2,
                          2).named("depthwise"),
        lambda mk, mki: S(mk((1, 2, 3, 3)), mk((2, 3, 2, 2)), mk((3,)), [2, 2], [1, 0], p2, True, [1, 0],
                          1).named("transposed"),
        lambda mk, mki: S(mk((1, 2, 3, 3)), mk((2, 1, 3, 3)), None, [2, 2], p2, p2, True, p2,
                          2).named("transposed depthwise"),
        lambda mk, mki: S(mk((2, 2, 5)), mk((3, 2, 2)), mk((3,)), [2], [1], [2], False, [0], 1).named("1d"),
    ), dtypes=FLOAT)
    CONVOLUTION_BACKWARD_WEIGHT.samples(cases(
        lambda mk, mki: S(mk((1, 3, 3, 3)), mk((1, 2, 4, 4)), [3, 2, 2, 2], p2, z2, p2, False, z2, 1).named("plain"),
        lambda mk, mki: S(mk((2, 4, 2, 2)), mk((2, 4, 3, 3)), [4, 2, 2, 2], [2, 2], p2, p2, False, z2,
                          2).named("groups"),
        lambda mk, mki: S(mk((1, 2, 4, 4)), mk((1, 2, 4, 4)), [2, 1, 3, 3], p2, p2, p2, False, z2,
                          2).named("depthwise"),
        lambda mk, mki: S(mk((1, 3, 3, 4)), mk((1, 2, 2, 2)), [2, 3, 2, 2], [2, 2], [1, 0], p2, True, [1, 0],
                          1).named("transposed"),
        lambda mk, mki: S(mk((2, 3, 3)), mk((2, 2, 5)), [3, 2, 2], [2], [1], [2], False, [0], 1).named("1d"),
    ), dtypes=FLOAT, ref=_conv_bw_weight_ref)
    every = [True, True, True]
    CONVOLUTION_BACKWARD.samples(cases(
        lambda mk, mki: S(mk((1, 3, 3, 3)), mk((1, 2, 4, 4)), mk((3, 2, 2, 2)), [3], p2, z2, p2, False, z2, 1,
                          every).named("plain"),
        lambda mk, mki: S(mk((2, 4, 2, 2), noncontiguous=True), mk((2, 4, 3, 3), noncontiguous=True),
                          mk((4, 2, 2, 2)), None, [2, 2], p2, p2, False, z2, 2, [True, True, False]).named("groups"),
        lambda mk, mki: S(mk((1, 2, 4, 4)), mk((1, 2, 4, 4)), mk((2, 1, 3, 3)), [2], p2, p2, p2, False, z2, 2,
                          every).named("depthwise"),
        lambda mk, mki: S(mk((1, 3, 3, 4)), mk((1, 2, 2, 2)), mk((2, 3, 2, 2)), [3], [2, 2], [1, 0], p2, True,
                          [1, 0], 1, every).named("transposed"),
        lambda mk, mki: S(mk((2, 3, 3)), mk((2, 2, 5)), mk((3, 2, 2)), [3], [2], [1], [2], False, [0], 1,
                          every).named("1d"),
        lambda mk, mki: S(mk((1, 3, 3, 3)), mk((1, 2, 4, 4)), mk((3, 2, 2, 2)), None, p2, z2, p2, False, z2, 1,
                          [True, False, False]).named("input only"),
        # output_padding at least the stride (allowed below the dilation): the plain convolution of the gradient
        # is larger than the input, which gets its first rows
        lambda mk, mki: S(mk((1, 3, 10, 10)), mk((1, 2, 5, 5)), mk((2, 3, 3, 3)), [3], p2, z2, [2, 2], True, p2, 1,
                          every).named("transposed, output_padding over the stride"),
        lambda mk, mki: S(mk((1, 3, 10)), mk((1, 2, 5)), mk((2, 3, 3)), None, [1], [0], [2], True, [1], 1,
                          every).named("1d transposed, output_padding over the stride"),
        lambda mk, mki: S(mk((1, 3, 3, 3)), mk((1, 2, 4, 4)), mk((3, 2, 2, 2)), [3], p2, z2, p2, False, z2, 1,
                          [False, True, True]).named("weight and bias"),
    ), dtypes=FLOAT, ref=_conv_backward_ref, gradcheck=False)


_declare_samples()
