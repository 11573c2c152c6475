"""The operator table (DESIGN.md, seam 1) and the kernel table beside it.

Every operator is declared once as an :class:`OpDef`: its name, its signature, whether it is
differentiable or a view, its variants (``flambeau.<name>`` function, ``Tensor.<name>`` method,
in-place ``Tensor.<name>_``, operator dunders). The Python front function of an operator
normalises arguments, computes the output dtype and shape, picks the kernel by device type and
calls the autograd seam; ``flambeau/__init__.py`` binds every declared variant from this table,
and a test walks it.

Note [One kernel table]: kernels live per device and family (``flambeau._kernels.cpu.<family>``,
``flambeau._kernels.cuda.<family>``) and register explicitly with the :func:`kernel` decorator,
``@kernel("convolution", "cuda")``, into :data:`KERNELS`, keyed by operator name and device type.
Registration does not need the operator to be declared yet (a front function may import helpers of
its family's kernel module before its ``declare`` runs); ``OpDef.kernels`` is the operator's row of
the table, and a test checks that every row names a declared operator. Another kernel library plugs
in with :func:`register_kernel` without touching anything else.

Note [Sample inputs]: an operator declares once, next to its declaration, the sample inputs that
test it (``OP.samples(fn, dtypes=..., ref=..., xfail=...)``, or ``declare(..., samples=fn)``);
``OpDef.info`` holds them (a :class:`flambeau._ops._samples.SampleInfo`), and the table-driven tests
(``tests/test_op_samples.py``, ``tests/cuda/test_op_samples_sim.py``) walk :data:`OPS` for them.
"""

from __future__ import annotations

from collections.abc import Callable

from flambeau._ops._samples import SampleInfo

__all__ = ["DEVICE_TYPES", "KERNELS", "OpDef", "OPS", "declare", "get_op", "kernel", "register_kernel"]

# The device types kernels are registered for (one module per type under flambeau._kernels).
DEVICE_TYPES = ("cpu", "cuda")

# operator name -> {device type -> kernel}: every kernel of every operator (Note [One kernel table]).
KERNELS: dict[str, dict[str, Callable]] = {}


def _check_device_type(device_type: str) -> None:
    if device_type not in DEVICE_TYPES:
        raise ValueError(f"device_type must be one of {DEVICE_TYPES}, got {device_type!r}")


def kernel(name: str, device_type: str) -> Callable[[Callable], Callable]:
    """Decorator: register the decorated function as operator ``name``'s kernel on ``device_type``.

    ``@kernel("mul", "cpu")``; the function is returned unchanged. The operator may be declared
    later (Note [One kernel table]).
    """
    _check_device_type(device_type)

    def register(fn: Callable) -> Callable:
        KERNELS.setdefault(name, {})[device_type] = fn
        return fn

    return register


# Note [In-place writes into shared elements]
#     An expanded tensor (``b.expand(2, 3)``: stride 0 along the new dim) shows one memory element in several places.
#     An elementwise in-place operator on it would write each element several times from reads of the same one: on
#     the CPU numpy's buffered loop lost the writes (``b`` unchanged), on a GPU threads raced. torch refuses such a
#     ``self`` in its elementwise in-place operators and ``copy_``, and so does flambeau, before anything runs
#     (indexing, view and reordering operators, ``fill_`` and ``zero_`` take it, as torch's do).
_OVERLAP_ALLOWED = frozenset({"indexing", "view", "reordering"})
OVERLAP_MESSAGE = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
                   "location. Please clone() the tensor before performing the operation.")


def refuse_internal_overlap(t) -> None:
    """RuntimeError when tensor ``t`` has a dim of several elements with stride 0 (Note [In-place writes into shared
    elements])."""
    data = getattr(t, "_data", None)
    if data is not None:
        strides = data.strides
        if 0 in strides and any(st == 0 and n > 1 for n, st in zip(data.shape, strides)):
            raise RuntimeError(OVERLAP_MESSAGE)


def _refusing_internal_overlap(fn: Callable) -> Callable:
    def checked(self, *args, **kwargs):
        refuse_internal_overlap(self)
        return fn(self, *args, **kwargs)

    checked.__doc__ = fn.__doc__
    checked._unchecked = fn  # (not __wrapped__: dispatch modes unwrap that to find the front)
    return checked


