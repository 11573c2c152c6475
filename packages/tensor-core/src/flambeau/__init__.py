"""flambeau: tensors that run operators eagerly on CPU and CUDA, in the spirit of PyTorch.

``import flambeau as fl`` gives the Tensor, dtypes, devices, factories and every operator of the
operator table, bound as ``fl.<op>`` functions and ``Tensor`` methods. Other flambeau
distributions (``flambeau.autograd``, ``flambeau.nn`` ...) are separate packages that extend this
namespace; ``fl.nn``, ``fl.optim``, ``fl.data`` ... import them on first use (``flambeau._subpackages``).
"""

from pkgutil import extend_path

from flambeau._blas import shorten_openblas_spin
from flambeau._subpackages import PROVIDERS as _PROVIDERS
from flambeau._subpackages import install_finders as _install_finders
from flambeau._subpackages import resolve as _resolve
from flambeau._threading_layer import prefer_fork_safe_threading_layer

__path__ = extend_path(__path__, __name__)
prefer_fork_safe_threading_layer()  # before numba starts its threads (Note [numba's threading layer])
shorten_openblas_spin()  # before numpy loads OpenBLAS where it can (Note [OpenBLAS's idle threads])
_install_finders()

from flambeau import (  # noqa: E402
    _factories,
    _info,
    _interop,
    _ops,  # noqa: F401  - fills the operator table
    _random,
    cuda,  # noqa: E402
)
from flambeau._compile import compile  # noqa: E402
from flambeau._determinism import (  # noqa: E402
    are_deterministic_algorithms_enabled,
    get_float32_matmul_precision,
    is_deterministic_algorithms_warn_only_enabled,
    set_float32_matmul_precision,
    use_deterministic_algorithms,
)
from flambeau._device import device  # noqa: E402
from flambeau._dtype import (  # noqa: E402
    bfloat16,
    bool,
    can_cast,
    cdouble,
    cfloat,
    complex64,
    complex128,
    double,
    dtype,
    float,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    promote_types,
    result_type,
    set_default_dtype,
    short,
    uint8,
)
from flambeau._factories import *  # noqa: E402,F403
from flambeau._grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: E402
from flambeau._info import *  # noqa: E402,F403
from flambeau._interop import *  # noqa: E402,F403
from flambeau._layout import layout, sparse_coo, strided  # noqa: E402
from flambeau._legacy_types import CPU_TYPES as _LEGACY_TYPES  # noqa: E402
from flambeau._legacy_types import CUDA_TYPES as _LEGACY_CUDA_TYPES  # noqa: E402
from flambeau._ops._keywords import bind_with_keywords as _bind_with_keywords  # noqa: E402
from flambeau._ops._registry import OPS as _OPS  # noqa: E402
from flambeau._parallel import get_num_threads, set_num_threads  # noqa: E402
from flambeau._random import *  # noqa: E402,F403
from flambeau._serialization import load, save  # noqa: E402
from flambeau._size import Size  # noqa: E402
from flambeau._tensor import Tensor  # noqa: E402
from flambeau.torch_version import __version__  # noqa: E402, F401 - ordered as versions (torch's TorchVersion)

# isort: split
# torch's runtime names that are not operators (after the operator table: they wrap Tensor.to/contiguous)
from flambeau import (  # noqa: E402
    _control_flow,
    _foreach,
    _legacy_methods,  # noqa: F401  - Tensor.new, apply_, map_ ... (bound on import)
    _memory_format,
    _memory_format_methods,  # noqa: F401  - Tensor.contiguous/to/is_contiguous with memory_format= (bound)
    _runtime,
    _storage_api,
)
from flambeau._control_flow import *  # noqa: E402,F403
from flambeau._default_device import get_default_device, set_default_device  # noqa: E402
from flambeau._memory_format import *  # noqa: E402,F403
from flambeau._runtime import *  # noqa: E402,F403
from flambeau._storage_api import *  # noqa: E402,F403
from flambeau._stream import Event, Stream  # noqa: E402
from flambeau.cuda import OutOfMemoryError  # noqa: E402

Storage = _storage_api.LEGACY["FloatStorage"]  # torch.Storage is torch.FloatStorage

# FloatTensor, LongTensor ... and flambeau.cuda.FloatTensor ... (flambeau._legacy_types; set here, not imported
# by flambeau.cuda, which the modules they need import)
globals().update(_LEGACY_TYPES)
for _name, _legacy in {**_LEGACY_CUDA_TYPES, **_storage_api.CUDA_LEGACY}.items():  # and FloatStorage ...
    setattr(cuda, _name, _legacy)
del _name, _legacy


