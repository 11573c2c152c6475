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

__version__ = "0.1.0"

from flambeau import (  # noqa: E402
    _factories,
    _info,
    _interop,
    _ops,  # noqa: F401  - fills the operator table
    _random,
    cuda,  # noqa: E402
)
from flambeau._device import device  # noqa: E402
from flambeau._dtype import (  # noqa: E402
    bool,
    can_cast,
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
from flambeau._ops._registry import OPS as _OPS  # noqa: E402
from flambeau._parallel import get_num_threads, set_num_threads  # noqa: E402
from flambeau._random import *  # noqa: E402,F403
from flambeau._serialization import load, save  # noqa: E402
from flambeau._size import Size  # noqa: E402
from flambeau._tensor import Tensor  # noqa: E402


def _bind_operators() -> list:
    """Bind every declared variant of the operator table; return the public function names."""
    names = []
    g = globals()
    for op in _OPS.values():
        if op.fn is not None:
            if op.function:
                g[op.name] = op.fn
                names.append(op.name)
            if op.method:
                setattr(Tensor, op.name, op.fn)
        if op.inplace_fn is not None:
            setattr(Tensor, op.name + "_", op.inplace_fn)
        for dunder, fn in op.dunders.items():
            setattr(Tensor, dunder, fn)
        for alias in op.aliases:
            if op.function:
                g[alias] = op.fn
                names.append(alias)
            if op.method:
                setattr(Tensor, alias, op.fn)
            if op.inplace_fn is not None:
                setattr(Tensor, alias + "_", op.inplace_fn)
    return names


__all__ = [
    "Tensor", "Size", "device", "dtype", "cuda",
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "half", "float", "double", "short", "int", "long",
    "get_default_dtype", "set_default_dtype", "promote_types", "result_type", "can_cast",
    "save", "load",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "get_num_threads", "set_num_threads",
    *_factories.__all__, *_info.__all__, *_interop.__all__, *_random.__all__,
    *_bind_operators(),
]


# Subpackages resolved on first attribute access (PEP 562), as ``import torch`` makes ``torch.nn``
# available: the other distributions' (``_PROVIDERS``) and tensor-core's own ``flambeau.utils``.
_LAZY_SUBPACKAGES = (*(name for name in _PROVIDERS if "." not in name), "utils")


def __getattr__(name: str):
    if name in _LAZY_SUBPACKAGES:
        return _resolve(__name__, name)
    if name == "vmap":  # torch.vmap is torch.func.vmap
        return _resolve(__name__, "func").vmap
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY_SUBPACKAGES, "vmap"])
