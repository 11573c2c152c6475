"""``functionalize``, ``debug_unwrap`` and ``replace_all_batch_norm_modules_`` of ``torch.func``."""

from __future__ import annotations

import functools

from flambeau.func._vmap import BatchedTensor

__all__ = ["functionalize", "debug_unwrap", "replace_all_batch_norm_modules_"]

_REMOVE = ("mutations", "mutations_and_views")


def functionalize(func, *, remove: str = "mutations"):
    """``func`` with its mutations "removed", as ``torch.func.functionalize``: here, ``func`` itself.

    torch's functionalize rewrites a traced program so that in-place and ``out=`` operators become
    out-of-place ones (and, with ``remove="mutations_and_views"``, views become copies), and copies
    the final values back into mutated inputs. Its documented contract is semantic: the returned
    function computes the same outputs and leaves the inputs mutated exactly as ``func`` would.
    flambeau runs eagerly and has no graph to rewrite, so the returned function calls ``func``: it
    keeps that contract (outputs, input mutations, gradients and composition with :func:`vmap` and
    :func:`grad` are ``func``'s), but the program is not transformed. Outputs that are views of the
    inputs stay views (torch returns copies with ``"mutations_and_views"``).

    Args:
        func: the function to wrap.
        remove: ``"mutations"`` or ``"mutations_and_views"`` (validated as torch does).

    Returns:
        a function with ``func``'s signature.

    Raises:
        RuntimeError: on another value of ``remove``.
    """
    if remove not in _REMOVE:
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. "
                           "Valid options are:\n     remove='mutations': all inplace and out= operators will be "
                           "removed from the program, and replaced with their out-of-place equivalents.\n     "
                           "remove='mutations_and_views': In addition to the above, all aliasing operators {view} "
                           "will be replaced with their non-aliasing counterparts, {view}_copy.\n")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapped


def debug_unwrap(tensor, *, recurse: bool = True):
    """The tensor underneath a :func:`vmap` batched tensor (a debugging aid, as ``torch.func.debug_unwrap``).

    Inside ``vmap`` a function sees one example; this returns the whole batch it stands for, the
    batch dimension first. ``recurse`` unwraps every nested ``vmap`` level, else one. Any other
    tensor is returned as is.
    """
    while isinstance(tensor, BatchedTensor):
        tensor = tensor._value
        if not recurse:
            break
    return tensor


def replace_all_batch_norm_modules_(root):
    """Make every batch-norm module under ``root`` stop tracking running statistics, in place; returns ``root``.

    As ``torch.func.replace_all_batch_norm_modules_``: each ``BatchNorm1d/2d/3d`` (and lazy or sync
    form) that tracks running statistics gets ``running_mean``, ``running_var`` and
    ``num_batches_tracked`` set to None and ``track_running_stats`` to False, so that it normalises
    with the batch statistics in training and evaluation alike (what :func:`vmap` over a model needs).
    """
    from flambeau.nn.modules.batchnorm import _BatchNorm  # flambeau-nn, present wherever a module is given

    for module in root.modules():
        if isinstance(module, _BatchNorm) and module.track_running_stats:
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root
