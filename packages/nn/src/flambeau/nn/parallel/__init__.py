"""``flambeau.nn.parallel``: :class:`DataParallel` (single process, several CUDA devices) and
``DistributedDataParallel``, torch's import path to flambeau-distributed's DDP.

flambeau-nn does not depend on flambeau-distributed (which depends on flambeau-nn): the name
resolves on first use (PEP 562), and says what to install when flambeau-distributed is absent.
``flambeau.nn.SyncBatchNorm`` resolves the same way.
"""

from flambeau.nn.parallel.data_parallel import (
    DataParallel,
    data_parallel,
    gather,
    parallel_apply,
    replicate,
    scatter,
    scatter_kwargs,
)

__all__ = ["DistributedDataParallel", "DataParallel", "data_parallel", "gather", "parallel_apply", "replicate",
           "scatter", "scatter_kwargs"]


def _from_distributed(name: str):
    """``flambeau.distributed.<name>``, or a ModuleNotFoundError saying which distribution to install."""
    try:
        import flambeau.distributed as dist
    except ModuleNotFoundError as error:
        if error.name is None or not error.name.startswith("flambeau.distributed"):
            raise
        message = f"{name} is part of the flambeau-distributed distribution, which is not installed " \
                  f"(pip install flambeau-distributed)"
        raise ModuleNotFoundError(message, name="flambeau.distributed") from None
    return getattr(dist, name)


def __getattr__(name: str):
    if name == "DistributedDataParallel":
        return _from_distributed(name)
    raise AttributeError(f"module 'flambeau.nn.parallel' has no attribute {name!r}")
