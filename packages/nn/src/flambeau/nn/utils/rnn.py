"""Sequence helpers (``torch.nn.utils.rnn``): padding and packing variable-length sequences.

:func:`pad_sequence` / :func:`unpad_sequence` convert between a list of sequences and one padded
tensor; :class:`PackedSequence` with :func:`pack_padded_sequence`, :func:`pad_packed_sequence`,
:func:`pack_sequence` and :func:`unpack_sequence` hold the same data packed time step by time step
(the layout torch's recurrent layers accept). Everything is differentiable.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import flambeau as fl
from flambeau import Tensor

__all__ = ["pad_sequence", "unpad_sequence", "PackedSequence", "pack_padded_sequence", "pad_packed_sequence",
           "pack_sequence", "unpack_sequence"]


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack variable-length sequences ``(L_i, *)`` into one padded tensor (differentiable).

    Args:
        sequences: a list (or tuple) of tensors with equal trailing dimensions.
        batch_first: return ``(B, T, *)`` instead of ``(T, B, *)``, ``T = max L_i``.
        padding_value: the value of padded elements.
        padding_side: ``"right"`` (pad after each sequence) or ``"left"``.

    Returns:
        ``(T, B, *)`` or ``(B, T, *)``, the dtype of the inputs.
    """
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    trailing = tuple(sequences[0].shape[1:])
    for s in sequences:
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"The size of trailing dimensions must match: got {tuple(s.shape[1:])} and {trailing}")
    max_len = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        n = max_len - s.shape[0]
        if n:
            pad = fl.full((n, *trailing), padding_value, dtype=s.dtype, device=s.device)
            s = fl.cat([s, pad] if padding_side == "right" else [pad, s])
        rows.append(s)
    return fl.stack(rows, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor, batch_first: bool = False) -> list:
    """Split a padded batch back into the list of its sequences of ``lengths`` (right padding)."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    lens = lengths.tolist() if isinstance(lengths, Tensor) else list(lengths)
    return [padded_sequences[i, :int(n)] for i, n in enumerate(lens)]


class PackedSequence(NamedTuple):
    """Sequences of a batch packed time step by time step.

    Attributes:
        data: ``(sum of lengths, *)``: the elements of time step 0 of every sequence (longest
            first), then of time step 1 of the sequences that long, and so on.
        batch_sizes: int64 ``(max length,)``: how many sequences each time step holds.
        sorted_indices: int64 ``(B,)``: the batch order used (longest first), or None.
        unsorted_indices: the inverse permutation of ``sorted_indices``, or None.
    """

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args, **kwargs) -> PackedSequence:
        """``data.to(...)`` in a new PackedSequence (index tensors unchanged)."""
        return self._replace(data=self.data.to(*args, **kwargs))

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def _invert_permutation(perm: Tensor | None) -> Tensor | None:
    if perm is None:
        return None
    p = perm.numpy(force=True)
    inv = np.empty_like(p)
    inv[p] = np.arange(p.size, dtype=p.dtype)
    return fl.from_numpy(inv)


def _lengths_np(lengths) -> np.ndarray:
    if isinstance(lengths, Tensor):
        return lengths.numpy(force=True).astype(np.int64).reshape(-1)
    return np.asarray(lengths, dtype=np.int64).reshape(-1)


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch ``(T, B, *)`` (or ``(B, T, *)``) of sequences of the given ``lengths``.

    Args:
        input: the padded batch.
        lengths: the length of each sequence (a list or a 1-D CPU int64 tensor).
        batch_first: ``input`` is ``(B, T, *)``.
        enforce_sorted: require ``lengths`` sorted in decreasing order; otherwise the batch is
            sorted here and the permutation kept in the result.

    Returns:
        A :class:`PackedSequence`.
    """
    lens = _lengths_np(lengths)
    if enforce_sorted:
        if np.any(lens[:-1] < lens[1:]):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
        sorted_indices = None
        order = np.arange(lens.size)
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_indices = fl.from_numpy(order.astype(np.int64))
        lens = lens[order]
    if lens.size and lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if batch_first:
        input = input.transpose(0, 1)
    if lens.size and lens[0] > input.shape[0]:
        raise RuntimeError(f"Expected sequence length to be at most {input.shape[0]}, but got {lens[0]}")
    steps = int(lens[0]) if lens.size else 0
    batch_sizes = np.array([(lens > t).sum() for t in range(steps)], dtype=np.int64)
    # gather (t, b) positions in packed order: for each time step, the first batch_sizes[t] sorted sequences
    t_idx = np.repeat(np.arange(steps), batch_sizes)
    b_idx = np.concatenate([order[:n] for n in batch_sizes]) if steps else np.zeros(0, np.int64)
    dev = input.device
    data = input[fl.from_numpy(t_idx).to(dev), fl.from_numpy(b_idx.astype(np.int64)).to(dev)]
    return PackedSequence(data, fl.from_numpy(batch_sizes), sorted_indices, _invert_permutation(sorted_indices))


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Unpack a :class:`PackedSequence` into a padded batch (the inverse of :func:`pack_padded_sequence`).

    Args:
        sequence: the packed batch.
        batch_first: return ``(B, T, *)`` instead of ``(T, B, *)``.
        padding_value: the value of padded elements.
        total_length: pad to this many time steps (at least the longest sequence).

    Returns:
        ``(padded, lengths)``: the padded batch in the original order and the int64 lengths.
    """
    data, batch_sizes = sequence.data, sequence.batch_sizes.numpy(force=True).astype(np.int64)
    steps = batch_sizes.size
    nb = int(batch_sizes[0]) if steps else 0
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
        steps_out = total_length
    else:
        steps_out = steps
    lens_sorted = np.array([(batch_sizes > b).sum() for b in range(nb)], dtype=np.int64)
    trailing = tuple(data.shape[1:])
    out = fl.full((steps_out * nb, *trailing), padding_value, dtype=data.dtype, device=data.device)
    t_idx = np.repeat(np.arange(steps), batch_sizes)
    b_idx = np.concatenate([np.arange(n) for n in batch_sizes]) if steps else np.zeros(0, np.int64)
    flat = fl.from_numpy((t_idx * nb + b_idx).astype(np.int64)).to(data.device)
    out = out.index_copy(0, flat, data).reshape(steps_out, nb, *trailing)
    lengths = lens_sorted
    if sequence.unsorted_indices is not None:
        un = sequence.unsorted_indices
        out = out.index_select(1, un.to(data.device))
        lengths = lens_sorted[un.numpy(force=True)]
    if batch_first:
        out = out.transpose(0, 1)
    return out, fl.from_numpy(np.ascontiguousarray(lengths))


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences ``(L_i, *)`` (``pad_sequence`` then ``pack_padded_sequence``)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of sequences held by a :class:`PackedSequence` (inverse of :func:`pack_sequence`)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
