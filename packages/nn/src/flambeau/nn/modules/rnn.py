"""Recurrent layers: :class:`RNN`, :class:`LSTM`, :class:`GRU` and their cells (as ``torch.nn``).

A multi-layer module runs one fused operator per layer and direction over the whole sequence
(``flambeau._lstm_layer`` ...: one input-projection GEMM, then one recurrent GEMM and one fused
gate pass per step), so autograd records one node per layer and direction. A
:class:`~flambeau.nn.utils.rnn.PackedSequence` input runs one such call per run of equal batch sizes
(Note [Packed sequences through the fused layers]) and gives a PackedSequence output. An LSTM with
``proj_size > 0`` has no fused operator: its layers run :func:`_lstm_projected_layer`, a composite
of tensor operators per step. Parameter names, shapes, gate order and initialisation are torch's, so
state_dicts are interchangeable.
"""

from __future__ import annotations

import math
import numbers
import warnings

import flambeau as fl
from flambeau import Tensor
from flambeau.nn import init
from flambeau.nn._functional.basic import dropout as _dropout
from flambeau.nn._functional.basic import linear as _linear
from flambeau.nn.modules.module import Module
from flambeau.nn.parameter import Parameter
from flambeau.nn.utils.rnn import PackedSequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


class RNNBase(Module):
    """Base class of :class:`RNN`, :class:`LSTM` and :class:`GRU` (parameters and checks).

    Args:
        mode: ``'LSTM'``, ``'GRU'``, ``'RNN_TANH'`` or ``'RNN_RELU'``.
        input_size: features of each input step.
        hidden_size: features of the hidden state.
        num_layers: stacked layers.
        bias: whether the layers have ``bias_ih``/``bias_hh``.
        batch_first: input and output are ``(N, L, *)`` instead of ``(L, N, *)``.
        dropout: dropout probability on the outputs of every layer but the last (training only).
        bidirectional: run each layer in both directions and concatenate the outputs.
        proj_size: LSTM only: if > 0, the hidden state is projected to this size by ``weight_hr_l{k}``
            (``(proj_size, hidden_size)``); the output and ``h_n`` then have ``proj_size`` features.
        device: device of the parameters.
        dtype: dtype of the parameters.
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        if (not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool)):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          stacklevel=2)
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        gate_size = _GATES[mode] * hidden_size
        num_directions = 2 if bidirectional else 1
        real_hidden_size = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden_size * num_directions
                suffix = "_reverse" if direction == 1 else ""
                names = [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}"]
                shapes = [(gate_size, layer_input), (gate_size, real_hidden_size)]
                if bias:
                    names += [f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
                    shapes += [(gate_size,), (gate_size,)]
                if proj_size > 0:
                    names.append(f"weight_hr_l{layer}{suffix}")
                    shapes.append((proj_size, hidden_size))
                for name, shape in zip(names, shapes):
                    setattr(self, name, Parameter(fl.empty(shape, device=device, dtype=dtype)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def all_weights(self) -> list:
        """The parameters of every layer and direction, as lists ``[w_ih, w_hh, b_ih, b_hh(, w_hr)]``."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, n) for n in self._flat_weights_names]

    def flatten_parameters(self) -> None:
        """No-op (kept for torch compatibility: flambeau keeps no flattened weight buffer)."""

    def reset_parameters(self) -> None:
        """Draw every weight and bias from ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # --- forward machinery ----------------------------------------------------------------------------
    def _check_input(self, input: Tensor) -> None:
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")

    def _check_hidden(self, hx: Tensor, expected: tuple, msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(hx.shape) != expected:
            raise RuntimeError(msg.format(expected, list(hx.shape)))

    def _prepare(self, input: Tensor, hxs, n_states: int):
        """``(x (T, B, I), states [(D * L, B, H) ...], batched)`` with zero states where none were given."""
        self._check_input(input)
        batched = input.ndim == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        nd = 2 if self.bidirectional else 1
        bsz = input.shape[1]
        # h has proj_size features when the LSTM projects, c always hidden_size
        sizes = [self.proj_size or self.hidden_size, self.hidden_size][:n_states]
        expected = [(self.num_layers * nd, bsz, size) for size in sizes]
        if hxs is None:
            return input, [fl.zeros(e, dtype=input.dtype, device=input.device) for e in expected], batched
        hxs = list(hxs)
        for i, h in enumerate(hxs):
            if batched and h.ndim != 3:
                raise RuntimeError(self._hidden_dim_message(batched, hxs))
            if not batched:
                if h.ndim != 2:
                    raise RuntimeError(self._hidden_dim_message(batched, hxs))
                hxs[i] = h.unsqueeze(1)
            self._check_hidden(hxs[i], expected[i], _hidden_size_message(i, n_states))
        return input, hxs, batched

    def _hidden_dim_message(self, batched: bool, hxs) -> str:
        want = 3 if batched else 2
        kind = "batched 3-D" if batched else "unbatched 2-D"
        if len(hxs) == 2:
            return (f"For {kind} input, hx and cx should also be {want}-D but got ({hxs[0].ndim}-D, "
                    f"{hxs[1].ndim}-D) tensors")
        return f"For {kind} input, hx should also be {want}-D but got {hxs[0].ndim}-D tensor"

    def _run_layers(self, x: Tensor, states: list, direction=None):
        """Every layer and direction over ``x``: ``(output, [final states per kind, stacked])``. ``direction(x,
        states, weights, reverse) -> (output, [final state per kind])`` runs one layer in one direction (default
        :meth:`_whole_direction`)."""
        direction = self._whole_direction if direction is None else direction
        nd = 2 if self.bidirectional else 1
        finals = [[] for _ in states]
        states = [s.unbind(0) for s in states]  # one view per layer and direction (backward: a stack)
        for layer in range(self.num_layers):
            outs = []
            for d in range(nd):
                idx = layer * nd + d
                ws = [getattr(self, n) for n in self._all_weights[idx]]
                if not self.bias:
                    ws[2:2] = [None, None]
                out, last = direction(x, [s[idx] for s in states], ws, d == 1)
                outs.append(out)
                for f, r in zip(finals, last):
                    f.append(r)
            x = outs[0] if nd == 1 else fl.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = _dropout(x, self.dropout, True)
        return x, [fl.stack(f, 0) for f in finals]

    def _whole_direction(self, x, states, ws, reverse):
        res = self._layer(x, states, ws, reverse)
        return res[0], res[1:]

    def _layer(self, x, states, ws, reverse):
        raise NotImplementedError

    def _finish(self, out: Tensor, finals: list, batched: bool):
        if not batched:
            return out.squeeze(1), [f.squeeze(1) for f in finals]
        if self.batch_first:
            out = out.transpose(0, 1)
        return out, finals

    def _run(self, input: Tensor, hxs, n_states: int):
        """Check, run all the layers and reshape back: ``(output, [final state per kind])``."""
        if isinstance(input, PackedSequence):
            return self._run_packed(input, hxs, n_states)
        x, states, batched = self._prepare(input, hxs, n_states)
        out, finals = self._run_layers(x, states)
        return self._finish(out, finals, batched)

    # Note [Packed sequences through the fused layers]
    #     A PackedSequence holds time step 0 of every sequence (longest first), then step 1 of those that long,
    #     and so on: step t has ``batch_sizes[t]`` rows, the first ones of the batch. Its steps fall into runs of
    #     equal batch size (one per distinct length), and within a run the data is a ``(steps, rows, features)``
    #     block, which the fused layer operators take as they are: each run is one layer call on the batch's
    #     first ``rows`` rows, started from their states at the end of the previous run, while the rows already
    #     finished keep theirs. The reverse direction walks the runs from the last one back, each row starting
    #     from its initial state at its own last step (a row joins when the runs reach its length). Each
    #     sequence is processed exactly to its length, as torch's packed layers do (no padding enters a state),
    #     with one layer call per run rather than per step.
    def _run_packed(self, packed, hxs, n_states: int):
        """``(PackedSequence output, [final state per kind])`` of a packed input (Note [Packed sequences through
        the fused layers]): states ``(D * L, B, H)`` in the caller's batch order, as torch's."""
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        if data.ndim != 2:
            raise ValueError(f"{type(self).__name__}: Expected packed input data to be 2D, got {data.ndim}D instead")
        if data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {data.shape[-1]}")
        sizes = [int(b) for b in batch_sizes.tolist()]
        bsz = sizes[0] if sizes else 0
        nd = 2 if self.bidirectional else 1
        expected = [(self.num_layers * nd, bsz, size) for size in [self.proj_size or self.hidden_size,
                                                                   self.hidden_size][:n_states]]
        if hxs is None:
            states = [fl.zeros(e, dtype=data.dtype, device=data.device) for e in expected]
        else:
            states = list(hxs)
            for i, h in enumerate(states):
                self._check_hidden(h, expected[i], _hidden_size_message(i, n_states))
                if sorted_indices is not None:  # the caller's batch order -> the packed (longest first) order
                    states[i] = h.index_select(1, sorted_indices.to(h.device))
        runs, offset, t = [], 0, 0
        while t < len(sizes):  # (offset, steps, rows) of each run of equal batch sizes
            start = t
            while t < len(sizes) and sizes[t] == sizes[start]:
                t += 1
            runs.append((offset, t - start, sizes[start]))
            offset += (t - start) * sizes[start]
        x, finals = self._run_layers(data, states, lambda x, st, ws, rev: self._packed_direction(x, runs, st, ws, rev))
        if unsorted_indices is not None:  # back to the caller's batch order
            finals = [f.index_select(1, unsorted_indices.to(f.device)) for f in finals]
        return PackedSequence(x, batch_sizes, sorted_indices, unsorted_indices), finals

    def _packed_direction(self, x: Tensor, runs: list, states: list, ws, reverse: bool):
        """One layer and direction over packed data ``x`` ``(sum of lengths, features)`` in its ``runs``:
        ``(output data, [final state per kind (B, H)])``."""
        bsz = states[0].shape[0]
        outs = [None] * len(runs)
        for k in (range(len(runs) - 1, -1, -1) if reverse else range(len(runs))):
            offset, steps, rows = runs[k]
            block = x[offset:offset + steps * rows].reshape(steps, rows, x.shape[-1])
            res = self._layer(block, [s[:rows] if rows < bsz else s for s in states], ws, reverse)
            outs[k] = res[0].reshape(steps * rows, res[0].shape[-1])
            states = [r if rows == bsz else fl.cat([r, s[rows:]], 0) for r, s in zip(res[1:], states)]
        out = fl.cat(outs, 0) if outs else x.new_zeros((0, (self.proj_size or self.hidden_size)))
        return out, states


def _hidden_size_message(i: int, n_states: int) -> str:
    """torch's message for a state ``i`` of the wrong shape (LSTM's two states are numbered)."""
    return f"Expected hidden[{i}] size {{}}, got {{}}" if n_states == 2 else "Expected hidden size {}, got {}"


class RNN(RNNBase):
    """Multi-layer Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu).

    Takes the arguments of :class:`RNNBase` (input_size, hidden_size, num_layers, bias, batch_first,
    dropout, bidirectional, device, dtype) and

    Args:
        nonlinearity: ``'tanh'`` (default) or ``'relu'``.

    Shape: input ``(L, N, H_in)`` (``(N, L, H_in)`` with ``batch_first``) or unbatched
    ``(L, H_in)``, or a :class:`~flambeau.nn.utils.rnn.PackedSequence` (then ``output`` is one too);
    ``h_0`` ``(D * num_layers, N, H)``. Returns ``(output (L, N, D * H), h_n)``.
    Parameters ``weight_ih_l{k}[_reverse]``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``.
    """

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def _layer(self, x, states, ws, reverse):
        return fl._rnn_layer(x, states[0], *ws, nonlinearity=self.nonlinearity, reverse=reverse)

    def forward(self, input: Tensor, hx=None):
        """Run the sequence; returns ``(output, h_n)``."""
        out, finals = self._run(input, None if hx is None else (hx,), 1)
        return out, finals[0]


class LSTM(RNNBase):
    """Multi-layer LSTM with torch's gates ``i, f, g, o``: ``c_t = f * c_{t-1} + i * g``, ``h_t = o * tanh(c_t)``.

    Takes the arguments of :class:`RNNBase` (input_size, hidden_size, num_layers, bias, batch_first,
    dropout, bidirectional, proj_size, device, dtype). With ``proj_size > 0`` the hidden state is
    ``h_t = W_hr (o * tanh(c_t))`` (Sak et al., 2014), of ``proj_size`` features.

    Shape: input ``(L, N, H_in)`` (``(N, L, H_in)`` with ``batch_first``) or unbatched
    ``(L, H_in)``, or a :class:`~flambeau.nn.utils.rnn.PackedSequence` (then ``output`` is one too);
    ``hx = (h_0, c_0)``, ``h_0`` ``(D * num_layers, N, H_out)`` and ``c_0``
    ``(D * num_layers, N, H)``, ``H_out = proj_size or H``. Returns
    ``(output (L, N, D * H_out), (h_n, c_n))``.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def _layer(self, x, states, ws, reverse):
        if self.proj_size > 0:
            return _lstm_projected_layer(x, states[0], states[1], *ws, reverse=reverse)
        return fl._lstm_layer(x, states[0], states[1], *ws, reverse=reverse)

    def forward(self, input: Tensor, hx=None):
        """Run the sequence; returns ``(output, (h_n, c_n))``."""
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise RuntimeError("LSTM: hx must be a tuple (h_0, c_0) of tensors")
        out, finals = self._run(input, hx, 2)
        return out, (finals[0], finals[1])


