"""Finite-difference checks of gradients: :func:`gradcheck` and :func:`gradgradcheck`.

Both compare the Jacobian that autograd computes with central finite differences. Use float64
inputs: float32 finite differences are too noisy to be meaningful.
"""

from __future__ import annotations

import numpy as np

import flambeau as fl
from flambeau import Tensor

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by :func:`gradcheck` when analytical and numerical Jacobians differ."""


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _differentiable_outputs(outputs):
    return [o for o in outputs if isinstance(o, Tensor) and o.requires_grad]


def _numerical_jacobians(fn, inputs, outputs, eps):
    """J[o][i] with shape (numel(input i), numel(output o)), by central differences."""
    jac = [[np.zeros((t.numel(), o.numel())) if isinstance(t, Tensor) and t.requires_grad else None
            for t in inputs] for o in outputs]
    for i, t in enumerate(inputs):
        if not (isinstance(t, Tensor) and t.requires_grad):
            continue
        # the input's elements are nudged in place: through a numpy view of a CPU tensor's memory, through
        # element assignment on other devices (each a small copy there: gradcheck is slow anyway)
        data = t.detach().numpy() if t.device.type == "cpu" else t.detach()
        for k, idx in enumerate(np.ndindex(*tuple(data.shape)) if data.ndim else [()]):
            orig = data[idx].copy() if t.device.type == "cpu" else data[idx].item()
            # fn runs with grad mode as the caller has it: it may use autograd itself (gradgradcheck).
            data[idx] = orig + eps
            plus = [_host(o) for o in _differentiable_like(_as_tuple(fn(*inputs)), outputs)]
            data[idx] = orig - eps
            minus = [_host(o) for o in _differentiable_like(_as_tuple(fn(*inputs)), outputs)]
            data[idx] = orig
            for o_idx, (p, m) in enumerate(zip(plus, minus)):
                jac[o_idx][i][k] = (p - m) / (2 * eps)
    return jac


def _host(t: Tensor) -> np.ndarray:
    """``t``'s values as a flat float64 host array (a copy, whatever its device)."""
    return t.detach().cpu().numpy().astype(np.float64).ravel().copy()


def _differentiable_like(new_outputs, reference):
    return [o for o in new_outputs if isinstance(o, Tensor) and o.requires_grad][: len(reference)]


def _analytical_jacobians(inputs, outputs):
    diff_inputs = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    jac = [[np.zeros((t.numel(), o.numel())) if isinstance(t, Tensor) and t.requires_grad else None
            for t in inputs] for o in outputs]
    for o_idx, o in enumerate(outputs):
        for k in range(o.numel()):
            grad_out = fl.zeros_like(o)
            grad_out.view(-1)[k] = 1.0
            grads = fl.autograd.grad(o, diff_inputs, grad_out, retain_graph=True, allow_unused=True)
            j = 0
            for i, t in enumerate(inputs):
                if isinstance(t, Tensor) and t.requires_grad:
                    g = grads[j]
                    j += 1
                    if g is not None:
                        if tuple(g.shape) != tuple(t.shape):
                            raise GradcheckError(f"grad is incorrect shape for input {i}: got {list(g.shape)}, "
                                                 f"expected {list(t.shape)}")
                        jac[o_idx][i][:, k] = _host(g)
    return jac


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, **unused) -> bool:
    """Check ``func``'s gradients at ``inputs`` against central finite differences.

    Args:
        func: function of tensors returning a tensor or a tuple of tensors.
        inputs: a tensor or tuple of tensors (float64 recommended); those with ``requires_grad`` are checked.
        eps: finite-difference step. atol, rtol: tolerances of the comparison.
        raise_exception: raise :class:`GradcheckError` on mismatch (else return False).

    Returns:
        True if every Jacobian matches.
    """
    inputs = _as_tuple(inputs)
    for i, t in enumerate(inputs):
        if isinstance(t, Tensor) and t.requires_grad and t.dtype is not fl.float64:
            import warnings

            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point. "
                          "This check will likely fail if all the inputs are not of double precision floating "
                          "point.", stacklevel=2)
    outputs = _differentiable_outputs(_as_tuple(func(*inputs)))
    if not outputs:
        raise GradcheckError("gradcheck expects at least one output of func to require grad")
    analytical = _analytical_jacobians(inputs, outputs)
    numerical = _numerical_jacobians(func, inputs, outputs, eps)
    for o_idx in range(len(outputs)):
        for i in range(len(inputs)):
            a, n = analytical[o_idx][i], numerical[o_idx][i]
            if a is None:
                continue
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                msg = (f"Jacobian mismatch for output {o_idx} with respect to input {i},\n"
                       f"numerical:{n}\nanalytical:{a}\n")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                  gen_non_contig_grad_outputs: bool = False, raise_exception: bool = True, **unused) -> bool:
    """Check second-order gradients of ``func`` at ``inputs`` (gradcheck of its vector-Jacobian product).

    ``grad_outputs`` default to random float64 tensors shaped like the outputs (fixed seed).
    """
    inputs = _as_tuple(inputs)
    outputs = _differentiable_outputs(_as_tuple(func(*inputs)))
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(fl.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype, device=o.device,
                                       requires_grad=True) for o in outputs)
    grad_outputs = _as_tuple(grad_outputs)
    n_inputs = len(inputs)
    diff_positions = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]

    def vjp(*args):
        ins, gos = args[:n_inputs], args[n_inputs:]
        outs = _differentiable_outputs(_as_tuple(func(*ins)))
        diff = [ins[i] for i in diff_positions]
        grads = fl.autograd.grad(outs, diff, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(vjp, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
