"""A gradient that does not fit its parameter is refused before any update (Note [Gradient checks]).

The fused kernels of ``flambeau/optim/_kernels.py`` index the gradient and the state by the
parameter's flat index with no bounds check, so a stale gradient (the parameter's ``.data``
replaced after ``backward``, or ``p.grad.data`` replaced) used to be read past its end: the
parameter filled with garbage, and large ones crashed the interpreter. Every optimizer, fused or
not, now raises a RuntimeError naming both sides and leaves the parameter and its state untouched;
:func:`flambeau.optim._kernels.launch` checks every kernel call against what the kernel indexes.

The stale gradients here are views into a larger buffer, so that an unchecked kernel reads
inside that buffer (wrong results, no crash); the cases whose unchecked form writes out of bounds
run in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import flambeau as fl
import flambeau.optim as optim
from flambeau.optim import _kernels as K
from flambeau.optim.sgd import sgd

# Per optimizer, options that make it keep every state buffer it has (so that each is checked).
KWARGS = {
    "Adafactor": dict(weight_decay=0.1),
    "SGD": dict(lr=0.1, momentum=0.9),
    "Adam": dict(lr=0.1, amsgrad=True),
    "AdamW": dict(lr=0.1, amsgrad=True),
    "RMSprop": dict(lr=0.1, momentum=0.5, centered=True),
    "Adagrad": dict(lr=0.1),
    "Adadelta": dict(),
    "Adamax": dict(),
    "NAdam": dict(),
    "RAdam": dict(),
    "ASGD": dict(),
    "Rprop": dict(),
}
FUSABLE = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"]
CASES = [(name, fused) for name in KWARGS for fused in ([None, False] if name in FUSABLE else [None])]
IDS = [f"{name}-{'fused' if fused is None else 'tensor-ops'}" for name, fused in CASES]


def test_every_optimizer_is_covered():
    classes = {n for n in optim.__all__ if isinstance(getattr(optim, n), type)
               and issubclass(getattr(optim, n), optim.Optimizer) and n != "Optimizer"}
    # LBFGS takes a closure; Muon only 2-D parameters; SparseAdam only sparse gradients (each tested apart)
    assert classes == set(KWARGS) | {"LBFGS", "Muon", "SparseAdam"}


def _optimizer(name, fused, params):
    kw = dict(KWARGS[name])
    if fused is not None:
        kw["fused"] = fused
    return getattr(optim, name)(params, **kw)


def _snapshot(opt, params):
    """Copies of the parameters and of every tensor of their state."""
    return ([p.detach().numpy().copy() for p in params],
            [{k: v.numpy().copy() for k, v in opt.state[p].items() if isinstance(v, fl.Tensor)} for p in params])


def _assert_unchanged(opt, params, before):
    values, states = before
    for p, v, s in zip(params, values, states):
        np.testing.assert_array_equal(p.detach().numpy(), v)
        assert {k for k, t in opt.state[p].items() if isinstance(t, fl.Tensor)} == set(s), "state was created"
        for k, a in s.items():
            np.testing.assert_array_equal(opt.state[p][k].numpy(), a)


def _big():
    """A buffer a stale gradient is a view of: an unchecked kernel reading past the view reads 1e3s."""
    return fl.full((4096,), 1e3)


def _trained(name, fused, n=8):
    """An optimizer of one parameter of ``n`` elements that has taken one step (its state exists)."""
    p = fl.randn(n, requires_grad=True)
    opt = _optimizer(name, fused, [p])
    p.grad = fl.randn(n)
    opt.step()
    return opt, p


@pytest.mark.parametrize(("name", "fused"), CASES, ids=IDS)
def test_stale_grad_after_data_replaced_before_the_first_step(name, fused):
    # the case: p.data replaced by a larger tensor while p.grad holds the old gradient
    p = fl.randn(8, requires_grad=True)
    opt = _optimizer(name, fused, [p])
    p.grad = _big()[:8]
    p.data = fl.zeros(1024)
    before = _snapshot(opt, [p])
    with pytest.raises(RuntimeError, match=rf"{name}\.step\(\): the grad of param_groups\[0\]\['params'\]\[0\] "
                                           r"has the wrong shape: expected \[1024\] \(the parameter's shape\), "
                                           r"got \[8\]"):
        opt.step()
    _assert_unchanged(opt, [p], before)


@pytest.mark.parametrize(("name", "fused"), CASES, ids=IDS)
def test_stale_grad_after_data_replaced_by_a_smaller_tensor(name, fused):
    opt, p = _trained(name, fused)
    p.data = fl.zeros(4)  # the kernel would read 4 of the 8 gradient values: a silently wrong step
    before = _snapshot(opt, [p])
    with pytest.raises(RuntimeError, match=r"wrong shape: expected \[4\] \(the parameter's shape\), got \[8\]"):
        opt.step()
    _assert_unchanged(opt, [p], before)


@pytest.mark.parametrize(("name", "fused"), CASES, ids=IDS)
def test_grad_data_replaced_by_a_smaller_tensor(name, fused):
    opt, p = _trained(name, fused)
    p.grad.data = _big()[:5]
    before = _snapshot(opt, [p])
    with pytest.raises(RuntimeError, match=r"wrong shape: expected \[8\] \(the parameter's shape\), got \[5\]"):
        opt.step()
    _assert_unchanged(opt, [p], before)


@pytest.mark.parametrize(("name", "fused"), CASES, ids=IDS)
def test_grad_of_the_same_size_but_another_shape(name, fused):
    p = fl.randn(2, 4, requires_grad=True)
    opt = _optimizer(name, fused, [p])
    p.grad = fl.randn(2, 4)
    p.grad.data = fl.randn(4, 2)
    before = _snapshot(opt, [p])
    with pytest.raises(RuntimeError, match=r"wrong shape: expected \[2, 4\] \(the parameter's shape\), got \[4, 2\]"):
        opt.step()
    _assert_unchanged(opt, [p], before)


@pytest.mark.parametrize(("name", "fused"), CASES, ids=IDS)
@pytest.mark.parametrize(("pdtype", "gdtype"), [(fl.float32, fl.float64), (fl.float64, fl.float32)],
                         ids=["f32-param", "f64-param"])
def test_grad_of_another_dtype(name, fused, pdtype, gdtype):
    opt, p = _trained(name, fused)
    p.data = p.detach().to(pdtype)
    p.grad = None
    p.grad = fl.randn(8, dtype=pdtype)
    p.grad.data = fl.randn(8, dtype=gdtype)  # the setter of .grad refuses it; .data does not check
    before = _snapshot(opt, [p])
    with pytest.raises(RuntimeError, match=rf"wrong dtype: expected {pdtype} \(the parameter's dtype\), got {gdtype}"):
        opt.step()
    _assert_unchanged(opt, [p], before)


def test_nothing_in_the_group_moves_when_a_later_parameter_is_bad():
    a, b, c = (fl.randn(3, requires_grad=True) for _ in range(3))
    opt = optim.Adam([("fc.weight", a), ("fc.bias", b), ("out.weight", c)], lr=0.1)
    for p in (a, b, c):
        p.grad = fl.randn(3)
    opt.step()
    c.grad.data = fl.randn(2)
    before = _snapshot(opt, [a, b, c])
    with pytest.raises(RuntimeError, match=r"Adam\.step\(\): the grad of param_groups\[0\]\['params'\]\[2\] "
                                           r"\('out\.weight'\) has the wrong shape"):
        opt.step()
    _assert_unchanged(opt, [a, b, c], before)


def test_the_functional_forms_check_too():
    p = fl.zeros(8)
    with pytest.raises(RuntimeError, match=r"^grad has the wrong shape: expected \[8\] \(the parameter's shape\), "
                                           r"got \[3\]"):
        sgd([p], [_big()[:3]], [None], weight_decay=0, momentum=0.9, lr=0.1, dampening=0, nesterov=False,
            maximize=False)
    np.testing.assert_array_equal(p.numpy(), 0)


def test_a_stale_grad_after_zero_grad_and_backward_is_fine():
    # the remedy the message gives works: the next backward makes a gradient of the new shape
    p = fl.randn(8, requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    (p * p).sum().backward()
    p.data = fl.ones(16)
    opt.zero_grad()
    (p * p).sum().backward()
    opt.step()
    assert p.shape == (16,) and bool((p < 1).all())


# --- LBFGS --------------------------------------------------------------------------------------

def _lbfgs_closure(params, opt, corrupt):
    def closure():
        opt.zero_grad()
        loss = sum((p * p).sum() for p in params)
        loss.backward()
        corrupt()
        return loss
    return closure


def test_lbfgs_refuses_a_grad_of_another_shape():
    p = fl.randn(8, requires_grad=True)
    opt = optim.LBFGS([p])
    before = p.detach().numpy().copy()

    def corrupt():
        p.grad.data = _big()[:4]

    with pytest.raises(RuntimeError, match=r"LBFGS\.step\(\): the grad of param_groups\[0\]\['params'\]\[0\] has the "
                                           r"wrong shape: expected \[8\] \(the parameter's shape\), got \[4\]"):
        opt.step(_lbfgs_closure([p], opt, corrupt))
    np.testing.assert_array_equal(p.detach().numpy(), before)


def test_lbfgs_refuses_grads_whose_sizes_only_add_up():
    # unchecked, the flat gradient had the right length and every value landed on another parameter
    a, b = fl.randn(4, requires_grad=True), fl.randn(4, requires_grad=True)
    opt = optim.LBFGS([a, b])
    before = [a.detach().numpy().copy(), b.detach().numpy().copy()]

    def corrupt():
        a.grad.data = fl.randn(6)
        b.grad.data = fl.randn(2)

    with pytest.raises(RuntimeError, match=r"\['params'\]\[0\] has the wrong shape: expected \[4\] .* got \[6\]"):
        opt.step(_lbfgs_closure([a, b], opt, corrupt))
    np.testing.assert_array_equal(a.detach().numpy(), before[0])
    np.testing.assert_array_equal(b.detach().numpy(), before[1])


def test_lbfgs_refuses_a_grad_of_another_dtype():
    p = fl.randn(8, requires_grad=True)
    opt = optim.LBFGS([p])

    def corrupt():
        p.grad.data = p.grad.detach().double()

    with pytest.raises(RuntimeError, match=r"wrong dtype: expected flambeau\.float32 .* got flambeau\.float64"):
        opt.step(_lbfgs_closure([p], opt, corrupt))


# --- the grad on another device (CUDA under numba's simulator, in a subprocess) ------------------

_DEVICE_SCRIPT = textwrap.dedent("""
    import json
    import flambeau as fl, flambeau.optim as optim
    cases, out = json.loads(%r), {}
    for name, fused in cases:
        for side in ("grad", "param"):
            kw = dict(%r[name])
            if fused is not None:
                kw["fused"] = fused
            p = fl.zeros(8, requires_grad=True)
            opt = getattr(optim, name)([p], **kw)
            p.grad = fl.ones(8)
            if side == "grad":
                p.grad.data = fl.ones(8, device="cuda")
            else:
                p.data = fl.zeros(8, device="cuda")
            try:
                opt.step()
                result = "no error"
            except Exception as e:
                result = type(e).__name__ + ": " + str(e)
            out[f"{name}-{fused}-{side}"] = [result, float(p.detach().cpu().abs().sum().item())]
    p = fl.zeros(8, requires_grad=True)
    opt = optim.LBFGS([p])
    def closure():
        p.grad = None
        p.grad = fl.ones(8)
        p.grad.data = fl.ones(8, device="cuda")
        return fl.tensor(1.0)
    try:
        opt.step(closure)
        out["LBFGS"] = ["no error", 0.0]
    except Exception as e:
        out["LBFGS"] = [type(e).__name__ + ": " + str(e), float(p.abs().sum().item())]
    print(json.dumps(out))
