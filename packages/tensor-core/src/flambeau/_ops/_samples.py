"""Sample inputs of operators (DESIGN.md seam 1; PyTorch's OpInfo, small).

An operator declares once, next to its declaration in ``_ops/<family>.py``, a function that
yields :class:`SampleInput` objects, plus the metadata the tests need (:class:`SampleInfo`):

.. code-block:: python

   @LOGSUMEXP.samples(dtypes=FLOAT)
   def _logsumexp_samples(device, dtype, requires_grad):
       mk = partial(make_tensor, device=device, dtype=dtype, requires_grad=requires_grad)
       yield SampleInput(mk((3, 4)), 1)
       yield SampleInput(mk((2, 3, 2)), (0, 2), keepdim=True).named("dims keepdim")

Those samples drive, without a list anywhere else, ``tests/test_op_samples.py`` (the CPU result
against PyTorch, gradcheck in float64) and ``tests/cuda/test_op_samples_sim.py`` (the CUDA kernel
against the CPU result under numba's simulator). Factories (``binary_op``, ``unary_op``, the
reduction and activation factories) give their operators default samples, so an operator declared
through them is tested as soon as it exists.

Nothing here builds a tensor at import time: sample functions run when a test calls them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = ["FLOAT", "FLOAT_INT", "ALL", "SampleInput", "SampleInfo", "make_tensor", "make_index", "reset_seed",
           "generate", "cases"]

# dtype names (strings, resolved by the tests) most operators are sampled at.
FLOAT = ("float32", "float64")
FLOAT_INT = ("float32", "float64", "int64")
ALL = ("float32", "float64", "int64", "bool")


class SampleInput:
    """One call of an operator: ``op(input, *args, **kwargs)``.

    ``input`` and the arguments may be tensors, numbers, tuples or lists of them; tensors that
    require grad are the ones gradcheck differentiates. :meth:`named` gives the sample a short name
    (shown in test failures and used as a key of :attr:`SampleInfo.xfail`).
    """

    __slots__ = ("input", "args", "kwargs", "name")

    def __init__(self, input, *args, **kwargs):
        self.input = input
        self.args = args
        self.kwargs = kwargs
        self.name = ""

    def named(self, name: str) -> SampleInput:
        self.name = name
        return self

    def __repr__(self) -> str:
        def show(x):
            shape = getattr(x, "shape", None)
            if shape is not None and hasattr(x, "dtype"):
                return f"Tensor{list(shape)}:{x.dtype.name}"
            if isinstance(x, (list, tuple)):
                return type(x)(show(y) for y in x).__repr__()
            return repr(x)

        parts = [show(self.input), *(show(a) for a in self.args),
                 *(f"{k}={show(v)}" for k, v in self.kwargs.items())]
        return f"SampleInput{'[' + self.name + ']' if self.name else ''}({', '.join(parts)})"


class SampleInfo:
    """What the table-driven tests need to know about an operator besides its declaration.

    Attributes:
        fn: ``fn(device, dtype, requires_grad) -> iterable of SampleInput``; ``dtype`` is a
            flambeau dtype, ``device`` a device string.
        dtypes: names of the dtypes the operator is sampled at (``"float32"``, ``"int64"``, ...).
        ref: the PyTorch reference: a dotted name under ``torch`` (``"nn.functional.elu"``), a
            callable taking the sample converted to torch, or ``None`` for no reference. The
            default is ``torch.<name>``, else ``torch.nn.functional.<name>``, else the method
            ``Tensor.<name>``.
        call: how flambeau is called (default: the operator's function, or its method for a
            method-only operator); ``call(input, *args, **kwargs)``.
        gradcheck: whether gradcheck runs (default: the operator is differentiable).
        rtol, atol: tolerances of the comparison with PyTorch and with the CPU (``None``: torch's
            defaults for the dtype).
        xfail: known mismatches, ``{"<check>": reason}`` or ``{"<check>:<sample name>": reason}``
            or ``{"<check>@<dtype name>": reason}``, with ``<check>`` one of ``ref``, ``grad``,
            ``cuda``. A listed sample that passes fails the test, so the list stays true.
        nondeterministic: results are only compared for shape and dtype (random operators).
    """

    __slots__ = ("fn", "dtypes", "ref", "call", "gradcheck", "rtol", "atol", "xfail", "nondeterministic")

    def __init__(self, fn: Callable[..., Iterable[SampleInput]], *, dtypes=FLOAT, ref="default", call=None,
                 gradcheck=None, rtol=None, atol=None, xfail=None, nondeterministic=False):
        self.fn = fn
        self.dtypes = tuple(dtypes)
        self.ref = ref
        self.call = call
        self.gradcheck = gradcheck
        self.rtol = rtol
        self.atol = atol
        self.xfail = dict(xfail or {})
        self.nondeterministic = nondeterministic

    def update(self, **meta) -> None:
        for k, v in meta.items():
            if k == "xfail":
                self.xfail.update(v)
            elif k == "dtypes":
                self.dtypes = tuple(v)
            else:
                setattr(self, k, v)

    def expected_failure(self, check: str, sample: SampleInput, dtype: str = "") -> str | None:
        """The reason ``check`` is expected to fail on ``sample`` at dtype ``dtype``, or None.

        Keys, most specific first: ``"<check>:<sample name>@<dtype name>"``, ``"<check>:<sample name>"``,
        ``"<check>@<dtype name>"``, ``"<check>"``.
        """
        for key in (f"{check}:{sample.name}@{dtype}" if sample.name and dtype else None,
                    f"{check}:{sample.name}" if sample.name else None, f"{check}@{dtype}" if dtype else None, check):
            if key in self.xfail:
                return self.xfail[key]
        return None


# --- making sample tensors -----------------------------------------------------------------------
_SEED = [0]


def reset_seed(seed: int = 0) -> None:
    """Restart the sample generator: the tests call it before each operator's samples (reproducible)."""
    _SEED[0] = seed


