"""Grad-mode context managers as decorators, as torch's: with and without parentheses, and over generators."""

import pytest

import flambeau as fl

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("lib", [fl, torch], ids=["flambeau", "torch"])
def test_decorators_with_and_without_parentheses(lib):
    x = lib.ones(2, requires_grad=True)
    seen = {}
    for name, deco in (("no_grad", lib.no_grad), ("no_grad()", lib.no_grad()), ("enable_grad", lib.enable_grad),
                       ("inference_mode", lib.inference_mode), ("inference_mode(False)", lib.inference_mode(False)),
                       ("set_grad_enabled(False)", lib.set_grad_enabled(False))):
        f = deco(lambda a: a * 2)
        seen[name] = f(x).requires_grad
        with lib.no_grad():
            seen[name + " inside no_grad"] = f(x).requires_grad
    assert lib.is_grad_enabled()
    assert seen == {"no_grad": False, "no_grad inside no_grad": False, "no_grad()": False,
                    "no_grad() inside no_grad": False, "enable_grad": True, "enable_grad inside no_grad": True,
                    "inference_mode": False, "inference_mode inside no_grad": False, "inference_mode(False)": True,
                    "inference_mode(False) inside no_grad": True, "set_grad_enabled(False)": False,
                    "set_grad_enabled(False) inside no_grad": False}


@pytest.mark.parametrize("lib", [fl, torch], ids=["flambeau", "torch"])
def test_decorated_generators_run_their_body_in_the_mode(lib):
    @lib.no_grad()
    def steps():
        received = yield lib.is_grad_enabled()
        yield (received, lib.is_grad_enabled())
        return "done"

    gen = steps()
    assert next(gen) is False and lib.is_grad_enabled()  # the mode is left while the generator waits
    assert gen.send("x") == ("x", False)
    with pytest.raises(StopIteration) as stop:
        next(gen)
    assert stop.value.value == "done" and lib.is_grad_enabled()
