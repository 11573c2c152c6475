"""torch.nn.utils.stateless: the deprecated home of :func:`flambeau.func.functional_call`."""

from __future__ import annotations

import warnings

__all__ = ["functional_call"]


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """Deprecated: :func:`flambeau.func.functional_call` (call ``module`` with these parameters and buffers in
    place of its own), which this calls after torch's FutureWarning."""
    from flambeau.func import functional_call as call

    warnings.warn("This API is deprecated and will be removed in a future version. Please use "
                  "flambeau.func.functional_call instead, a drop-in replacement for it.", FutureWarning, stacklevel=2)
    return call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)
