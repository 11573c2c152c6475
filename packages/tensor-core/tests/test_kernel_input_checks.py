"""Operators whose numba kernels index several arrays check those arrays before the kernel runs.

The kernels index by the shapes of their arguments with no bounds checks, so a mismatched argument
used to read or write out of bounds: silent garbage, or a crash of the interpreter. The arguments
reach them from public calls (``flambeau.convolution``, the backward operators in the namespace),
from autograd's saved tensors (which an assignment to ``.data`` changes after the forward, as in
torch), and from tensors on another device. Each case below now raises a Python exception naming
the argument, the expected and the given, with torch's message where torch has one.

Every case runs in a subprocess (grouped, one per family): unchecked, several of them crashed the
interpreter, which must fail a test, not end pytest.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap

import pytest

_RUNNER = textwrap.dedent("""
    import json, sys
    import flambeau as fl
    import flambeau.nn.functional as F
    from flambeau._ops._registry import OPS
    out = {}
    for name, code in json.loads(sys.stdin.read()).items():
        try:
            exec(code, {"fl": fl, "F": F, "OPS": OPS})
            out[name] = "no error"
        except Exception as e:
            out[name] = type(e).__name__ + ": " + str(e)
        print(json.dumps({name: out[name]}), flush=True)
""")


def _run_group(cases: dict, sim: bool = False) -> dict:
    """``{name: "ExceptionType: message" or "no error"}`` of each snippet, run one after another in a
    subprocess; a crash fails every case of the group with the signal."""
    env = dict(os.environ)
    if sim:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    proc = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps(cases), capture_output=True, text=True,
                          env=env, timeout=600)
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            results.update(json.loads(line))
    if proc.returncode != 0:
        for name in cases:
            results.setdefault(name, f"the interpreter died (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return results


def _check(group: dict, results: dict, name: str) -> None:
    expected_type, expected_message = group[name][1]
    got = results[name]
    assert got == f"{expected_type}: {expected_message}", f"{name}: {got}"


# --- class-index losses: the backward kernels index the target, the weight and lse -------------------------
LOSSES = {
    "cross_entropy: target out of range after .data": ("""
x = fl.randn(4, 3, requires_grad=True); t = fl.tensor([0, 1, 2, 1])
loss = F.cross_entropy(x, t); t.data = fl.tensor([0, 1, 2, 100000000]); loss.backward()
""", ("IndexError", "Target 100000000 is out of bounds.")),
    "cross_entropy: negative target after .data": ("""
x = fl.randn(4, 3, requires_grad=True); t = fl.tensor([0, 1, 2, 1])
loss = F.cross_entropy(x, t); t.data = fl.tensor([0, -7, 2, 1]); loss.backward()
""", ("IndexError", "Target -7 is out of bounds.")),
    "cross_entropy: shorter target after .data": ("""
x = fl.randn(4, 3, requires_grad=True); t = fl.tensor([0, 1, 2, 1])
loss = F.cross_entropy(x, t, reduction="none"); t.data = fl.tensor([0]); loss.sum().backward()
""", ("ValueError", "Expected input batch_size (4) to match target batch_size (1).")),
    "cross_entropy: larger input after .data": ("""
x = fl.randn(4, 3, requires_grad=True); t = fl.tensor([0, 1, 2, 1])
loss = F.cross_entropy(x, t, reduction="none"); x.data = fl.randn(400, 3); loss.sum().backward()
""", ("ValueError", "Expected input batch_size (400) to match target batch_size (4).")),
    "cross_entropy: shorter weight after .data": ("""
x = fl.randn(4, 3, requires_grad=True); t = fl.tensor([0, 1, 2, 1]); w = fl.ones(3)
loss = F.cross_entropy(x, t, weight=w); w.data = fl.ones(1); loss.backward()
""", ("RuntimeError", "weight tensor should be defined either for all 3 classes or no classes but got weight "
                      "tensor of shape: [1]")),
    "cross_entropy_backward: grad_output of another shape": ("""
