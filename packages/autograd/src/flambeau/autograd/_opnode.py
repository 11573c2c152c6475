"""Nodes for operators of the operator table, built from the derivative table.

A :class:`Derivative` says, for one operator, which values backward needs (``save``) and one
formula per differentiable input, keyed by the input's name in the operator's signature (as in
PyTorch's derivatives.yaml). Formulas are written with flambeau operators, so running them with
grad mode on (``create_graph=True``) records them too: double backward comes for free.

A formula is ``f(grad, s)``: ``grad`` is the gradient of the output (or, for operators with
several outputs, the tuple of them, missing ones materialised as zeros); ``s`` gives the saved
tensors, the non-tensor arguments and ``<name>_shape`` of every tensor input by name. Broadcasting
and dtype changes are undone centrally in :func:`reduce_grad`, so formulas never sum over
broadcast dimensions themselves.

Where one backward operator call gives several inputs' gradients at once (Note [Shared backward calls] in
``_shared_grads``), the derivative also has a ``joint`` ``f(grad, s, need)``: the node calls it once for the set of
inputs whose gradient is wanted and takes every input's gradient from the dict it returns; where it returns None
(grad mode on, say) the per-input formulas run.
"""

from __future__ import annotations

import re

import flambeau as fl
from flambeau import Tensor
from flambeau.autograd._node import Node, edge_of, set_output_nr
from flambeau.autograd._node import next_sequence as _next_sequence
from flambeau.autograd._saved import FREED_MESSAGE, SavedTensor

__all__ = ["Derivative", "OpNode", "reduce_grad", "parse_signature"]

_MISSING = object()
_NOTHING_SAVED: dict = {}
_new = object.__new__


def parse_signature(signature: str):
    """``(positional names, {name: kind})`` of a schema; kind is 'Tensor', 'Tensor[]' or another type."""
    start = signature.index("(") + 1
    depth, parts, current = 1, [], []
    for ch in signature[start:]:  # split the argument list at top-level commas, up to its closing paren
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                break
        if ch == "," and depth == 1:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    names, kinds = [], {}
    keyword_only = False
    for part in filter(None, (p.strip() for p in parts)):
        if part == "*":
            keyword_only = True
            continue
        decl = part.split("=", 1)[0].strip()
        kind, _, name = decl.rpartition(" ")
        kind = re.sub(r"\([^)]*\)", "", kind).rstrip("?")  # drop alias annotations: Tensor(a!) -> Tensor
        if name == "self":
            name = "input"  # formulas call the first tensor argument `input`, as the Python API does
        kinds[name] = kind
        if not keyword_only:
            names.append(name)
    return tuple(names), kinds


class Derivative:
    """The derivative of one operator: saved values and one formula per differentiable input.

    Args:
        formulas: ``{input_name: f(grad, s)}``; inputs without a formula get no gradient (an error is
            raised if such an input requires grad and ``strict``).
        save: names of the inputs (or ``"result"``, ``"result0"``, ``"result1"`` ...) backward needs.
        outputs: number of outputs the operator returns as a tuple (0: a single tensor).
        joint: ``f(grad, s, need) -> {input_name: gradient}`` or None: every wanted input's gradient (``need``:
            the names of the inputs whose gradient is wanted) from one call (Note [Shared backward calls]),
            or None where the per-input formulas are to run; those may then be None for inputs whose joint
            always answers.
    """

    __slots__ = ("op_name", "formulas", "save", "outputs", "node_class", "pos_names", "tensor_args", "kinds",
                 "formula_items", "pos_index", "list_args", "save_plan", "joint")

    def __init__(self, formulas: dict, save: tuple = (), outputs: int = 0, joint=None):
        self.formulas = formulas
        self.save = tuple(save)
        self.outputs = outputs
        self.joint = joint
        self.op_name = None
        self.node_class = None

    def bind(self, op) -> None:
        """Attach to the operator declaration ``op`` (an OpDef): resolve argument names and kinds."""
        self.op_name = op.name
        self.pos_names, self.kinds = parse_signature(op.signature)
        unknown = [n for n in self.formulas if n not in self.kinds]
        if unknown:
            raise ValueError(f"derivative of {op.name} has formulas for unknown arguments {unknown} "
                             f"(signature: {op.signature})")
        self.tensor_args = tuple(n for n, k in self.kinds.items() if k in ("Tensor", "Tensor[]"))
        self.formula_items = tuple(self.formulas.items())
        self.pos_index = {n: i for i, n in enumerate(self.pos_names)}
        self.list_args = frozenset(n for n, k in self.kinds.items() if k == "Tensor[]")
        # (name, output index or None, input position or None): decided once, not per recorded call.
        self.save_plan = tuple(
            (name, int(name[6:] or 0), None) if name.startswith("result") else (name, None, self.pos_index.get(name))
            for name in self.save)
        camel = "".join(p.capitalize() for p in op.name.strip("_").split("_"))
        self.node_class = type(f"{camel}Backward0", (OpNode,), {"__slots__": (), "_deriv": self})


