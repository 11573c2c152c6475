"""The Tensor: a strided view on a :class:`~flambeau._storage.Storage`, with autograd fields.

This module holds what every tensor has regardless of the layers built on it: metadata, conversion
to Python and numpy, the shorthands of ``to`` (``cpu()``, ``float()`` ...) and the autograd fields
that flambeau-autograd fills in (DESIGN.md, seam 2). The methods whose work belongs to a layer that
imports this module are bound onto :class:`Tensor` by that layer (Note [Tensor methods from the
layers above]).

Note [Tensor methods from the layers above]
    The layers above the Tensor implement some of its methods: the operators (``add``, ``sum``,
    ``view``, ``t[i]`` ...), the factories (``Tensor(data)``, ``new_zeros`` ...), device and dtype
    moves (``to``, the front of the operator ``to_copy``) and shared memory (``share_memory_``).
    Each layer binds its methods onto :class:`Tensor` when it is imported, which ``import flambeau``
    does before it returns: the operators through the operator table (``flambeau/__init__.py`` binds
    every declared variant and ``OpDef.dunders``, so ``to`` is bound from ``flambeau._ops.core``),
    the factory methods in ``flambeau._factories`` and ``share_memory_`` in ``flambeau._sharing``.
    So imports point one way, up to down: this module never imports the layers above it.
"""

from __future__ import annotations

import warnings

import numpy as np

from flambeau import _dtype as dt
from flambeau import _layout
from flambeau._backends import backend
from flambeau._device import CPU, device, to_device
from flambeau._grad_mode import _engine, get_engine, load_engine
from flambeau._print import tensor_repr
from flambeau._size import Size
from flambeau._storage import Storage

__all__ = ["Tensor"]

_BY_NP = dt._BY_NP
_new = object.__new__