x = fl.randn(4, 3); t = fl.tensor([0, 1, 2, 1])
OPS["cross_entropy_backward"].fn(fl.ones(2), x, t, None, -100, "none", 0.0, fl.zeros(4), fl.tensor(4.0))
""", ("RuntimeError", "cross_entropy_backward(): expected grad_output of shape [4] (the loss's shape for target [4] "
                      "and reduction='none'), got [2]")),
    "cross_entropy_backward: lse of another shape": ("""
x = fl.randn(4, 3); t = fl.tensor([0, 1, 2, 1])
OPS["cross_entropy_backward"].fn(fl.tensor(1.0), x, t, None, -100, "mean", 0.0, fl.zeros(1), fl.tensor(4.0))
""", ("RuntimeError", "cross_entropy_backward(): expected lse of shape [4] (one log-sum-exp per target), got [1]")),
    "nll_loss: negative target after .data": ("""
x = fl.randn(4, 3, requires_grad=True); t = fl.tensor([0, 1, 2, 1])
loss = F.nll_loss(x, t); t.data = fl.tensor([0, 1, -2, 1]); loss.backward()
""", ("IndexError", "Target -2 is out of bounds.")),
    "nll_loss: target out of range after .data": ("""
x = fl.randn(4, 3, requires_grad=True); t = fl.tensor([0, 1, 2, 1])
loss = F.nll_loss(x, t); t.data = fl.tensor([0, 1, 2, 100000000]); loss.backward()
""", ("IndexError", "Target 100000000 is out of bounds.")),
}


@functools.cache
def _losses():
    return _run_group({k: v[0] for k, v in LOSSES.items()})


@pytest.mark.parametrize("name", LOSSES)
def test_class_index_loss_backward_checks(name):
    _check(LOSSES, _losses(), name)


def test_class_index_loss_messages_are_torchs():
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    for loss_fn, bad in ((tF.cross_entropy, 100000000), (tF.nll_loss, -2)):
        x = torch.randn(4, 3, requires_grad=True)
        t = torch.tensor([0, 1, 2, 1])
        loss = loss_fn(x, t)
        t.data = torch.tensor([0, 1, bad, 1])
        with pytest.raises(IndexError, match=rf"^Target {bad} is out of bounds\.$"):
            loss.backward()


# --- convolution: the primitive is public; its backward indexes the saved input ------------------------------
def _conv(args: str) -> str:
    return f"fl.convolution({args})"


CONVOLUTION = {
    "negative padding": (_conv("fl.randn(2, 3, 8, 8), fl.randn(4, 3, 3, 3), None, (1, 1), (-2, -2), (1, 1), False, "
                               "(0, 0), 1"), ("RuntimeError", "negative padding is not supported")),
    "zero stride": (_conv("fl.randn(2, 3, 8, 8), fl.randn(4, 3, 3, 3), None, (0, 1), (0, 0), (1, 1), False, (0, 0), 1"),
                    ("RuntimeError", "non-positive stride is not supported")),
    "depthwise weight not divisible by groups": (
        _conv("fl.randn(2, 2, 8, 8), fl.randn(3, 1, 3, 3), None, (1, 1), (0, 0), (1, 1), False, (0, 0), 2"),
        ("RuntimeError", "Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of size "
                         "[3, 1, 3, 3] instead")),
    "input channels": (
        _conv("fl.randn(2, 3, 8, 8), fl.randn(4, 2, 3, 3), None, (1, 1), (0, 0), (1, 1), False, (0, 0), 1"),
        ("RuntimeError", "Given groups=1, weight of size [4, 2, 3, 3], expected input[2, 3, 8, 8] to have 2 channels, "
                         "but got 3 channels instead")),
    "bias size": (
        _conv("fl.randn(2, 3, 8, 8), fl.randn(4, 3, 3, 3), fl.randn(7), (1, 1), (0, 0), (1, 1), False, (0, 0), 1"),
        ("RuntimeError", "Given weight of size [4, 3, 3, 3], expected bias to be 1-dimensional with 4 elements, but "
                         "got bias of size [7] instead")),
    "transposed depthwise channels": (
        _conv("fl.randn(2, 3, 8, 8), fl.randn(30, 1, 3, 3), None, (1, 1), (0, 0), (1, 1), True, (0, 0), 3"),
        ("RuntimeError", "Given transposed=1, weight of size [30, 1, 3, 3], expected input[2, 3, 8, 8] to have 30 "
                         "channels, but got 3 channels instead")),
    "unbatched input": (_conv("fl.randn(3, 8), fl.randn(4, 3, 3), None, (1,), (0,), (1,), False, (0,), 1"),
                        ("RuntimeError", "convolution(): expected a batched input (N, C, L) or (N, C, H, W), but got "
                                         "input of size [3, 8]")),
    "depthwise backward after the input's .data changed": ("""
