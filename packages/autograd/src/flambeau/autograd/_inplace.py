"""In-place operators under autograd (paper, section 4.3: mutation guarded by version counters).

Note [In-place operators under autograd]
When an in-place operator must be recorded, tensor-core hands it to :func:`apply_inplace`
instead of running its kernel. We run the operator *out of place* on an alias of ``self`` that
carries ``self``'s history (and a private copy of its data when the derivative needs the old
value), copy the result into ``self`` (bumping its version) and let ``self`` take over the
result's history. If ``self`` is a view, the history of its base is rebased: the base's new node
scatters the view's gradient back into the base's (torch's ``CopySlices``), and the view's node
becomes an ``as_strided`` of the base.

Benign in-place operations therefore just work; an in-place change to a tensor some node saved
is caught by the version check when backward unpacks it.
"""

from __future__ import annotations

from flambeau import Tensor, no_grad
from flambeau.autograd._derivatives import DERIVATIVES
from flambeau.autograd._formulas import AS_STRIDED_SCATTER
from flambeau.autograd._node import meta_of, set_output_nr
from flambeau.autograd._opnode import OpNode

__all__ = ["apply_inplace"]

LEAF_MESSAGE = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_OF_LEAF_MESSAGE = "a view of a leaf Variable that requires grad is being used in an in-place operation."


def _out_of_place(op):
    """The out-of-place function computing what in-place ``op`` writes into ``self``."""
    special = _METHOD_ONLY.get(op.name)
    if special is not None:
        return special
    if op.category == "random":  # tensor-core hands over the samples: the result ignores the old value
        return _write_samples
    if op.fn is None:
        raise RuntimeError(f"{op.name}_: in-place operator has no out-of-place form to differentiate")
    return op.fn


def apply_inplace(op, inputs: tuple, attrs: dict) -> Tensor:
    self = inputs[0]
    if self.grad_fn is None and self._requires_grad:
        raise RuntimeError(LEAF_MESSAGE)
    base = self._base
    if base is not None and base.grad_fn is None and base._requires_grad:
        raise RuntimeError(VIEW_OF_LEAF_MESSAGE)
    kwargs = {k: v for k, v in attrs.items() if k != "inplace"}
    deriv = DERIVATIVES.get(op.name)
    needs_old_value = deriv is None or (deriv.pos_names and deriv.pos_names[0] in deriv.save)
    old = _alias_with_history(self, copy=needs_old_value)
    out = _out_of_place(op)(old, *inputs[1:], **kwargs)
    with no_grad():
        self.copy_(out)
    if base is None:
        _take_history(self, out)
    else:
        _rebase_view(self, base, out)
    return self


def _alias_with_history(t: Tensor, copy: bool) -> Tensor:
    """A tensor with ``t``'s value and autograd history; its own memory when ``copy``."""
    alias = t.detach().clone() if copy else t.detach()
    alias.grad_fn = t.grad_fn
    alias._requires_grad = t._requires_grad
    meta = t._autograd_meta
    if meta is not None and meta.output_nr:
        set_output_nr(alias, meta.output_nr)
    return alias


def _take_history(self: Tensor, out: Tensor) -> None:
    self.grad_fn = out.grad_fn
    self._requires_grad = out._requires_grad
    nr = 0 if out._autograd_meta is None else out._autograd_meta.output_nr
    if nr or self._autograd_meta is not None:
        meta_of(self).output_nr = nr


def _rebase_view(view: Tensor, base: Tensor, out: Tensor) -> None:
    """Make ``base``'s history scatter ``out`` into it, and ``view`` an as_strided view of the new base."""
    if not base.is_contiguous():
        raise RuntimeError("in-place operation on a view of a non-contiguous tensor is not supported by "
                           "flambeau-autograd yet; call .contiguous() on the base first")
    size, stride = tuple(view.shape), view.stride()
    offset = view.storage_offset() - base.storage_offset()
    base_alias = _alias_with_history(base, copy=False)
    OpNode.create(AS_STRIDED_SCATTER, (base_alias, out, size, stride, offset), {}, base)
    OpNode.create(DERIVATIVES["as_strided"], (base, size, stride, offset), {}, view)


def _write_samples(old: Tensor, samples: Tensor, **attrs):
    return old * 0 + samples.to(device=old.device, dtype=old.dtype)


def _fill_like(old: Tensor, value):
    return old * 0 + value


def _copy_like(old: Tensor, src, non_blocking: bool = False):
    if isinstance(src, Tensor):
        src = src.to(device=old.device, dtype=old.dtype)
    return old * 0 + src


_METHOD_ONLY = {
    "copy_": _copy_like,
    "fill_": _fill_like,
    "zero_": lambda old: old * 0,
}