""")


def test_grad_on_another_device():
    script = _DEVICE_SCRIPT % (json.dumps(CASES), KWARGS)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, fused in CASES:
        for side, expected, given in (("grad", "cpu", "cuda:0"), ("param", "cuda:0", "cpu")):
            result, moved = out[f"{name}-{fused}-{side}"]
            assert result.startswith(f"RuntimeError: {name}.step(): the grad of param_groups[0]['params'][0] has "
                                     f"the wrong device: expected {expected} (the parameter's device), "
                                     f"got {given}"), (name, fused, side, result)
            assert moved == 0.0
    result, moved = out["LBFGS"]
    assert "the wrong device: expected cpu (the parameter's device), got cuda:0" in result, result
    assert moved == 0.0


# --- every fused kernel, through launch() ----------------------------------------------------------

# kernel: (number of state buffers, length of sc, flags with every buffer read; per buffer the flag
# that makes the kernel read it, None: always read). Written out here, apart from _kernels' own table.
KERNELS = {
    "sgd": (1, 4, (False, True, False, False), (1,)),  # maximize, use_buf, first, nesterov
    "adam": (3, 9, (False, False, True, True), (None, None, 3)),  # maximize, decoupled, small_w1, amsgrad
    "rmsprop": (3, 7, (True, False, True, True), (None, 2, 3)),  # small_oma, maximize, centered, use_buf
    "adagrad": (1, 3, (False,), (None,)),  # maximize
    "adadelta": (2, 5, (False,), (None, None)),  # maximize
    "adamax": (2, 6, (False, True), (None, None)),  # maximize, small_w1
    "nadam": (2, 10, (False, False, True), (None, None)),  # maximize, decoupled, small_w1
    "radam": (2, 12, (False, False, True, True), (None, None)),  # maximize, decoupled, small_w1, rectify
}
SC = [0.0, 0.99, 0.1, 0.9, 0.999, 0.001, 0.03, 0.1, 0.01, 0.02, 0.5, 1.0]


def _kernel_args(name, n=8, dtype=fl.float32):
    n_bufs, n_sc, flags, _ = KERNELS[name]
    p = fl.randn(n, dtype=dtype)
    g = fl.randn(n, dtype=dtype)
    bufs = [fl.rand(n, dtype=dtype) + 0.5 for _ in range(n_bufs)]
    sc = K.pack(np.dtype(p.numpy().dtype), *SC[:n_sc])
    return getattr(K.kernels(), name), p, g, bufs, [sc, *flags]


def test_every_kernel_is_covered():
    assert set(vars(K.kernels())) == set(KERNELS)


@pytest.mark.parametrize("name", KERNELS)
def test_launch_runs_the_valid_call(name):
    kernel, p, g, bufs, args = _kernel_args(name)
    before = p.numpy().copy()
    assert K.launch(kernel, p, g, tuple(bufs), *args) is True
    assert not np.array_equal(p.numpy(), before)


@pytest.mark.parametrize("name", KERNELS)
def test_launch_copies_a_strided_gradient(name):
    kernel, p, g, bufs, args = _kernel_args(name)
    p2, bufs2 = p.clone(), [b.clone() for b in bufs]
    strided = fl.stack([g, fl.zeros(8)], 1)[:, 0]
    assert not strided.is_contiguous()
    K.launch(kernel, p, g, tuple(bufs), *args)
    K.launch(kernel, p2, strided, tuple(bufs2), *args)
    np.testing.assert_array_equal(p2.numpy(), p.numpy())


def _launch_fails(kernel, p, g, bufs, args, match):
    values = [t.numpy().copy() for t in (p, *[b for b in bufs if b is not None])]
    with pytest.raises(RuntimeError, match=match):
        K.launch(kernel, p, g, tuple(bufs), *args)
    for t, v in zip((p, *[b for b in bufs if b is not None]), values):
        np.testing.assert_array_equal(t.numpy(), v)


@pytest.mark.parametrize("name", KERNELS)
def test_launch_refuses_a_grad_of_another_shape(name):
    kernel, p, _, bufs, args = _kernel_args(name)
    _launch_fails(kernel, p, _big()[:5], bufs, args, r"^grad has the wrong shape: expected \[8\] .*got \[5\]")
    _launch_fails(kernel, p, fl.randn(2, 4), bufs, args, r"^grad has the wrong shape: expected \[8\] .*got \[2, 4\]")


@pytest.mark.parametrize("name", KERNELS)
def test_launch_refuses_a_grad_of_another_dtype(name):
    kernel, p, _, bufs, args = _kernel_args(name)
    _launch_fails(kernel, p, fl.randn(8, dtype=fl.float64), bufs, args,
                  r"^grad has the wrong dtype: expected flambeau\.float32 .*got flambeau\.float64")


@pytest.mark.parametrize("name", KERNELS)
def test_launch_refuses_a_state_tensor_of_another_shape(name):
    kernel, p, g, bufs, args = _kernel_args(name)
    for i in range(len(bufs)):
        bad = list(bufs)
        bad[i] = _big()[:3]
        _launch_fails(kernel, p, g, bad, args, rf"^bufs\[{i}\]: expected a state tensor of shape \[8\] "
                                               r"\(the parameter's\), got \[3\]")


@pytest.mark.parametrize("name", KERNELS)
def test_launch_refuses_a_short_sc(name):
    kernel, p, g, bufs, args = _kernel_args(name)
    n_sc = KERNELS[name][1]
    short = K.pack(np.dtype(np.float32), *SC[:n_sc - 1])
    _launch_fails(kernel, p, g, bufs, [short, *args[1:]], rf"^sc: expected a float32 array of the kernel's {n_sc} ")
    _launch_fails(kernel, p, g, bufs, [args[0].astype(np.float64), *args[1:]], r"^sc: expected a float32 array")


@pytest.mark.parametrize("name", KERNELS)
def test_launch_refuses_a_parameter_it_cannot_update_in_place(name):
    kernel, p, g, bufs, args = _kernel_args(name)
    strided = fl.stack([p, p], 1)[:, 0]
    with pytest.raises(RuntimeError, match=r"^param: expected a writable C-contiguous float32 or float64 CPU tensor, "
                                           r"got a flambeau\.float32 tensor of shape \[8\] on cpu, strided"):
        K.launch(kernel, strided, g, tuple(bufs), *args)


@pytest.mark.parametrize("name", KERNELS)
def test_launch_declines_state_it_cannot_update_in_place(name):
    # state of the right shape but another dtype, strided or read-only: the tensor-operator path runs
    kernel, p, g, bufs, args = _kernel_args(name)
    before = p.numpy().copy()
    for i in range(len(bufs)):
        for bad in (bufs[i].double(), fl.stack([bufs[i], bufs[i]], 1)[:, 0]):
            trial = list(bufs)
            trial[i] = bad
            assert K.launch(kernel, p, g, tuple(trial), *args) is False
            np.testing.assert_array_equal(p.numpy(), before)


_NONE_BUFFER_SCRIPT = textwrap.dedent("""
    import json
    import flambeau as fl, numpy as np
    from flambeau.optim import _kernels as K
    kernels, sc_values, out = json.loads(%r), %r, {}
    for name, (n_bufs, n_sc, flags, reads) in kernels.items():
        for i in range(n_bufs):
            p = fl.randn(8)
            bufs = [fl.rand(8) + 0.5 for _ in range(n_bufs)]
            bufs[i] = None
            try:
                K.launch(getattr(K.kernels(), name), p, fl.randn(8), tuple(bufs),
                         K.pack(np.dtype(np.float32), *sc_values[:n_sc]), *flags)
                result = "no error"
            except Exception as e:
                result = type(e).__name__ + ": " + str(e)
            out[f"{name}-{i}"] = result
    print(json.dumps(out))