x = fl.randn(1, 4, 8, 8, requires_grad=True); w = fl.randn(4, 1, 3, 3, requires_grad=True)
y = F.conv2d(x, w, groups=4); x.data = fl.randn(64, 4, 8, 8); y.sum().backward()
""", ("RuntimeError", "convolution_backward(): expected grad_output of size [64, 4, 6, 6] (the output of the "
                      "convolution of input [64, 4, 8, 8] with weight [4, 1, 3, 3]), got [1, 4, 6, 6]")),
    "depthwise double backward after the input's .data changed": ("""
x = fl.randn(1, 4, 8, 8, requires_grad=True); w = fl.randn(4, 1, 3, 3, requires_grad=True)
y = F.conv2d(x, w, groups=4); x.data = fl.randn(64, 4, 8, 8); y.sum().backward(create_graph=True)
""", ("RuntimeError", "convolution_backward_weight(): expected grad_output of size [64, 4, 6, 6] (the output of the "
                      "convolution of input [64, 4, 8, 8] with weight [4, 1, 3, 3]), got [1, 4, 6, 6]")),
    "backward after the input's .data changed": ("""
x = fl.randn(1, 4, 8, 8, requires_grad=True); w = fl.randn(5, 4, 3, 3, requires_grad=True)
y = F.conv2d(x, w); x.data = fl.randn(16, 4, 20, 20); y.sum().backward()
""", ("RuntimeError", "convolution_backward(): expected grad_output of size [16, 5, 18, 18] (the output of the "
                      "convolution of input [16, 4, 20, 20] with weight [5, 4, 3, 3]), got [1, 5, 6, 6]")),
}


@functools.cache
def _convolution():
    return _run_group({k: v[0] for k, v in CONVOLUTION.items()})


@pytest.mark.parametrize("name", CONVOLUTION)
def test_convolution_checks(name):
    _check(CONVOLUTION, _convolution(), name)


@pytest.mark.parametrize("name", ["negative padding", "zero stride", "input channels", "bias size"])
def test_convolution_messages_are_torchs(name):
    torch = pytest.importorskip("torch")
    code = CONVOLUTION[name][0].replace("fl.convolution", "torch.convolution").replace("fl.randn", "torch.randn")
    with pytest.raises(RuntimeError) as info:
        eval(code, {"torch": torch})
    assert str(info.value) == CONVOLUTION[name][1][1]


# --- pooling backward: max pooling scatters through indices ------------------------------------------------
POOLING = {
    "max_pool2d_backward: index outside the plane": ("""
from flambeau._ops.pooling import max_pool2d_backward
max_pool2d_backward(fl.ones(1, 1, 2, 2), fl.full((1, 1, 2, 2), 10**7, dtype=fl.int64), (1, 1, 4, 4))
""", ("IndexError", "max_pool2d_backward(): index 10000000 in indices is out of range for input planes of 4 x 4 = 16 "
                    "elements")),
    "max_pool2d_backward: negative index": ("""
