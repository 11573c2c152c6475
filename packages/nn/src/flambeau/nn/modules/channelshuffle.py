""":class:`ChannelShuffle` (as ``torch.nn``)."""

from __future__ import annotations

from flambeau import Tensor
from flambeau.nn._functional.basic_more import channel_shuffle
from flambeau.nn.modules.module import Module

__all__ = ["ChannelShuffle"]


class ChannelShuffle(Module):
    """Shuffle the channels of ``(N, C, *)`` in ``groups`` (ShuffleNet): ``C`` viewed as ``(g, C / g)``, transposed.

    Args:
        groups: the number of groups; must divide ``C``.
    """

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        """Shuffle ``input``'s channels."""
        return channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
