"""In-place operators under autograd (paper, section 4.3: mutation guarded by version counters).

Note [In-place operators under autograd]
When an in-place operator must be recorded, tensor-core hands it to :func:`apply_inplace`
instead of running its kernel. Where it cannot run on ``self`` itself (Note [In-place operators that
keep no old value], below: a view, or another tensor argument that might alias ``self``), we run the
operator *out of place* on an alias of ``self`` that
carries ``self``'s history (and a private copy of its data when the derivative needs the old
value), copy the result into ``self`` (bumping its version) and let ``self`` take over the
result's history. If ``self`` is a view, the history of its base is rebased: the base's new node
scatters the view's gradient back into the base's (torch's ``CopySlices``), and the view's node
becomes an ``as_strided`` of the base.

Benign in-place operations therefore just work; an in-place change to a tensor some node saved
is caught by the version check when backward unpacks it.

Note [In-place operators that keep no old value]
Running an in-place operator out of place costs an allocation and a copy back (MobileNetV2's
``hardtanh_``: 0.39 ms under autograd, 0.19 ms in torch). When ``self`` is not a view and no other
argument is a tensor (nothing else can alias ``self``), the operator runs on ``self`` itself, as
torch's in-place kernels do: grad mode off, the kernel writes into ``self`` and bumps its version,
and the node is recorded with ``self`` as its result and its edges taken from an alias carrying
``self``'s old history -- a copy of the old value where the derivative reads it (``exp_`` keeps none,
``hardtanh_`` and ``mul_(2)`` one). A saved result is ``self``, so changing it in place again before
backward is caught by the version check, as in torch: the formulas save the result only where torch's
do. Metadata-only operators (``squeeze_``, ``t_`` ...) take this route on views too: they write no data.

Note [Views of a changed base]
A view keeps the history it had when it was taken: after ``a = x * 1; v = a[0]; a.relu_()``, ``v`` holds
relu's values but its node still reads ``a``'s old history, and its gradient would skip relu, silently.
torch rebuilds such a view's history when its base's version moved. Here every view an operator records
of a non-leaf base is noted in the base's autograd meta (a WeakSet), and an in-place change of the base, or
of one of its views, gives each other live view the history of an ``as_strided`` of the base's new history.
Leaves that require grad cannot be changed in place under autograd, so their views are not noted.
"""

from __future__ import annotations

import weakref

from flambeau import Tensor, no_grad
from flambeau.autograd._derivatives import DERIVATIVES
from flambeau.autograd._formulas import AS_STRIDED_SCATTER
from flambeau.autograd._node import meta_of, set_output_nr
from flambeau.autograd._opnode import OpNode

__all__ = ["apply_inplace", "note_views"]

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


def apply_inplace(op, inputs: tuple, attrs: dict, direct: bool = True) -> Tensor:
    """Run in-place ``op`` on ``inputs[0]`` and record it (Note [In-place operators under autograd]);
    ``direct=False`` (forward AD active) always takes the out-of-place route."""
    self = inputs[0]
    if self.grad_fn is None and self._requires_grad:
        raise RuntimeError(LEAF_MESSAGE)
    base = self._base
    if base is not None and base.grad_fn is None and base._requires_grad:
        raise RuntimeError(VIEW_OF_LEAF_MESSAGE)
    kwargs = {k: v for k, v in attrs.items() if k != "inplace"}
    deriv = DERIVATIVES.get(op.name)
    needs_old_value = deriv is None or (deriv.pos_names and deriv.pos_names[0] in deriv.save)
    if direct and deriv is not None and (base is None or op.category == "view") \
            and _keeps_no_other_tensor(op, inputs, kwargs):
        _run_in_place(op, deriv, inputs, kwargs, needs_old_value)
        if op.category != "view":
            _refresh_views(self, None)
        return self
    old = _alias_with_history(self, copy=needs_old_value)
    out = _out_of_place(op)(old, *inputs[1:], **kwargs)
    with no_grad():
        self.copy_(out)
    if base is None:
        _take_history(self, out)
        _refresh_views(self, None)
    else:
        _rebase_view(self, base, out)
        _refresh_views(base, self)
    return self


def note_views(outputs) -> None:
    """Note the views a view operator just recorded in their base's meta (Note [Views of a changed base])."""
    for out in (outputs if isinstance(outputs, (tuple, list)) else (outputs,)):
        base = out._base
        if base is not None and base.grad_fn is not None and out.grad_fn is not None:
            meta = meta_of(base)
            if meta.views is None:
                meta.views = weakref.WeakSet()
            meta.views.add(out)


def _refresh_views(base: Tensor, changed) -> None:
    """Give every live view of ``base`` (but ``changed``, rebased already) an ``as_strided`` of the base's
    new history (Note [Views of a changed base])."""
    meta = base._autograd_meta
    if meta is None or not meta.views:
        return
    for view in list(meta.views):
        if view is changed or view._base is not base or view.grad_fn is None:
            continue
        _record_as_strided(view, base, _view_geometry(view, base))
        _first_output(view)


def _keeps_no_other_tensor(op, inputs: tuple, kwargs: dict) -> bool:
    """Whether ``op`` may run on ``self`` itself (Note [In-place operators that keep no old value]): it has
    an in-place front, and no argument but ``self`` is a tensor (nothing else can alias ``self``)."""
    if op.inplace_fn is None or op.name in _METHOD_ONLY or op.category == "random":
        return False
    for x in inputs[1:]:
        if isinstance(x, (Tensor, list, tuple)):
            return False
    return not any(isinstance(v, Tensor) for v in kwargs.values())


def _run_in_place(op, deriv, inputs: tuple, kwargs: dict, keep_old_value: bool) -> Tensor:
    """The kernel writes into ``self``; the node takes its edges from ``self``'s old history, saves a copy
    of the old value where the derivative reads it and ``self`` as its result where it reads that
    (Note [In-place operators that keep no old value])."""
    self = inputs[0]
    old = _alias_with_history(self, copy=keep_old_value)  # without the copy only its history is read
    with no_grad():
        op.inplace_fn(self, *inputs[1:], **kwargs)
    OpNode.create(deriv, (old, *inputs[1:]), kwargs, self)
    _first_output(self)  # self may have been another output of its old node
    return self


def _first_output(t: Tensor) -> None:
    """``t`` is output 0 of the single-output node just recorded for it."""
    meta = t._autograd_meta
    if meta is not None and meta.output_nr:
        meta.output_nr = 0


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
    geometry = _view_geometry(view, base)
    base_alias = _alias_with_history(base, copy=False)
    OpNode.create(AS_STRIDED_SCATTER, (base_alias, out, *geometry), {}, base)
    _record_as_strided(view, base, geometry)


def _view_geometry(view: Tensor, base: Tensor) -> tuple:
    """``(size, stride, offset)`` of ``view`` in ``base``'s storage, as ``as_strided`` takes them."""
    return tuple(view.shape), view.stride(), view.storage_offset() - base.storage_offset()


def _record_as_strided(view: Tensor, base: Tensor, geometry: tuple) -> None:
    """Give ``view`` the history of an ``as_strided`` of ``base``'s current history."""
    OpNode.create(DERIVATIVES["as_strided"], (base, *geometry), {}, view)


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