from flambeau._ops.pooling import max_pool2d_backward
max_pool2d_backward(fl.ones(1, 1, 2, 2), fl.full((1, 1, 2, 2), -3, dtype=fl.int64), (1, 1, 4, 4))
""", ("IndexError", "max_pool2d_backward(): index -3 in indices is out of range for input planes of 4 x 4 = 16 "
                    "elements")),
    "max_pool2d_backward: indices of another shape": ("""
from flambeau._ops.pooling import max_pool2d_backward
max_pool2d_backward(fl.ones(1, 1, 2, 2), fl.zeros(1, 1, 2, 200, dtype=fl.int64), (1, 1, 4, 4))
""", ("RuntimeError", "max_pool2d_backward(): expected int64 indices of grad_output's shape [1, 1, 2, 2] on cpu, got "
                      "flambeau.int64 of shape [1, 1, 2, 200] on cpu")),
    "max_pool2d_backward: more planes than the input": ("""
from flambeau._ops.pooling import max_pool2d_backward
max_pool2d_backward(fl.ones(8, 1, 2, 2), fl.zeros(8, 1, 2, 2, dtype=fl.int64), (1, 1, 4, 4))
""", ("RuntimeError", "max_pool2d_backward(): expected grad_output of shape [1, 1, 2, 2] (input_size [1, 1, 4, 4] "
                      "pooled), got [8, 1, 2, 2]")),
    "avg_pool2d_backward: grad_output of another size": ("""
from flambeau._ops.pooling import avg_pool2d_backward
avg_pool2d_backward(fl.ones(1, 1, 50, 50), (1, 1, 4, 4), (2, 2), (2, 2), (0, 0), False, True, None)
""", ("RuntimeError", "avg_pool2d_backward(): expected grad_output of shape [1, 1, 2, 2] (input_size [1, 1, 4, 4] "
                      "pooled), got [1, 1, 50, 50]")),
    "adaptive_avg_pool2d_backward: more planes than the input": ("""
from flambeau._ops.pooling import adaptive_avg_pool2d_backward
adaptive_avg_pool2d_backward(fl.ones(9, 1, 2, 2), (1, 1, 4, 4))
""", ("RuntimeError", "adaptive_avg_pool2d_backward(): expected grad_output of shape [1, 1, 2, 2] (input_size "
                      "[1, 1, 4, 4] pooled), got [9, 1, 2, 2]")),
}


@functools.cache
def _pooling():
    return _run_group({k: v[0] for k, v in POOLING.items()})


@pytest.mark.parametrize("name", POOLING)
def test_pooling_backward_checks(name):
    _check(POOLING, _pooling(), name)


# --- normalisation backward: saved input, weight and statistics --------------------------------------------
NORMALIZATION = {
    "batch_norm: shorter weight after .data": ("""
x = fl.randn(4, 3, 5, requires_grad=True); w = fl.ones(3, requires_grad=True)
y = F.batch_norm(x, None, None, w, None, training=True); w.data = fl.ones(1); y.sum().backward()
""", ("RuntimeError", "batch_norm_backward(): expected weight of 3 elements (the channels of input [4, 3, 5]), got "
                      "[1]")),
    "batch_norm: larger input after .data": ("""
x = fl.randn(4, 3, 5, requires_grad=True)
y = F.batch_norm(x, None, None, None, None, training=True); x.data = fl.randn(400, 3, 50); y.sum().backward()
""", ("RuntimeError", "batch_norm_backward(): expected grad_output of input's shape [400, 3, 50] and dtype "
                      "flambeau.float32, got [4, 3, 5] and flambeau.float32")),
    "batch_norm_backward: statistics of another size": ("""
OPS["batch_norm_backward"].fn(fl.ones(4, 3), fl.ones(4, 3), None, fl.zeros(1), fl.ones(3), True)
""", ("RuntimeError", "batch_norm_backward(): expected save_mean of 3 elements (one per normalised row of input "
                      "[4, 3]), got [1]")),
    "layer_norm: shorter weight after .data": ("""