def _bind_operators() -> list:
    """Bind every declared variant of the operator table; return the public function names."""
    names = []
    g = globals()
    for op in _OPS.values():
        if op.fn is not None:  # (with torch's keyword forms: Note [torch's keyword forms])
            op.bindings = (_bind_with_keywords(op, op.fn, out=True) if op.function else None,
                           _bind_with_keywords(op, op.fn, out=False) if op.method else None)
            if op.function:
                g[op.name] = op.bindings[0]
                names.append(op.name)
            if op.method:
                setattr(Tensor, op.name, op.bindings[1])
        if op.inplace_fn is not None:
            setattr(Tensor, op.name + "_", op.inplace_fn)
        for dunder, fn in op.dunders.items():
            setattr(Tensor, dunder, fn)
        for alias in op.aliases:
            if op.function:
                g[alias] = op.bindings[0]
                names.append(alias)
            if op.method:
                setattr(Tensor, alias, op.bindings[1])
            if op.inplace_fn is not None:
                setattr(Tensor, alias + "_", op.inplace_fn)
    return names


__all__ = [
    "Tensor", "Size", "device", "dtype", "cuda",
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
    "complex64", "complex128", "half", "float", "double", "cfloat", "cdouble", "short", "int", "long",
    "layout", "strided", "sparse_coo", *_LEGACY_TYPES,
    "compile", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "set_float32_matmul_precision", "get_float32_matmul_precision",
    "get_default_dtype", "set_default_dtype", "promote_types", "result_type", "can_cast",
    "save", "load",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "get_num_threads", "set_num_threads",
    *_factories.__all__, *_info.__all__, *_interop.__all__, *_random.__all__,
    *_bind_operators(),
    "get_default_device", "set_default_device", "Stream", "Event", "Storage", "OutOfMemoryError",
    *_control_flow.__all__, *_memory_format.__all__, *_runtime.__all__, *_storage_api.__all__,
]

# torch's functions of in-place operators: ``torch.relu_(x)`` is ``x.relu_()`` (the Tensor method itself)
_INPLACE_FUNCTIONS = (
    "abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "asin_", "asinh_",
    "atan_", "atanh_", "ceil_", "celu_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_",
    "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_", "floor_", "frac_", "gcd_", "i0_",
    "index_put_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_",
    "negative_", "rad2deg_", "reciprocal_", "relu_", "resize_as_", "round_", "rsqrt_", "selu_", "sigmoid_", "sin_",
    "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "threshold_", "trunc_", "xlogy_")  # (fill_, zero_: ops)
globals().update({_name: getattr(Tensor, _name) for _name in _INPLACE_FUNCTIONS})
__all__ += _INPLACE_FUNCTIONS
# torch's private list operators (``torch._foreach_mul_``), which moving-average code calls
globals().update(_foreach.FUNCTIONS)


# Subpackages resolved on first attribute access (PEP 562), as ``import torch`` makes ``torch.nn``
# available: the other distributions' (``_PROVIDERS``) and tensor-core's own namespaces.
_OWN_SUBPACKAGES = ("backends", "cpu", "fft", "hub", "jit", "linalg", "random", "safetensors", "serialization",
                    "sparse", "special", "testing", "torch_version", "types", "utils", "version")
_LAZY_SUBPACKAGES = (*(name for name in _PROVIDERS if "." not in name), *_OWN_SUBPACKAGES)


# Top-level names of torch that live in other distributions here, resolved on first access so that
# ``import flambeau`` imports none of them: name -> the flambeau subpackage that defines it.
_LAZY_NAMES = {
    "vmap": "func",  # torch.vmap is torch.func.vmap
    "inference_mode": "autograd",
    "is_inference_mode_enabled": "autograd",
    "autocast": "amp",
    "is_autocast_enabled": "amp",
    "get_autocast_dtype": "amp",
    "is_autocast_cache_enabled": "amp",
    "clear_autocast_cache": "amp",
    # torch's low-level autocast state and torch.GradScaler (torch.amp.GradScaler)
    **dict.fromkeys(("set_autocast_enabled", "set_autocast_dtype", "set_autocast_cache_enabled",
                     "is_autocast_cpu_enabled", "set_autocast_cpu_enabled", "get_autocast_cpu_dtype",
                     "set_autocast_cpu_dtype", "get_autocast_gpu_dtype", "set_autocast_gpu_dtype",
                     "autocast_increment_nesting", "autocast_decrement_nesting", "GradScaler"), "amp"),
    **dict.fromkeys(("is_anomaly_enabled", "set_anomaly_enabled", "is_anomaly_check_nan_enabled"),
                    "autograd._anomaly"),
    # sparse COO tensors: flambeau._sparse builds on the operators (it imports flambeau), so it loads on first use
    "sparse_coo_tensor": "_sparse",
    "spmm": "_sparse",
}


def _to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """The sparse COO tensor of this tensor's nonzero entries (``flambeau._sparse.to_sparse``, loaded on
    first use as :data:`_LAZY_NAMES`)."""
    to_sparse = _resolve(__name__, "_sparse").to_sparse
    return to_sparse(self, sparse_dim, layout=layout, blocksize=blocksize, dense_dim=dense_dim)


Tensor.to_sparse = _to_sparse  # Note [Tensor methods from the layers above]


def __getattr__(name: str):
    if name in _LAZY_SUBPACKAGES:
        return _resolve(__name__, name)
    home = _LAZY_NAMES.get(name)
    if home is not None:
        found = getattr(_resolve(__name__, home), name, None)
        if found is not None:
            return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY_SUBPACKAGES, *_LAZY_NAMES])
