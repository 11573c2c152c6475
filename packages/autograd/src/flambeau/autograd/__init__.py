"""Reverse-mode automatic differentiation for flambeau (section 4.3 of the PyTorch paper).

Importing this package installs its engine into tensor-core (DESIGN.md seam 2): from then on,
every operator that runs with grad mode on and an input that requires grad is recorded, and
``Tensor.backward()`` works. The derivative of every differentiable operator lives in one
table keyed by operator name (``_formulas.TABLE``, joined by the family tables of the
``_formulas_<family>`` modules).
"""

from __future__ import annotations

import warnings

from flambeau._grad_mode import enable_grad, install_engine, is_grad_enabled, no_grad, set_grad_enabled
from flambeau._ops import OPS as _OPS
from flambeau._tensor import Tensor as _Tensor
from flambeau.autograd import forward_ad, functional, graph, profiler
from flambeau.autograd._anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from flambeau.autograd._engine import DERIVATIVES as _DERIVATIVES
from flambeau.autograd._engine import ENGINE as _ENGINE
from flambeau.autograd._formulas import TABLE as _CORE_TABLE
from flambeau.autograd._formulas_act import TABLE as _ACT_TABLE
from flambeau.autograd._formulas_complex import TABLE as _COMPLEX_TABLE
from flambeau.autograd._formulas_conv import TABLE as _CONV_TABLE
from flambeau.autograd._formulas_linalg import TABLE as _LINALG_TABLE
from flambeau.autograd._formulas_linalg import TANGENTS as _LINALG_TANGENTS
from flambeau.autograd._formulas_norm import TABLE as _NORM_TABLE
from flambeau.autograd._formulas_seq import TABLE as _SEQ_TABLE
from flambeau.autograd._formulas_spectral import TABLE as _SPECTRAL_TABLE
from flambeau.autograd._inference import inference_mode, is_inference_mode_enabled
from flambeau.autograd.function import Function, FunctionCtx, once_differentiable
from flambeau.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck
from flambeau.autograd.variable import Variable

__all__ = [
    "backward", "grad", "Function", "FunctionCtx", "once_differentiable", "gradcheck", "gradgradcheck",
    "GradcheckError", "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "no_grad", "enable_grad",
    "set_grad_enabled", "is_grad_enabled", "inference_mode", "is_inference_mode_enabled", "graph", "functional",
    "profiler", "Variable",
]


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    """Accumulate gradients of ``tensors`` w.r.t. graph leaves into their ``.grad``.

    Args:
        tensors: tensor or sequence of tensors to differentiate.
        grad_tensors: gradients w.r.t. each of ``tensors`` (may be omitted for scalars).
        retain_graph: keep the graph's saved tensors for another backward (defaults to ``create_graph``).
        create_graph: record the backward pass itself, for higher-order derivatives.
        inputs: accumulate only into these tensors' ``.grad``.
    """
    _ENGINE.backward(tensors, grad_tensors, retain_graph, create_graph, inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False,
         only_inputs: bool = True, allow_unused: bool | None = None, is_grads_batched: bool = False,
         materialize_grads: bool = False):
    """The gradients of ``outputs`` w.r.t. ``inputs`` (a tuple), without touching any ``.grad``.

    Args:
        outputs: tensor or sequence of tensors.
        inputs: tensor or sequence of tensors that require grad.
        grad_outputs: vectors of the vector-Jacobian product (may be omitted for scalar outputs).
        retain_graph, create_graph: as in :func:`backward`.
        only_inputs: ignored, as torch ignores it (it warns when False).
        allow_unused: return None for inputs the outputs don't depend on (else raise).
        is_grads_batched: the first dim of every ``grad_outputs`` tensor is a batch of vectors: each input's
            gradient gets the same first dim, one vector-Jacobian product per vector (computed one after the other
            over the retained graph; torch vmaps them, with the same results).
        materialize_grads: return zeros instead of None for unused inputs.
    """
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
                      "gradient for other parts of the graph, please use flambeau.autograd.backward.", FutureWarning,
                      stacklevel=2)
    allow = bool(allow_unused) or materialize_grads
    if not is_grads_batched:
        return _ENGINE.grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow, materialize_grads)
    return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow, materialize_grads)


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads):
    """:func:`grad` with ``is_grads_batched``: a vector-Jacobian product per vector of the batch, stacked."""
    from flambeau import stack

    vectors = [grad_outputs] if isinstance(grad_outputs, _Tensor) else list(grad_outputs or ())
    if not vectors or not all(isinstance(v, _Tensor) and v.dim() > 0 for v in vectors):
        raise RuntimeError("is_grads_batched=True needs grad_outputs: tensors whose first dim is the batch")
    size = vectors[0].shape[0]
    if any(v.shape[0] != size for v in vectors):
        raise RuntimeError(f"is_grads_batched=True: every grad_outputs tensor must have the batch size {size} as "
                           f"its first dim, got sizes {[v.shape[0] for v in vectors]}")
    keep = create_graph if retain_graph is None else retain_graph
    per_vector = [_ENGINE.grad(outputs, inputs, [v[i] for v in vectors], keep if i == size - 1 else True,
                               create_graph, allow_unused, materialize_grads) for i in range(size)]
    return tuple(None if grads[0] is None else stack(list(grads)) for grads in zip(*per_vector))


def _join_tables(*tables: dict) -> dict:
    """One derivative table from the family tables; an operator named twice is a bug."""
    joined: dict = {}
    for table in tables:
        twice = joined.keys() & table.keys()
        if twice:
            raise RuntimeError(f"derivatives declared twice: {sorted(twice)}")
        joined.update(table)
    return joined


_TABLE = _join_tables(_CORE_TABLE, _ACT_TABLE, _COMPLEX_TABLE, _CONV_TABLE, _LINALG_TABLE, _NORM_TABLE, _SEQ_TABLE,
                      _SPECTRAL_TABLE)
forward_ad.TANGENTS.update(_LINALG_TANGENTS)  # forward-mode rules written beside their reverse-mode formulas


def _bind_table() -> list:
    """Join the derivative table with the operator table by name; returns problems found (tests check it)."""
    problems = []
    for name, deriv in _TABLE.items():
        op = _OPS.get(name)
        if op is None:
            problems.append(f"{name}: no operator of that name in tensor-core")
            continue
        try:
            deriv.bind(op)
        except ValueError as e:
            problems.append(str(e))
            continue
        _DERIVATIVES[name] = deriv
    return problems


UNBOUND_DERIVATIVES = _bind_table()
install_engine(_ENGINE)
