"""``flambeau.func``: composable function transforms, as ``torch.func``.

``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd`` and ``hessian`` transform a
function of tensors into the function computing its derivatives (:mod:`flambeau.func._eager`);
``vmap`` maps a function over a batch dimension (:mod:`flambeau.func._vmap`); ``functional_call``
runs a module with given weights, ``stack_module_state`` stacks the weights of an ensemble for it,
``linearize`` fixes the point of a Jacobian-vector product (:mod:`flambeau.func._ensembling`);
``rearrange`` reorders dimensions with an einops pattern; ``functionalize``, ``debug_unwrap`` and
``replace_all_batch_norm_modules_`` are torch's utilities (:mod:`flambeau.func._utilities`).
They compose: ``vmap(grad(f))``, ``jacrev(jacrev(f))``,
``hessian = jacfwd(jacrev(f))``.

Shipped by flambeau-autograd.
"""

from flambeau.func import _batch_rules  # noqa: F401  - installs vmap's batching rules
from flambeau.func._eager import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from flambeau.func._ensembling import linearize, stack_module_state
from flambeau.func._functional_call import functional_call
from flambeau.func._rearrange import rearrange
from flambeau.func._utilities import debug_unwrap, functionalize, replace_all_batch_norm_modules_
from flambeau.func._vmap import BatchedTensor, VmapFallbackWarning, vmap, vmap_fallbacks

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "functional_call", "vmap",
           "stack_module_state", "linearize", "functionalize", "debug_unwrap", "replace_all_batch_norm_modules_",
           "rearrange",
           "vmap_fallbacks", "VmapFallbackWarning", "BatchedTensor"]