class OpDef:
    """One operator's declaration.

    Attributes:
        name: the operator's name, also the key of its derivative in flambeau-autograd.
        signature: torch-style schema, e.g. ``"add(Tensor input, Tensor other, *, Scalar alpha=1) -> Tensor"``.
        fn: the out-of-place front function (``flambeau.<name>``), or None for method-only ops.
        inplace_fn: the in-place front function (``Tensor.<name>_``), or None.
        method: whether ``Tensor.<name>`` exists (``self`` is the first argument).
        function: whether ``flambeau.<name>`` exists.
        dunders: ``{"__add__": callable, ...}`` operator methods bound on Tensor.
        differentiable: whether gradients flow through it.
        composite: built from other operators that autograd records: differentiable without a
            derivative of its own (STYLE.md: keep the primitive set small).
        view: whether the output shares storage with the first input.
        kernels: ``{"cpu": kernel, "cuda": kernel}``, the operator's row of :data:`KERNELS`; the
            kernel's calling convention is the front function's business and is documented where
            the op is declared.
        category: section of the API reference this op belongs to.
        info: the operator's sample inputs and test metadata (Note [Sample inputs]), or None.
        bindings: ``(function, method)``, what ``flambeau/__init__.py`` bound as ``flambeau.<name>`` and
            ``Tensor.<name>`` (``fn``, or ``fn`` taking torch's keyword forms: Note [torch's keyword forms] in
            ``_keywords.py``; None for a variant that is not bound), once bound.
    """

    __slots__ = ("name", "signature", "fn", "inplace_fn", "method", "function", "dunders",
                 "differentiable", "composite", "view", "kernels", "category", "aliases", "info", "bindings")

    def __init__(self, name: str, signature: str, *, differentiable: bool = True, composite: bool = False,
                 view: bool = False,
                 method: bool = True, function: bool = True, category: str = "misc",
                 kernels: dict | None = None, aliases: tuple = (), samples: Callable | None = None):
        self.name = name
        self.signature = signature
        self.fn: Callable | None = None
        self.inplace_fn: Callable | None = None
        self.method = method
        self.function = function
        self.dunders: dict[str, Callable] = {}
        self.differentiable = differentiable
        self.composite = composite
        self.view = view
        # the operator's row of KERNELS itself (kernels registered before the declaration are in it)
        self.kernels: dict[str, Callable] = KERNELS.setdefault(name, {})
        self.kernels.update(kernels or {})
        self.category = category
        self.aliases = tuple(aliases)
        self.info: SampleInfo | None = SampleInfo(samples) if samples is not None else None
        self.bindings: tuple | None = None

    def kernel(self, device_type: str) -> Callable:
        """The kernel for ``device_type``; NotImplementedError naming op and device if none."""
        k = self.kernels.get(device_type)
        if k is None:
            raise NotImplementedError(
                f"flambeau.{self.name} has no kernel for device type '{device_type}' "
                f"(available: {', '.join(sorted(self.kernels)) or 'none'})"
            )
        return k

    def front(self, fn: Callable) -> Callable:
        """Decorator: set the out-of-place front function."""
        self.fn = fn
        fn.__name__ = self.name
        fn.__qualname__ = self.name
        fn._opdef = self
        return fn

    def inplace(self, fn: Callable) -> Callable:
        """Decorator: set the in-place front function (bound as ``Tensor.<name>_``); elementwise ones refuse a
        ``self`` whose elements share memory (Note [In-place writes into shared elements])."""
        if self.category not in _OVERLAP_ALLOWED:
            fn = _refusing_internal_overlap(fn)
        self.inplace_fn = fn
        fn.__name__ = self.name + "_"
        fn.__qualname__ = "Tensor." + self.name + "_"
        fn._opdef = self
        return fn

    def samples(self, fn: Callable | None = None, **meta):
        """Declare the operator's sample inputs and test metadata (Note [Sample inputs]).

        ``OP.samples(fn, dtypes=("float32", "int64"))`` or as a decorator ``@OP.samples(...)``;
        ``fn(device, dtype, requires_grad)`` yields :class:`SampleInput` objects and replaces the
        samples a factory gave; ``meta`` are the attributes of :class:`SampleInfo`.
        """
        if fn is None:
            return lambda f: self._set_samples(f, **meta)
        return self._set_samples(fn, **meta)

    def sample_options(self, **meta) -> OpDef:
        """Update the test metadata of already declared samples (``xfail``, ``ref``, ``dtypes`` ...)."""
        if self.info is None:
            raise ValueError(f"operator {self.name!r} declares no samples")
        self.info.update(**meta)
        return self

    def _set_samples(self, fn: Callable, **meta) -> Callable:
        if self.info is None:
            self.info = SampleInfo(fn)
        else:
            self.info.fn = fn
        self.info.update(**meta)
        return fn

    def __repr__(self) -> str:
        return f"<OpDef {self.signature}>"


OPS: dict[str, OpDef] = {}


def declare(signature: str, **options) -> OpDef:
    """Declare an operator from its signature; its name is the part before ``(``."""
    name = signature.split("(", 1)[0].strip()
    if name in OPS:
        raise ValueError(f"operator {name!r} is declared twice")
    op = OpDef(name, signature, **options)
    OPS[name] = op
    return op


def get_op(name: str) -> OpDef:
    """The declaration of operator ``name``; KeyError naming it if there is none."""
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"flambeau has no operator named {name!r}") from None


def register_kernel(name: str, device_type: str, kernel: Callable) -> None:
    """Register (or replace) the kernel of operator ``name`` for ``device_type``.

    This is how a kernel library adds a device or a faster kernel without touching the rest; unlike
    the :func:`kernel` decorator (flambeau's own kernel modules), the operator must exist.
    """
    _check_device_type(device_type)
    get_op(name)
    KERNELS.setdefault(name, {})[device_type] = kernel