def reduce_grad(g: Tensor, shape: tuple, dtype, device=None) -> Tensor:
    """``g`` summed over broadcast dimensions down to ``shape``, cast to ``dtype`` and moved to ``device``.

    This is the one place where broadcasting is undone.
    """
    gshape = g._data.shape
    if gshape != shape:
        lead = len(gshape) - len(shape)
        if lead < 0:  # an input with leading dims of one that its operator dropped (``t[0] = v`` of a (1,) ``v``)
            g = g.reshape((1,) * -lead + tuple(gshape))
            gshape, lead = g._data.shape, 0
        dims = list(range(lead))
        dims += [lead + i for i, n in enumerate(shape) if n == 1 and gshape[lead + i] != 1]
        if dims:
            g = g.sum(dim=tuple(dims), keepdim=True)
        if lead:
            g = g.reshape(shape)
        elif g._data.shape != shape:
            g = g.reshape(shape)
    if g.dtype is not dtype or (device is not None and g._device is not device):
        g = g.to(dtype=dtype, device=device)
    return g


_get = object.__getattribute__
_OWN = frozenset({"_node", "get"})  # _Values' own attributes (besides dunders): never a formula's value
_META = frozenset({"shape", "dtype", "device"})  # the suffixes of an input's recorded metadata (``input_shape``)


class _Values:
    """What formulas see as ``s``: saved tensors, non-tensor arguments and input shapes by name.

    Formulas read a handful of names per call, so the names are looked up by ``__getattribute__``
    itself: a ``__getattr__`` would run only after the class's own lookup failed (an AttributeError
    raised and caught per read, three times the cost)."""

    __slots__ = ("_node",)

    def __init__(self, node):
        self._node = node

    def get(self, name: str, default=None):
        """``name`` if the operator received it (or saved it), else ``default`` (an optional argument not given,
        ``alpha`` say: no AttributeError raised and caught)."""
        v = _lookup(_get(self, "_node"), name)
        return default if v is _MISSING else v

    def __getattribute__(self, name):
        if name in _OWN or name[:2] == "__":
            return _get(self, name)
        node = _get(self, "_node")
        v = _lookup(node, name)
        if v is _MISSING:
            raise AttributeError(f"the derivative of {node._deriv.op_name} uses {name!r}, which it does not save")
        return v


def _lookup(node, name: str):
    """What a formula's ``s.name`` reads of ``node``: a non-tensor argument, a saved tensor unpacked, or an input's
    recorded ``_shape`` / ``_dtype`` / ``_device``; ``_MISSING`` where the node has none of them (RuntimeError
    once its saved tensors were released)."""
    v = node._values.get(name, _MISSING)
    if v is not _MISSING:
        return v
    saved = node._saved.get(name)
    if saved is not None:
        return saved.unpack(node)
    if node._released:
        raise RuntimeError(FREED_MESSAGE)
    base, _, what = name.rpartition("_")
    if what in _META:
        meta = node._metas.get(base)
        if meta is not None:
            i = ("shape", "dtype", "device").index(what)
            return meta[i] if not isinstance(meta, list) else [m[i] for m in meta]
    return _MISSING


def wanted(node) -> set:
    """Names of the inputs of ``node`` whose gradient is wanted (their edge, or one of a list's, leads somewhere)."""
    metas, edges = node._metas, node.next_functions
    need, k = set(), 0
    for name, _ in node._deriv.formula_items:
        meta = metas.get(name)
        if meta is None:
            continue
        n = len(meta) if meta.__class__ is list else 1
        if n == 1:  # (a tensor: a generator over a slice would take this function four times as long)
            if edges[k][0] is not None:
                need.add(name)
        elif any(e[0] is not None for e in edges[k:k + n]):
            need.add(name)
        k += n
    return need


