""":class:`AdaptiveLogSoftmaxWithLoss` (Grave et al., 2016, "Efficient softmax approximation for GPUs")."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.nn._functional.activation import log_softmax
from flambeau.nn.modules.container import ModuleList, Sequential
from flambeau.nn.modules.linear import Linear
from flambeau.nn.modules.module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax: frequent classes in a head, rarer ones in clusters of smaller projections.

    Args:
        in_features: features of the input.
        n_classes: the number of classes.
        cutoffs: increasing ints in ``[1, n_classes - 1]``: the class ranges of the clusters.
        div_value: each cluster's hidden size is ``in_features // div_value ** (i + 1)``.
        head_bias: give the head a bias.
        device, dtype: of the parameters.

    ``forward(input, target)`` returns ``(output, loss)``: the target log-probabilities ``(N,)`` and
    their negated mean. ``log_prob(input)`` gives all ``(N, n_classes)`` log-probabilities and
    ``predict(input)`` the most likely classes. The parameters are created as torch's (same
    names, shapes and initialisation).
    """

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0, head_bias: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, device=device, dtype=dtype),
                                        Linear(hidden, size, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self) -> None:
        """Redraw the head and the clusters' projections."""
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        """``(output, loss)``: the log-probabilities of ``target_`` ``(N,)`` (or ``()``) and ``-output.mean()``."""
        if target_.ndim == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.ndim != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size "
                                   f"{input_.shape}")
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size "
                                   f"{input_.shape}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.ndim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        labels = target.detach().cpu().numpy().astype(np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= self.n_classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{labels.min()}, {labels.max()}] were found. ")
        head_index = np.minimum(labels, self.shortlist_size)  # placeholder for the cluster rows, set below
        output = input.new_zeros(target.shape[0])
        bounds = [0] + self.cutoffs
        for i in range(1, len(bounds) - 1):
            rows = np.nonzero((labels >= bounds[i]) & (labels < bounds[i + 1]))[0]
            if rows.size == 0:
                continue
            head_index[rows] = self.shortlist_size + i - 1
            row_t = fl.from_numpy(rows).to(input.device)
            relative = fl.from_numpy(labels[rows] - bounds[i]).to(input.device)
            logprob = log_softmax(self.tail[i - 1](input.index_select(0, row_t)), dim=1)
            output = output.index_copy(0, row_t, logprob.gather(1, relative.unsqueeze(1)).squeeze(1))
        head_logprob = log_softmax(self.head(input), dim=1)
        head_t = fl.from_numpy(head_index).to(input.device)
        output = output + head_logprob.gather(1, head_t.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head_logprob = log_softmax(head_output, dim=1)
        parts = [head_logprob.narrow(1, 0, self.shortlist_size)]
        for i in range(self.n_clusters):
            cluster = log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster + head_logprob.narrow(1, self.shortlist_size + i, 1))
        return fl.cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """The log-probabilities of every class, ``(N, n_classes)``."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input: Tensor) -> Tensor:
        """The most likely class of each row of ``input`` ``(N, in_features)``: int64 ``(N,)``."""
        head_output = self.head(input)
        output = head_output.argmax(1)
        outside = output >= self.shortlist_size
        if not bool(outside.any()):
            return output
        return fl.where(outside, self.log_prob(input).argmax(1), output)
