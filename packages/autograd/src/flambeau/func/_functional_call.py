"""``functional_call``: call a module with other tensors in place of its parameters and buffers.

As ``torch.func.functional_call``: the module's ``_parameters`` / ``_buffers`` entries named in the
dicts are swapped for the given tensors for the duration of the call and put back afterwards, so
``grad``/``vmap`` can treat a model as a function of its weights (per-example gradients,
ensembles). Any module with torch's ``named_parameters``/``named_buffers``/``_parameters``/
``_buffers`` API works; flambeau-autograd does not import flambeau.nn.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from flambeau import Tensor

__all__ = ["functional_call"]

_MISSING = object()


def _submodule(module, path: str):
    for part in path.split(".") if path else ():
        sub = module._modules.get(part) if hasattr(module, "_modules") else None
        if sub is None:
            raise AttributeError(f"{type(module).__name__} has no attribute `{part}`")
        module = sub
    return module


def _swap(module, name: str, value):
    """Put ``value`` (or _MISSING: remove) at ``module.<name>``; return what was there (_MISSING if nothing)."""
    prefix, _, attr = name.rpartition(".")
    owner = _submodule(module, prefix)
    if value is not _MISSING and value is not None and not isinstance(value, Tensor):
        raise TypeError(f"{value} is not an instance of flambeau.Tensor")
    for table in (owner._parameters, owner._buffers):
        if attr in table:
            old = table[attr]
            if value is _MISSING:
                del table[attr]
            else:
                table[attr] = value
            return old
    old = owner.__dict__.get(attr, _MISSING)
    if value is _MISSING:
        owner.__dict__.pop(attr, None)
    else:
        # neither a parameter nor a buffer: a plain attribute, as torch sets it
        object.__setattr__(owner, attr, value)
    return old


def _untie(module, values: dict) -> dict:
    """``values`` with every name tied to a given name (the same tensor in the module) given the same value."""
    named: dict = {}
    for name, t in module.named_parameters(remove_duplicate=False):
        named[name] = t
    for name, t in module.named_buffers(remove_duplicate=False):
        named[name] = t
    groups: dict = {}
    for name, t in named.items():
        groups.setdefault(id(t), set()).add(name)
    tied = {name: names for names in groups.values() if len(names) > 1 for name in names}
    out = dict(values)
    for name in values:
        names = tied.get(name)
        if names is None:
            continue
        given = [n for n in names if n in values]
        if len(given) > 1 and len({id(values[n]) for n in given}) != 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, which are tied. "
                             "Consider using tie_weights=False")
        for n in names:
            out[n] = values[name]
    return out


@contextlib.contextmanager
def _reparametrize(module, values: dict, tie_weights: bool, strict: bool):
    if tie_weights:
        values = _untie(module, values)
    if strict:
        expected = {n for n, _ in module.named_parameters(remove_duplicate=False)}
        expected |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing = sorted(expected - values.keys())
        unexpected = sorted(values.keys() - expected)
        errors = []
        if unexpected:
            errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if errors:
            raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(type(module).__name__,
                                                                                 "\n\t".join(errors)))
    originals = []
    try:
        for name, value in values.items():
            originals.append((name, _swap(module, name, value)))
        yield
    finally:
        for name, old in reversed(originals):
            _swap(module, name, old)


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """Call ``module`` with the tensors of ``parameter_and_buffer_dicts`` as its parameters and buffers.

    Args:
        module: the module (any object with torch's Module API).
        parameter_and_buffer_dicts: ``{name: tensor}`` (names as ``named_parameters`` gives them, e.g.
            ``'0.weight'``), or a sequence of such dicts with no name twice. Names not given keep the
            module's own tensors.
        args: a single argument or a tuple of positional arguments for the call.
        kwargs: keyword arguments for the call.
        tie_weights: parameters the module shares under several names (tied weights) take the value
            given for any of those names; giving different values for them raises ValueError.
        strict: the dicts must name exactly the module's parameters and buffers (RuntimeError
            naming the missing and unexpected keys otherwise).

    Returns:
        Whatever ``module(*args, **kwargs)`` returns.

    Example::

        >>> params = {k: v.detach() for k, v in model.named_parameters()}
        >>> out = functional_call(model, params, (x,))
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        values = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        counts: dict = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is "
                             "ambiguous")
        values = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                         f"{type(parameter_and_buffer_dicts)}")
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize(module, values, tie_weights, strict):
        return module(*args, **kwargs)