x = fl.randn(4, 30, requires_grad=True); w = fl.ones(30, requires_grad=True)
y = F.layer_norm(x, (30,), w); w.data = fl.ones(2); y.sum().backward()
""", ("RuntimeError", "layer_norm_backward(): expected input of shape [*, 30] and weight of shape [30] "
                      "(normalized_shape), got input of shape [4, 30] and weight of shape [2]")),
    "layer_norm_backward: statistics of another size": ("""
OPS["layer_norm_backward"].fn(fl.ones(4, 3), fl.ones(4, 3), (3,), fl.zeros(1), fl.ones(4), None)
""", ("RuntimeError", "layer_norm_backward(): expected mean of 4 elements (one per normalised row of input [4, 3]), "
                      "got [1]")),
    "group_norm: larger input after .data": ("""
x = fl.randn(4, 6, 5, requires_grad=True)
y = F.group_norm(x, 2); x.data = fl.randn(40, 6, 50); y.sum().backward()
""", ("RuntimeError", "group_norm_backward(): expected grad_output of input's shape [40, 6, 50] and dtype "
                      "flambeau.float32, got [4, 6, 5] and flambeau.float32")),
}


@functools.cache
def _normalization():
    return _run_group({k: v[0] for k, v in NORMALIZATION.items()})


@pytest.mark.parametrize("name", NORMALIZATION)
def test_normalization_backward_checks(name):
    _check(NORMALIZATION, _normalization(), name)


# --- recurrent layers and attention: backward operators in the namespace -----------------------------------
SEQUENCE = {
    "lstm: smaller c0 after .data": ("""
x = fl.randn(5, 3, 4, requires_grad=True); h0 = fl.zeros(3, 8); c0 = fl.zeros(3, 8, requires_grad=True)
w_ih = fl.randn(32, 4, requires_grad=True); w_hh = fl.randn(32, 8, requires_grad=True)
out, h, c = fl._lstm_layer(x, h0, c0, w_ih, w_hh); c0.data = fl.zeros(1, 1); out.sum().backward()
""", ("RuntimeError", "_lstm_layer_backward(): expected c0 of shape [3, 8] and dtype flambeau.float32 (T, B, I, H = "
                      "5, 3, 4, 8), got [1, 1] and flambeau.float32")),
    "gru: smaller h0 after .data": ("""
x = fl.randn(5, 3, 4, requires_grad=True); h0 = fl.zeros(3, 8, requires_grad=True)
w_ih = fl.randn(24, 4, requires_grad=True); w_hh = fl.randn(24, 8, requires_grad=True)
out, h = fl._gru_layer(x, h0, w_ih, w_hh); h0.data = fl.zeros(1, 1); out.sum().backward()
""", ("RuntimeError", "_gru_layer_backward(): expected h0 of shape [3, 8] and dtype flambeau.float32 (T, B, I, H = "
                      "5, 3, 4, 8), got [1, 1] and flambeau.float32")),
    "_gru_layer_backward: short gates": ("""
T, B, I, H = 5, 3, 4, 8
fl._gru_layer_backward(fl.zeros(T, B, H), fl.zeros(B, H), fl.zeros(T, B, I), fl.zeros(B, H), fl.zeros(3 * H, I),
                       fl.zeros(3 * H, H), fl.zeros(T, B, H), fl.zeros(T, B, 3 * H), False, False)
""", ("RuntimeError", "_gru_layer_backward(): expected gates of shape [5, 3, 32] and dtype flambeau.float32 (T, B, I, "
                      "H = 5, 3, 4, 8), got [5, 3, 24] and flambeau.float32")),
    "_rnn_layer_backward: grad_h of another dtype": ("""
T, B, I, H = 5, 3, 4, 8
fl._rnn_layer_backward(fl.zeros(T, B, H), fl.zeros(B, H, dtype=fl.float64), fl.zeros(T, B, I), fl.zeros(B, H),
                       fl.zeros(H, I), fl.zeros(H, H), fl.zeros(T, B, H), "tanh", False, False)
""", ("RuntimeError", "_rnn_layer_backward(): expected grad_h of shape [3, 8] and dtype flambeau.float32 (T, B, I, H "
                      "= 5, 3, 4, 8), got [3, 8] and flambeau.float64")),
    "attention backward: attn of another shape": ("""