class OpNode(Node):
    """The node of an operator of the operator table; its class is made per operator (``MulBackward0``)."""

    __slots__ = ("_saved", "_values", "_metas", "_out_metas")
    _deriv: Derivative

    @classmethod
    def create(cls, deriv: Derivative, inputs: tuple, attrs: dict, outputs):
        """Build the node of one operator call and attach it to ``outputs`` (the hot path of recording)."""
        # The fields of Node.__init__, set here without the call: this is the hottest path of recording.
        node = _new(deriv.node_class)
        node._sequence_nr = _next_sequence()
        node._pre_hooks = node._post_hooks = node._tensor_hooks = node._trace = node._metadata = None
        node._released = False
        pos_names = deriv.pos_names
        n = len(inputs)
        values = {}
        list_args = deriv.list_args
        for i in range(min(n, len(pos_names))):
            x = inputs[i]
            if not isinstance(x, Tensor) and pos_names[i] not in list_args:
                values[pos_names[i]] = x  # non-tensor arguments, index keys among them
        if attrs:
            for k, v in attrs.items():
                if k != "inplace":
                    values[k] = v  # keyword arguments, tensors among them (e.g. dropout's mask), by name
        pos_index = deriv.pos_index
        edges, metas = [], {}
        # Edges follow the order of the formulas, which is the order apply() returns gradients in.
        for name, _formula in deriv.formula_items:
            i = pos_index.get(name)
            value = inputs[i] if i is not None and i < n else (attrs.get(name) if attrs else None)
            if isinstance(value, Tensor):
                metas[name] = (value._data.shape, value.dtype, value._device)
                if not value._requires_grad:
                    edges.append((None, 0))
                elif value.grad_fn is not None:  # edge_of, inlined for the common non-leaf case
                    meta = value._autograd_meta
                    edges.append((value.grad_fn, 0 if meta is None else meta.output_nr))
                else:
                    edges.append(edge_of(value))
            elif name in deriv.list_args and isinstance(value, (list, tuple)):
                metas[name] = [(x._data.shape, x.dtype, x._device) for x in value]
                edges.extend(edge_of(x) if x._requires_grad else (None, 0) for x in value)
        node.next_functions = tuple(edges)
        node._metas = metas
        node._values = values
        saved = {}
        single = isinstance(outputs, Tensor)
        for name, out_index, i in deriv.save_plan:
            if out_index is not None:
                saved[name] = SavedTensor(outputs if single else outputs[out_index], node, True)
                if not single:  # saved before the outputs are numbered (below): say which one it is
                    saved[name]._output_nr = out_index
                continue
            x = inputs[i] if i is not None and i < n else (attrs.get(name) if attrs else None)
            if isinstance(x, Tensor):
                saved[name] = SavedTensor(x, node, False)
            elif isinstance(x, (list, tuple)):
                values[name] = x  # lists of tensors are kept as they are
        node._saved = saved
        # Outputs point to the node; multi-output ops mark which output each tensor is.
        if single:
            node._nout = 1
            node._out_metas = None
            outputs.grad_fn = node
            outputs._requires_grad = True
        else:
            node._nout = len(outputs)
            node._out_metas = metas_out = []
            for i, out in enumerate(outputs):
                metas_out.append((out._data.shape, out.dtype, out._device))
                if out.dtype.is_differentiable:
                    out.grad_fn = node
                    out._requires_grad = True
                    if i:
                        set_output_nr(out, i)
        return node

    def apply(self, grads: list) -> tuple:
        deriv = self._deriv
        out_metas = self._out_metas
        if out_metas is not None:
            g = tuple(grads[i] if i < len(grads) and grads[i] is not None
                      else fl.zeros(m[0], dtype=m[1], device=m[2]) for i, m in enumerate(out_metas))
        else:
            g = grads[0]
        s = _Values(self)
        metas = self._metas
        edges = self.next_functions
        joint = deriv.joint
        shared = None if joint is None else joint(g, s, wanted(self))
        result = []
        k = 0  # index into edges: one per tensor, one per element of a tensor list
        for name, formula in deriv.formula_items:
            meta = metas.get(name)
            if meta is None:
                continue
            if meta.__class__ is list:
                n = len(meta)
                if all(e[0] is None for e in edges[k:k + n]):  # no element requires grad: skip the formula
                    result.extend([None] * n)
                else:
                    gs = formula(g, s) if shared is None else shared[name]
                    result.extend(None if gi is None or e[0] is None else reduce_grad(gi, m[0], m[1], m[2])
                                  for gi, m, e in zip(gs, meta, edges[k:k + n]))
                k += n
                continue
            if edges[k][0] is None:  # this input does not require grad: skip the formula
                result.append(None)
                k += 1
                continue
            k += 1
            gi = formula(g, s) if shared is None else shared.get(name)
            if gi is not None and (gi._data.shape != meta[0] or gi.dtype is not meta[1] or gi._device is not meta[2]):
                gi = reduce_grad(gi, meta[0], meta[1], meta[2])
            result.append(gi)
        return tuple(result)

    def release(self) -> None:
        self._released = True
        self._saved = _NOTHING_SAVED  # the SavedTensors, and the tensors they hold, go with the dict

    @property
    def _saved_tensors(self):
        return tuple(self._saved.values())