def _rng():
    import numpy as np

    _SEED[0] += 1
    return np.random.default_rng(_SEED[0])


def make_tensor(shape, *, device="cpu", dtype=None, requires_grad=False, low=None, high=None,
                exclude_zero=False, noncontiguous=False):
    """A tensor of ``shape`` with values uniform in ``[low, high)`` (defaults -5, 5; bool: random).

    ``requires_grad`` is applied to floating-point tensors only. ``noncontiguous`` gives a
    transposed view of the same values' layout (a strided input).
    """
    import numpy as np

    import flambeau as fl

    dtype = fl.float32 if dtype is None else dtype
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    lo = -5 if low is None else low
    hi = 5 if high is None else high
    rng = _rng()
    if dtype is fl.bool:
        a = rng.random(shape) > 0.5
    elif dtype.is_floating_point:
        a = rng.uniform(lo, hi, shape)
        if exclude_zero:
            a[np.abs(a) < 0.1] = 0.5
    else:
        lo = max(lo, 0) if not dtype.is_signed else lo
        a = rng.integers(int(np.floor(lo)), int(np.ceil(hi)), shape)
        if exclude_zero:
            a[a == 0] = 1
    a = np.asarray(a).astype(dtype.np)
    if noncontiguous and a.ndim >= 2:
        t = fl.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2)), dtype=dtype, device=device).transpose(-1, -2)
    else:
        t = fl.tensor(a, dtype=dtype, device=device)
    if requires_grad and dtype.is_floating_point:
        t.requires_grad_(True)
    return t


def make_index(shape, high, *, device="cpu", low=0):
    """An int64 tensor of ``shape`` with values in ``[low, high)`` (indices; never requires grad)."""
    import flambeau as fl

    return make_tensor(shape, device=device, dtype=fl.int64, low=low, high=high)


def generate(op, device, dtype, requires_grad=False) -> list:
    """The samples of ``op`` (an OpDef) as a list, from a fresh seed (the same on every call)."""
    reset_seed()
    return list(op.info.fn(device, dtype, requires_grad))


def cases(*builders):
    """Sample function from ``builders``, each ``builder(mk, mki) -> SampleInput``.

    ``mk(shape, **make_tensor options)`` makes a tensor of the sampled dtype, device and
    requires_grad; ``mki(shape, high)`` an int64 index tensor. For operators with a few fixed calls:
    ``OP.samples(cases(lambda mk, mki: SampleInput(mk((3, 4)), 1)), dtypes=FLOAT)``.
    """
    def samples(device, dtype, requires_grad):
        def mk(shape, **kw):
            kw.setdefault("requires_grad", requires_grad)
            kw.setdefault("dtype", dtype)
            return make_tensor(shape, device=device, **kw)

        def mki(shape, high, low=0):
            return make_index(shape, high, device=device, low=low)

        for b in builders:
            yield b(mk, mki)

    return samples
