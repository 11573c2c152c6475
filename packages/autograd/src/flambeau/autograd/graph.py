"""Graph utilities: ``saved_tensors_hooks`` (pack/unpack saved tensors), ``queue_callback`` and ``Node``.

``saved_tensors_hooks(pack, unpack)`` installs hooks called when a node saves a tensor for
backward (``pack(tensor) -> anything``) and when backward needs it back
(``unpack(packed) -> Tensor``): e.g. to offload saved activations to the CPU or to disk.

``queue_callback(cb)``, called during a backward pass (from a hook), runs ``cb()`` once that pass
ends: torch's ``Variable._execution_engine.queue_callback``, which DDP-like code uses to wait for
communication launched from gradient hooks.
"""

from __future__ import annotations

import threading

__all__ = ["saved_tensors_hooks", "save_on_cpu", "queue_callback", "Node"]  # noqa: F822 - Node comes from __getattr__


class _HookState(threading.local):
    stack: list

    def __init__(self):
        self.stack = []


_state = _HookState()


def _current_hooks():
    """The innermost (pack, unpack) pair, or None."""
    stack = _state.stack
    return stack[-1] if stack else None


class saved_tensors_hooks:
    """Context manager installing a pack/unpack hook pair for tensors saved for backward.

    Args:
        pack_hook: ``pack_hook(tensor) -> object`` called when an operator saves ``tensor``.
        unpack_hook: ``unpack_hook(object) -> Tensor`` called when backward needs it; must return a
            tensor with the same value as the one packed.
    """

    def __init__(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("saved_tensors_hooks: pack_hook and unpack_hook must be callable")
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        _state.stack.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        _state.stack.pop()
        return False


class save_on_cpu(saved_tensors_hooks):
    """Keep tensors saved for backward on the CPU, moving them back to their device when needed."""

    def __init__(self, pin_memory: bool = False):
        def pack(t):
            return (t.device, t.cpu() if t.device.type != "cpu" else t)

        def unpack(packed):
            device, t = packed
            return t.to(device)

        super().__init__(pack, unpack)


class _CallbackState(threading.local):
    """Per thread: one list of queued end-of-backward callbacks per backward pass running (reentrant:
    nested); the engine pushes a list when a pass starts and runs it when the pass ends."""

    stack: list

    def __init__(self):
        self.stack = []


_callbacks = _CallbackState()


def queue_callback(callback) -> None:
    """Run ``callback()`` once the backward pass now running ends (torch's ``_execution_engine.queue_callback``).

    Call it from a hook or a node during backward (else RuntimeError). Callbacks run in the order they
    were queued, in the thread running the pass, after its last node (every ``.grad`` accumulated), with
    grad mode set as in the pass (on only with ``create_graph``); then they are forgotten. A reentrant
    backward (started inside a hook) runs its own callbacks when it ends. If the pass raises, its
    callbacks do not run.
    """
    stack = _callbacks.stack
    if not stack:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    stack[-1].append(callback)


def __getattr__(name):
    if name == "Node":
        from flambeau.autograd._node import Node

        return Node
    raise AttributeError(name)