""")


def test_launch_refuses_a_missing_state_tensor_the_flags_read():
    # unchecked, the kernel wrote through a zero-length array: a subprocess keeps a corrupted heap away
    script = _NONE_BUFFER_SCRIPT % (json.dumps(KERNELS), SC)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, (n_bufs, *_) in KERNELS.items():
        for i in range(n_bufs):
            assert out[f"{name}-{i}"].startswith(f"RuntimeError: bufs[{i}]: expected a state tensor of shape [8] "
                                                 "(the kernel reads it with these flags), got None"), out[f"{name}-{i}"]


@pytest.mark.parametrize("name", ["adam", "rmsprop", "sgd"])
def test_launch_accepts_a_missing_state_tensor_the_flags_never_read(name):
    kernel, p, g, bufs, args = _kernel_args(name)
    reads = KERNELS[name][3]
    args = list(args)
    for i, flag in enumerate(reads):
        if flag is not None:
            bufs[i] = None
            args[1 + flag] = False
    assert K.launch(kernel, p, g, tuple(bufs), *args) is True


def test_a_large_stale_grad_does_not_crash():
    # the reproduction: 50M elements read past a 10-element gradient crashed the interpreter
    script = textwrap.dedent("""
        import flambeau as fl, flambeau.optim as optim
        p = fl.zeros(10, requires_grad=True)
        p.grad = fl.ones(10)
        opt = optim.Adam([p])
        p.data = fl.zeros(50_000_000)
        try:
            opt.step()
        except RuntimeError as e:
            print("RuntimeError:", e)
        print("finite:", bool(fl.isfinite(p).all()), "zero:", not bool(p.any()))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode} (a negative code is a signal): {proc.stderr[-3000:]}"
    assert "RuntimeError: Adam.step(): the grad of param_groups[0]['params'][0] has the wrong shape: expected " \
           "[50000000] (the parameter's shape), got [10]" in proc.stdout
    assert "finite: True zero: True" in proc.stdout