q = fl.randn(2, 5, 4)
fl._scaled_dot_product_attention_backward(fl.randn(2, 5, 4), q, q, q, fl.randn(1, 1), None, 1.0)
""", ("RuntimeError", "_scaled_dot_product_attention_backward(): expected attn of shape [..., 5, 5] (query [..., 5, "
                      "4], key [..., 5, 4], value [..., 5, 4]), got [1, 1]")),
}


@functools.cache
def _sequence():
    return _run_group({k: v[0] for k, v in SEQUENCE.items()})


@pytest.mark.parametrize("name", SEQUENCE)
def test_recurrent_and_attention_backward_checks(name):
    _check(SEQUENCE, _sequence(), name)


# --- another device (CUDA under numba's simulator) -------------------------------------------------------------
_SAME_DEVICE = ("RuntimeError", "Expected all tensors to be on the same device, but found at least two devices, "
                                "{} and {}!")
_DEVICE_CASES = {
    "gelu_backward": ("fl.gelu_backward(fl.ones(3, device='cuda'), fl.ones(3))", ("cuda:0", "cpu")),
    "hardtanh_backward": ("fl.hardtanh_backward(fl.ones(3, device='cuda'), fl.ones(3), -1.0, 1.0)", ("cuda:0", "cpu")),
    "cross_entropy weight": ("F.cross_entropy(fl.randn(4, 3), fl.tensor([0, 1, 2, 1]), "
                             "weight=fl.ones(3, device='cuda'))", ("cpu", "cuda:0")),
    "nll_loss target": ("F.nll_loss(fl.randn(4, 3), fl.tensor([0, 1, 2, 1], device='cuda'))", ("cpu", "cuda:0")),
    "mse_loss target": ("F.mse_loss(fl.rand(4), fl.rand(4, device='cuda'))", ("cpu", "cuda:0")),
    "binary_cross_entropy weight": ("F.binary_cross_entropy(fl.rand(4), fl.rand(4), weight=fl.ones(4, device='cuda'))",
                                    ("cpu", "cuda:0")),
    "batch_norm running_mean": ("F.batch_norm(fl.randn(4, 3), fl.zeros(3, device='cuda'), fl.ones(3), training=True)",
                                ("cpu", "cuda:0")),
    "layer_norm weight": ("F.layer_norm(fl.randn(4, 3), (3,), fl.ones(3, device='cuda'))", ("cpu", "cuda:0")),
    "group_norm weight": ("F.group_norm(fl.randn(4, 4), 2, fl.ones(4, device='cuda'))", ("cpu", "cuda:0")),
    "embedding indices": ("F.embedding(fl.tensor([1, 2], device='cuda'), fl.randn(5, 3))", ("cpu", "cuda:0")),
    "_lstm_layer w_ih": ("fl._lstm_layer(fl.randn(5, 3, 4), fl.zeros(3, 8), fl.zeros(3, 8), "
                         "fl.randn(32, 4, device='cuda'), fl.randn(32, 8))", ("cuda:0", "cpu")),
    "scaled_dot_product_attention key": ("F.scaled_dot_product_attention(fl.randn(2, 5, 4), "
                                         "fl.randn(2, 5, 4, device='cuda'), fl.randn(2, 5, 4))", ("cpu", "cuda:0")),
}
DEVICES = {name: (code, (_SAME_DEVICE[0], _SAME_DEVICE[1].format(*devs))) for name, (code, devs) in
           _DEVICE_CASES.items()}


@functools.cache
def _devices():
    return _run_group({k: v[0] for k, v in DEVICES.items()}, sim=True)


@pytest.mark.parametrize("name", DEVICES)
def test_arguments_on_another_device(name):
    results = _devices()
    if all(r.startswith(("ModuleNotFoundError", "ImportError")) for r in results.values()):
        pytest.skip("numba-cuda's simulator is not installed")
    _check(DEVICES, results, name)