class GRU(RNNBase):
    """Multi-layer GRU with torch's gates ``r, z, n``: ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``.

    Takes the arguments of :class:`RNNBase` (input_size, hidden_size, num_layers, bias, batch_first,
    dropout, bidirectional, device, dtype).

    Shape: input ``(L, N, H_in)`` (``(N, L, H_in)`` with ``batch_first``) or unbatched
    ``(L, H_in)``, or a :class:`~flambeau.nn.utils.rnn.PackedSequence` (then ``output`` is one too);
    ``h_0`` ``(D * num_layers, N, H)``. Returns ``(output (L, N, D * H), h_n)``.
    """

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def _layer(self, x, states, ws, reverse):
        return fl._gru_layer(x, states[0], *ws, reverse=reverse)

    def forward(self, input: Tensor, hx=None):
        """Run the sequence; returns ``(output, h_n)``."""
        out, finals = self._run(input, None if hx is None else (hx,), 1)
        return out, finals[0]


def _lstm_projected_layer(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih, b_hh, w_hr: Tensor,
                          reverse: bool = False):
    """One LSTM layer with a projection over ``x`` ``(T, B, I)``: ``(output (T, B, P), h_T, c_T)``.

    The input projection of all steps is one GEMM; each step adds the recurrent GEMM, applies the
    gates (torch's order i, f, g, o) and projects ``o * tanh(c)`` with ``w_hr`` ``(P, H)``.
    """
    steps = x.shape[0]
    xw = _linear(x, w_ih, b_ih)
    outs = [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        i, f, g, o = (xw[t] + _linear(h, w_hh, b_hh)).chunk(4, 1)
        c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        h = _linear(o.sigmoid() * c.tanh(), w_hr)
        outs[t] = h
    out = fl.stack(outs, 0) if steps else x.new_zeros((0, x.shape[1], w_hr.shape[0]))
    return out, h, c


# --- cells ---------------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """Base class of the cells: ``weight_ih (chunks * H, input_size)``, ``weight_hh``, biases.

    Args:
        input_size: features of the input; hidden_size: features of the state.
        bias: whether to learn ``bias_ih`` and ``bias_hh``.
        num_chunks: gates per cell (4 for LSTM, 3 for GRU, 1 for RNN).
        device, dtype: of the parameters.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(fl.empty((num_chunks * hidden_size, input_size), device=device, dtype=dtype))
        self.weight_hh = Parameter(fl.empty((num_chunks * hidden_size, hidden_size), device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(fl.empty(num_chunks * hidden_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(fl.empty(num_chunks * hidden_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self) -> None:
        """Draw every weight and bias from ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _check(self, input: Tensor):
        if input.ndim not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got {input.ndim}D instead")

    def _zeros(self, input: Tensor) -> Tensor:
        shape = (input.shape[0], self.hidden_size) if input.ndim == 2 else (self.hidden_size,)
        return fl.zeros(shape, dtype=input.dtype, device=input.device)

    def _check_hx(self, input: Tensor, hx: Tensor):
        if hx.ndim != input.ndim:
            kind = "batched 2-D" if input.ndim == 2 else "unbatched 1-D"
            raise RuntimeError(f"{type(self).__name__}: Expected hidden to be {input.ndim}D for {kind} input, "
                               f"got {hx.ndim}D instead")


class RNNCell(RNNCellBase):
    """Elman RNN cell: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu).

    Args:
        input_size, hidden_size, bias, device, dtype: see :class:`RNNCellBase`.
        nonlinearity: ``'tanh'`` or ``'relu'``.

    Shape: input ``(N, H_in)`` or ``(H_in,)``; hx of the matching ``(N, H)`` / ``(H,)`` (zeros if None).
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx=None) -> Tensor:
        """One step; returns ``h'``."""
        self._check(input)
        hx = self._zeros(input) if hx is None else hx
        self._check_hx(input, hx)
        if self.nonlinearity == "tanh":
            cell = fl.rnn_tanh_cell
        elif self.nonlinearity == "relu":
            cell = fl.rnn_relu_cell
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)


class LSTMCell(RNNCellBase):
    """LSTM cell (gates ``i, f, g, o``): returns ``(h', c')``.

    Args:
        input_size, hidden_size, bias, device, dtype: see :class:`RNNCellBase`.

    Shape: input ``(N, H_in)`` or ``(H_in,)``; hx a pair ``(h, c)`` of ``(N, H)`` / ``(H,)``
    (zeros if None).
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx=None):
        """One step; returns ``(h', c')``."""
        self._check(input)
        if hx is None:
            z = self._zeros(input)
            hx = (z, z)
        self._check_hx(input, hx[0])
        return fl.lstm_cell(input, tuple(hx), self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)


class GRUCell(RNNCellBase):
    """GRU cell (gates ``r, z, n``): returns ``h' = (1 - z) * n + z * h``.

    Args:
        input_size, hidden_size, bias, device, dtype: see :class:`RNNCellBase`.

    Shape: input ``(N, H_in)`` or ``(H_in,)``; hx of the matching ``(N, H)`` / ``(H,)`` (zeros if None).
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx=None) -> Tensor:
        """One step; returns ``h'``."""
        self._check(input)
        hx = self._zeros(input) if hx is None else hx
        self._check_hx(input, hx)
        return fl.gru_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