class Tensor:
    """A multi-dimensional array on a device, recorded by autograd when it requires grad.

    Attributes:
        dtype: the element :class:`flambeau.dtype`.
        grad_fn: the autograd node that produced this tensor (None for leaves).

    Create tensors with factories (``flambeau.tensor``, ``flambeau.zeros``, ``flambeau.randn``...).
    ``Tensor(data)`` is accepted as a shortcut for ``flambeau.tensor(data, dtype=float32)``.
    """

    __slots__ = ("_data", "_storage", "_device", "dtype", "_requires_grad", "_grad", "grad_fn",
                 "_base", "_autograd_meta", "__weakref__")

    __array_priority__ = 1000

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy's ufuncs on tensors (Note [numpy ufuncs on tensors]): ``np.sqrt(t)`` is a tensor, and an
        arithmetic or comparison ufunc with a tensor among its operands (``ndarray + t``) is flambeau's operator."""
        return _array_ufunc(ufunc, method, inputs, kwargs)

    # ``Tensor(data)``, ``new_tensor``, ``new_zeros`` ... are bound by flambeau._factories, ``to`` by
    # flambeau._ops.core, ``share_memory_`` by flambeau._sharing and ``type`` by flambeau._legacy_types
    # (Note [Tensor methods from the layers above]).

    # --- metadata -------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        """The size of each dimension, as a :class:`flambeau.Size`."""
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        """The shape, or the size of dimension ``dim``."""
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim)]

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self._data.ndim

    def dim(self) -> int:
        """Number of dimensions."""
        return self._data.ndim

    ndimension = dim

    def numel(self) -> int:
        """Number of elements."""
        return self._data.size

    nelement = numel

    def stride(self, dim: int | None = None):
        """Strides in elements: a tuple, or the stride of dimension ``dim``."""
        item = self.dtype.itemsize
        if dim is None:
            return tuple(s // item for s in self._data.strides)
        return self._data.strides[_wrap_dim(dim, self._data.ndim)] // item

    def storage_offset(self) -> int:
        """Offset of the first element from the start of the storage, in elements."""
        b = backend(self._device.type)
        return (b.data_ptr(self._data) - b.storage_data_ptr(self._storage._buffer)) // self.dtype.itemsize

    def element_size(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self._data.size * self.dtype.itemsize

    def data_ptr(self) -> int:
        """Address of the first element."""
        return backend(self._device.type).data_ptr(self._data)

    def untyped_storage(self) -> Storage:
        """The storage this tensor views (torch's ``UntypedStorage``: see Note [Storages are Storage] in
        ``flambeau._storage_api``, which gives :class:`Storage` the byte-level methods)."""
        return self._storage

    def const_data_ptr(self) -> int:
        """Address of the first element (as :meth:`data_ptr`: flambeau has no copy-on-write storages)."""
        return backend(self._device.type).data_ptr(self._data)

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the elements are laid out densely in row-major order (flambeau._memory_format_methods binds the
        version that takes ``memory_format``)."""
        return _is_contiguous(self._data.shape, self._data.strides, self.dtype.itemsize)

    @property
    def device(self) -> device:
        """The :class:`flambeau.device` holding the data."""
        return self._device

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self._device.type == "cpu"

    @property
    def layout(self) -> _layout.layout:
        """How the elements are stored: :data:`flambeau.strided` for every dense tensor."""
        return _layout.strided

    # Devices and storage kinds flambeau does not have: False, so that torch code testing them runs.
    is_sparse = is_sparse_csr = is_quantized = is_meta = is_mkldnn = is_nested = property(lambda self: False)
    is_xpu = is_mps = is_vulkan = is_ipu = is_hpu = is_maia = is_xla = is_mtia = property(lambda self: False)

    def is_distributed(self) -> bool:
        """False, as torch's dense tensors."""
        return False

    def is_inference(self) -> bool:
        """False: flambeau's ``inference_mode`` makes ordinary tensors (it has no inference tensors)."""
        return False

    @property
    def name(self) -> None:
        """None (torch's attribute of named-tensor dimensions' owners; unnamed here)."""
        return None

    @property
    def output_nr(self) -> int:
        """Which output of its ``grad_fn`` this tensor is (0 for leaves and single-output operators)."""
        return getattr(self._autograd_meta, "output_nr", 0)

    @property
    def volatile(self) -> bool:
        """Removed from torch (always False); reading or setting it warns, as torch's."""
        warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning, stacklevel=2)
        return False

    @volatile.setter
    def volatile(self, value) -> None:
        warnings.warn("volatile was removed and now has no effect. Use `with flambeau.no_grad():` instead.",
                      UserWarning, stacklevel=2)

    def reinforce(self, reward):
        """Removed from torch: raises, pointing to ``flambeau.distributions``."""
        raise RuntimeError("reinforce() was removed.\nUse flambeau.distributions instead.\n"
                           "See https://pytorch.org/docs/main/distributions.html")

    def get_device(self) -> int:
        """The CUDA ordinal, or -1 on CPU."""
        return -1 if self._device.type == "cpu" else self._device.index

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        return self.dtype.is_complex

    def is_signed(self) -> bool:
        return self.dtype.is_signed

    @property
    def _version(self) -> int:
        """Number of in-place modifications of this tensor's storage (Note [Version counter])."""
        return self._storage._version

    def _bump_version(self) -> None:
        self._storage._version += 1

    # --- autograd fields (seam 2) --------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        """Whether autograd records operations on this tensor."""
        # The engine may set _requires_grad on forward-AD dual tensors only so that operators on them reach
        # it (seam 2); those do not require grad for users.
        return self._requires_grad and not getattr(self._autograd_meta, "forward_only", False)

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` in place (only on leaves) and return self."""
        if not isinstance(requires_grad, (bool, np.bool_)):
            raise TypeError(f"requires_grad must be a bool, got {type(requires_grad).__name__}")
        if self.grad_fn is not None and not requires_grad:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        if requires_grad and not self.dtype.is_differentiable:
            raise RuntimeError(f"only Tensors of floating point and complex dtype can require gradients, "
                               f"got {self.dtype}")
        if requires_grad and _engine[0] is None:
            load_engine()  # the first tensor that requires grad brings the autograd engine in (seam 2)
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        """True for tensors not produced by a recorded operation (user-created or detached)."""
        return self.grad_fn is None

    @property
    def grad(self) -> Tensor | None:
        """The accumulated gradient (filled in by ``backward``), or None."""
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad must be a Tensor or None, got {type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(f"assigned grad has data of a different size: expected {list(self.shape)}, "
                                   f"got {list(value.shape)}")
            if value.dtype is not self.dtype:
                raise RuntimeError(f"assigned grad has data of a different type: expected {self.dtype}, "
                                   f"got {value.dtype}")
            if value._device is not self._device:
                raise RuntimeError(f"assigned grad has data located on a different device: expected {self._device}, "
                                   f"got {value._device}")
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    @property
    def _base_tensor(self):
        return self._base

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
        """Accumulate the gradient of this tensor w.r.t. graph leaves into their ``.grad``.

        Needs the flambeau-autograd package (the engine is installed through seam 2).
        """
        get_engine().backward((self,), None if gradient is None else (gradient,), retain_graph,
                              create_graph, inputs)

    def register_hook(self, hook):
        """Register a hook called with this tensor's gradient; it may return a replacement."""
        return get_engine().register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Register ``hook(tensor)``, called after backward accumulated this leaf's gradient into ``.grad``.

        ``hook`` must return None. Leaf tensors only (RuntimeError otherwise); returns a handle with
        ``remove()``.
        """
        return get_engine().register_post_accumulate_grad_hook(self, hook)

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor after backward."""
        get_engine().retain_grad(self)

    @property
    def retains_grad(self) -> bool:
        meta = self._autograd_meta
        return bool(meta is not None and getattr(meta, "retains_grad", False))

    def detach(self) -> Tensor:
        """A tensor sharing this one's storage and version counter, outside the graph."""
        return _wrap(self._data, self._device, self._storage)

    def as_subclass(self, cls) -> Tensor:
        """This tensor as an instance of ``cls`` (a subclass of Tensor), as torch's: the same memory (writes through
        either show in both) and, where this tensor is recorded, attached to the graph through an alias view."""
        _check_subclass(cls, "as_subclass", "cls")
        src = self.view_as(self) if self._requires_grad else self  # (an alias the graph knows)
        out = object.__new__(cls)
        for slot in _FIELDS:
            setattr(out, slot, getattr(src, slot))
        return out

    @staticmethod
    def _make_subclass(cls, data: Tensor, require_grad: bool = False) -> Tensor:
        """torch's constructor of tensor subclasses (``nn.Parameter``'s): an instance of ``cls`` sharing ``data``'s
        memory, outside the graph (a leaf), requiring grad if ``require_grad``."""
        _check_subclass(cls, "_make_subclass", "cls")
        if not isinstance(data, Tensor):
            raise TypeError(f"_make_subclass(): argument 'data' must be Tensor, not {type(data).__name__}")
        out = object.__new__(cls)
        out._data, out._storage, out._device, out.dtype = data._data, data._storage, data._device, data.dtype
        out._requires_grad, out._grad, out.grad_fn, out._base, out._autograd_meta = False, None, None, None, None
        if require_grad:
            out.requires_grad_(True)
        return out

    def detach_(self) -> Tensor:
        """Detach this tensor from the graph in place and return it."""
        if self._base is not None and self._base._requires_grad:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead."
            )
        self.grad_fn = None
        self._requires_grad = False
        self._autograd_meta = None
        return self

    @property
    def data(self) -> Tensor:
        """A detached tensor sharing this one's storage; assigning replaces this tensor's data."""
        return _wrap(self._data, self._device, self._storage)

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, got {type(value).__name__}")
        self._data, self._storage, self._device, self.dtype = value._data, value._storage, value._device, value.dtype

    # --- conversion ----------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """A numpy array sharing memory with this CPU tensor (``force=True`` copies from CUDA)."""
        if self._device.type != "cpu":
            if not force:
                raise TypeError(
                    f"can't convert {self._device.type} tensor to numpy. Use Tensor.cpu() to copy "
                    "the tensor to host memory first."
                )
            return backend(self._device.type).to_numpy(self._data)
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy(force=True)
        if dtype is not None:
            arr = arr.astype(dtype, copy=False)
        return np.array(arr, copy=True) if copy else arr

    def tolist(self):
        """The data as (nested) Python lists of Python numbers."""
        return self.numpy(force=True).tolist()

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar"
            )
        return self.numpy(force=True).reshape(()).item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.dtype.is_complex or self.dtype is dt.bool or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with {'no values' if self._data.size == 0 else 'more than one value'} "
                "is ambiguous"
            )
        return bool(self.item())

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if self._data.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, protocol):
        # Plain pickling copies the data; flambeau.multiprocessing installs reducers that share it.
        return (_rebuild_tensor, (np.array(self.numpy(force=True)), str(self._device), self._requires_grad))

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol"
            )
        new = self.clone().detach()
        new._requires_grad = self._requires_grad
        if self._grad is not None:
            new._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = new
        return new

    # --- interop ---------------------------------------------------------------------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self._device.type != "cpu":
            raise BufferError("DLPack export of CUDA tensors is not supported yet; use __cuda_array_interface__")
        if self._requires_grad:
            raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
        kwargs = {}
        if max_version is not None:
            kwargs["max_version"] = max_version
        if copy is not None:
            kwargs["copy"] = copy
        return self._data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        if self._device.type == "cuda":
            return (2, self._device.index)
        return (1, 0)

    @property
    def __cuda_array_interface__(self):
        if self._device.type != "cuda":
            raise AttributeError(
                f"Can't get __cuda_array_interface__ on non-CUDA tensor type: {self.dtype} on {self._device}. "
                "If CUDA data is required use tensor.cuda() to copy tensor to device memory."
            )
        if self._requires_grad:
            raise RuntimeError(
                "Can't get __cuda_array_interface__ on Variable that requires grad. "
                "If gradients aren't required, use var.detach() to get Variable that doesn't require grad."
            )
        return backend("cuda").cuda_array_interface(self._data)

    # --- moves (``to`` itself is the front of the operator to_copy, bound from flambeau._ops.core) --------
    def cpu(self) -> Tensor:
        """This tensor on the CPU (self if already there)."""
        return self.to(device=CPU)

    def cuda(self, device=None, non_blocking: bool = False) -> Tensor:
        """This tensor on a CUDA device (the current one by default)."""
        return self.to(device="cuda" if device is None else to_device(device), non_blocking=non_blocking)

    # ``type()`` is bound by flambeau._legacy_types, beside the legacy types it names and converts to.

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    def float(self) -> Tensor:
        return self.to(dt.float32)

    def double(self) -> Tensor:
        return self.to(dt.float64)

    def half(self) -> Tensor:
        return self.to(dt.float16)

    def long(self) -> Tensor:
        return self.to(dt.int64)

    def int(self) -> Tensor:
        return self.to(dt.int32)

    def short(self) -> Tensor:
        return self.to(dt.int16)

    def char(self) -> Tensor:
        return self.to(dt.int8)

    def byte(self) -> Tensor:
        return self.to(dt.uint8)

    def bool(self) -> Tensor:
        return self.to(dt.bool)

    def bfloat16(self) -> Tensor:
        return self.to(dt.bfloat16)

    def cfloat(self) -> Tensor:
        return self.to(dt.complex64)

    def cdouble(self) -> Tensor:
        return self.to(dt.complex128)

    def chalf(self) -> Tensor:
        """Raises: flambeau has no complex32 dtype (torch's experimental ComplexHalf)."""
        raise TypeError("chalf(): flambeau has no complex32 (ComplexHalf) dtype; use cfloat() (complex64)")

    # Devices flambeau does not run on: the errors torch raises when it is built without them.
    def xpu(self, device=None, non_blocking: bool = False) -> Tensor:
        raise AssertionError("Torch not compiled with XPU enabled")

    def ipu(self, device=None, non_blocking: bool = False) -> Tensor:
        raise RuntimeError("PyTorch is not linked with support for ipu devices")

    def mtia(self, device=None, non_blocking: bool = False) -> Tensor:
        raise AssertionError("Torch not compiled with MTIA enabled")

    # --- pinned memory (used by flambeau.data's DataLoader(pin_memory=True)) -------------------
    def pin_memory(self, device=None) -> Tensor:
        """A copy of this CPU tensor in page-locked (pinned) host memory; self if already pinned.

        A pinned tensor can be copied to a GPU asynchronously (``.to('cuda', non_blocking=True)``).
        The memory comes from numba-cuda's pinned host allocation in the current context, which
        flambeau-cuda-alloc's caching pinned allocator serves when it is installed as numba's memory
        manager (the allocator seam, ``flambeau/cuda/_allocator.py``). ``device`` is accepted for
        torch compatibility and ignored. The copy has the same shape, dtype and values.

        Raises:
            RuntimeError: for a tensor not on the CPU, or when no CUDA device is available.
        """
        if self._device.type != "cpu":
            raise RuntimeError(f"cannot pin '{self.type()}' only dense CPU tensors can be pinned")
        if self.is_pinned():
            return self
        from flambeau import cuda

        if not cuda.is_available() or cuda.is_simulator():
            raise RuntimeError("Cannot access accelerator device when none is available.")
        from numba import cuda as numba_cuda

        host = numba_cuda.pinned_array(tuple(self._data.shape), dtype=self._data.dtype)
        np.copyto(host, self._data)
        return _wrap(host, CPU, dtype=self.dtype)

    def is_pinned(self, device=None) -> bool:
        """Whether this tensor lives in page-locked host memory (as made by :meth:`pin_memory`)."""
        if self._device.type != "cpu":
            return False
        buf = self._storage._buffer
        while buf is not None:  # a pinned array's buffer chain ends in numba's PinnedMemory
            if type(buf).__name__ in ("PinnedMemory", "MappedMemory"):
                return True
            buf = getattr(buf, "base", None)
        return False

    # --- shared memory (the sharing seam; flambeau.multiprocessing sends shared tensors as handles) ---
    def is_shared(self) -> bool:
        """Whether this tensor's storage is in shared memory (always True for CUDA tensors, as in torch)."""
        return self._storage.is_shared()




def _wrap(data, device=CPU, storage=None, dtype=None) -> Tensor:
    """Wrap a backend array as a new Tensor (a fresh storage unless ``storage`` is given).

    This is the constructor every operator uses, so it does as little as possible.
    """
    t = _new(Tensor)
    t._data = data
    t._storage = Storage(data, device) if storage is None else storage
    t._device = device
    t.dtype = _BY_NP[data.dtype] if dtype is None else dtype
    t._requires_grad = False
    t._grad = None
    t.grad_fn = None
    t._base = None
    t._autograd_meta = None
    return t


def _rebuild_tensor(arr, device_str, requires_grad):
    t = _wrap(arr, CPU)  # ``arr``: the C-contiguous copy __reduce_ex__ made
    if device_str != "cpu":
        t = t.to(device_str)
    t._requires_grad = requires_grad
    return t


def _is_contiguous(shape, byte_strides, itemsize) -> bool:
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(byte_strides)):
        if n != 1:
            if s != expected:
                return 0 in shape  # empty tensors are contiguous whatever their strides (as in torch)
            expected *= n
    return True


def _wrap_dim(dim, ndim: int) -> int:
    """Normalise a possibly negative dimension; IndexError naming the valid range if out of it."""
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not isinstance(dim, int) or isinstance(dim, bool):
        dim = getattr(dim, "__index__", None) and dim.__index__()
        if dim is None:
            raise TypeError(f"dim must be an int, got {dim!r}")
    if dim < lo or dim > hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return dim + ndim if dim < 0 else dim


_FIELDS = tuple(slot for slot in Tensor.__slots__ if slot != "__weakref__")  # what a tensor object holds


def _check_subclass(cls, fname: str, argname: str) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"{fname}(): argument '{argname}' must be a subclass of Tensor, not {cls!r}")


# Note [numpy ufuncs on tensors]
#     numpy hands a ufunc whose operands include a tensor to ``Tensor.__array_ufunc__``. The arithmetic and comparison
#     ufuncs that are Python operators (``np.add``, ``np.less`` ...: what ``ndarray + t`` calls) run flambeau's
#     operator on the operands (an array joining as a tensor), so that ``ndarray + t`` is the tensor torch gives,
#     recorded by autograd. Any other ufunc (``np.sqrt(t)``, ``np.isnan(t)``) computes in numpy on the tensors'
#     values (a CPU tensor's own memory; a CUDA tensor, or one that requires grad, raises as ``Tensor.numpy()``
#     does) and gives its array results back as CPU tensors, as torch's ``__array_wrap__`` does (a boolean result
#     stays boolean, where torch's becomes uint8). Other methods (``np.add.reduce``), and ``out=``, are refused.
def _operator_ufuncs() -> dict:
    import operator

    return {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "true_divide": operator.truediv,
            "divide": operator.truediv, "floor_divide": operator.floordiv, "remainder": operator.mod,
            "power": operator.pow, "matmul": operator.matmul, "equal": operator.eq, "not_equal": operator.ne,
            "less": operator.lt, "less_equal": operator.le, "greater": operator.gt, "greater_equal": operator.ge,
            "bitwise_and": operator.and_, "bitwise_or": operator.or_, "bitwise_xor": operator.xor,
            "left_shift": operator.lshift, "right_shift": operator.rshift}


_OPERATOR_UFUNCS: dict = {}


def _array_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict):
    if method != "__call__" or "out" in kwargs:
        return NotImplemented
    if not _OPERATOR_UFUNCS:
        _OPERATOR_UFUNCS.update(_operator_ufuncs())
    op = _OPERATOR_UFUNCS.get(ufunc.__name__)
    if op is not None and len(inputs) == 2 and not kwargs:
        # a numpy scalar joins as the Python number it holds, as torch takes it (``np.float64(2) * t`` keeps
        # ``t``'s float32); left as it is, its own operator would hand the call back here without end
        a, b = (_from_ufunc(x) if isinstance(x, np.ndarray) else x.item() if isinstance(x, np.generic) else x
                for x in inputs)
        return op(a, b)
    values = [x.numpy() if isinstance(x, Tensor) else x for x in inputs]
    result = ufunc(*values, **kwargs)
    if isinstance(result, tuple):
        return tuple(_from_ufunc(r) for r in result)
    return _from_ufunc(result)


def _from_ufunc(r):
    """A numpy result (or operand) as a CPU tensor of its own memory (a copy); anything else as it is."""
    if isinstance(r, (np.ndarray, np.generic)) and r.dtype in _BY_NP:
        return _wrap(np.array(r, copy=True))
    return r
