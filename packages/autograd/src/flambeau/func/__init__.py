"""``flambeau.func``: composable function transforms, as ``torch.func``.

``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd`` and ``hessian`` transform a
function of tensors into the function computing its derivatives (:mod:`flambeau.func._eager`);
``vmap`` maps a function over a batch dimension (:mod:`flambeau.func._vmap`); ``functional_call``
runs a module with given weights. They compose: ``vmap(grad(f))``, ``jacrev(jacrev(f))``,
``hessian = jacfwd(jacrev(f))``.

Shipped by flambeau-autograd.
"""

from flambeau.func import _batch_rules  # noqa: F401  - installs vmap's batching rules
from flambeau.func._eager import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from flambeau.func._functional_call import functional_call
from flambeau.func._vmap import BatchedTensor, VmapFallbackWarning, vmap, vmap_fallbacks

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "functional_call", "vmap",
           "vmap_fallbacks", "VmapFallbackWarning", "BatchedTensor"]
