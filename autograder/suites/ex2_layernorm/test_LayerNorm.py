"""Task 2: LayerNorm(normalized_shape, eps=1e-5), a drop-in for nn.LayerNorm (2 points).

The module's forward runs with the grader's reference in place of the learner's own
layer_norm (task 1), so a bug in task 1 costs task 1 only, and is compared with that
reference evaluated here on the same input and the parameters the module reports. It is
also accepted when it matches PyTorch itself (a module that does not reuse layer_norm).
"""

import math

import pytest
import torch
import torch.nn as nn

from autograder.checks import (Handle, StudentError, assert_close, assert_module_matches_function, fail,
                               fail_naming, points, reported, tensor_info)
from autograder.suites.ex2_layernorm.common import expected, inputs

PART = "LayerNorm"
TITLE = "Task 2: LayerNorm"
FORBIDDEN = {"layer_norm"}

D = 6


def build(sub, *args, **kwargs) -> Handle:
    module = sub.call("LayerNorm", *args, **kwargs)
    if not isinstance(module, Handle) or not module.is_module:
        fail("LayerNorm(...) should build an nn.Module")
    return module


def load_random_parameters(sub, module, seed):
    """Give the module random weight and bias if it accepts nn.LayerNorm's state_dict; its own otherwise."""
    _, w, b = inputs((1, D), seed)
    try:
        sub.load_state_dict(module, {"weight": w, "bias": b})
    except StudentError:
        pass  # the state_dict tests report this; forward is checked with the module's own parameters


def check_forward(sub, module, x, eps, what):
    """The module's output equals the grader's layer_norm (or PyTorch's) with the module's parameters."""
    w = reported(sub.getattr(module, "weight"), (D,), "LayerNorm's weight")
    b = reported(sub.getattr(module, "bias"), (D,), "LayerNorm's bias")
    try:
        assert_module_matches_function(sub, module, x, "layer_norm", (x, w, b, eps), expected(x, w, b, eps), what)
    except AssertionError as error:
        out = sub.run(module, x, substitute={"layer_norm": "fixtures.layer_norm"}).value
        fail_naming(str(error), out, module_mistakes(sub, module, x, w, b, eps), atol=1e-4)


def module_mistakes(sub, module, x, w, b, eps):
    """What a module's forward gives when it loses its eps or the leading dimensions of x."""
    try:
        stored = sub.getattr(module, "eps") == eps
    except StudentError:
        stored = False
    lost_eps = ("forward does not pass self.eps on to layer_norm: it normalizes with the default eps 1e-5" if stored
                else "it normalizes with the default eps 1e-5: keep the eps LayerNorm is built with in self.eps and "
                     "pass it on")
    return [(lost_eps, lambda: expected(x, w, b, 1e-5) if eps != 1e-5 else None),
            ("it flattens the leading dimensions of x: return a tensor of x's shape",
             lambda: expected(x, w, b, eps).reshape(-1, x.shape[-1]))]


def unregistered(sub, module) -> str:
    """Why a module has no parameters weight and bias, when it holds them some other way."""
    buffers = sub.describe(module)["buffers"]
    if "weight" in buffers or "bias" in buffers:
        return "weight and bias are buffers (register_buffer), not parameters: make them nn.Parameter"
    try:
        held = isinstance(sub.getattr(module, "weight"), torch.Tensor)
    except StudentError:
        held = False
    return "weight and bias are plain tensors, not parameters: wrap them in nn.Parameter" if held else ""


@points(0.5)
def test_has_weight_and_bias_parameters_of_the_normalized_shape(sub):
    """Create weight and bias as nn.Parameter of shape (normalized_shape,), named exactly weight and bias."""
    module = build(sub, D)
    found = sub.describe(module)["parameters"]
    if not found and unregistered(sub, module):
        fail(unregistered(sub, module))
    if set(found) != {"weight", "bias"}:
        fail(f"LayerNorm should have the parameters weight and bias, found {sorted(found)}")
    for name, info in found.items():
        if info["shape"] != [D]:
            fail(f"{name} has shape {tuple(info['shape'])}, expected (normalized_shape,)")
        if not info["is_parameter"] or not info["requires_grad"]:
            fail(f"{name} should be an nn.Parameter that requires grad")


@points(0.25)
def test_initializes_weight_to_ones_and_bias_to_zeros(sub):
    """Start like nn.LayerNorm: weight all ones, bias all zeros, in float32."""
    module = build(sub, D)
    for name, init in (("weight", torch.ones(D)), ("bias", torch.zeros(D))):
        value = sub.getattr(module, name)
        if not isinstance(value, torch.Tensor) or not tensor_info(value).is_parameter:
            fail(f"{name} should be an nn.Parameter")
        if value.shape == init.shape and value.dtype == init.dtype and not torch.equal(value, init):
            fail(f"{name} does not start at {'ones' if name == 'weight' else 'zeros'}")
        assert_close(value, init, f"the initial {name}", atol=0, rtol=0)


@points(0.25)
@pytest.mark.parametrize("args, kwargs, eps", [((D,), {}, 1e-5), ((D,), {"eps": 1e-3}, 1e-3), ((D, 0.1), {}, 0.1)])
def test_stores_eps_as_an_attribute(sub, args, kwargs, eps):
    """Store the eps you are given (default 1e-5) as self.eps, as nn.LayerNorm does."""
    value = sub.getattr(build(sub, *args, **kwargs), "eps")
    if type(value) not in (int, float) or not math.isclose(value, eps, rel_tol=1e-9):
        fail("self.eps is not the eps passed to LayerNorm (or its default 1e-5)")


@points(0.25)
@pytest.mark.parametrize("shape", [(4, D), (2, 3, D)])
def test_forward_normalizes_with_its_parameters(sub, shape):
    """forward(x) should return layer_norm(x, self.weight, self.bias, self.eps), for any leading dimensions."""
    module = build(sub, D)
    load_random_parameters(sub, module, seed=1)
    x, _, _ = inputs(shape, seed=2, scale=2.0, offset=1.0)
    check_forward(sub, module, x, 1e-5, f"LayerNorm's output on a {len(shape)}-D input")


@points(0.25)
def test_forward_uses_the_eps_it_was_built_with(sub):
    """Pass self.eps on to layer_norm: a LayerNorm built with a non-default eps must normalize with that eps."""
    module = build(sub, D, eps=1e-3)
    load_random_parameters(sub, module, seed=3)
    x, _, _ = inputs((4, D), seed=4, scale=0.01)
    check_forward(sub, module, x, 1e-3, "the output of a LayerNorm built with a non-default eps")


@points(0.25)
def test_state_dict_loads_into_nn_layernorm(sub):
    """Name the parameters weight and bias, with shape (normalized_shape,), so nn.LayerNorm can load them."""
    state = sub.state_dict(build(sub, D, eps=1e-3))
    reference = nn.LayerNorm(D, eps=1e-3)
    try:
        reference.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError):
        fail(f"nn.LayerNorm cannot load your state_dict (its keys are {sorted(state)[:6]})")


@points(0.25)
def test_loads_the_state_dict_of_nn_layernorm(sub):
    """Your module should accept nn.LayerNorm's state_dict and then hold exactly those weight and bias values."""
    reference = nn.LayerNorm(D, eps=1e-3)
    _, w, b = inputs((1, D), seed=5)
    with torch.no_grad():
        reference.weight.copy_(w)
        reference.bias.copy_(b)
    module = build(sub, D, eps=1e-3)
    sub.load_state_dict(module, dict(reference.state_dict()))
    for name, want in (("weight", w), ("bias", b)):
        assert_close(sub.getattr(module, name), want, f"{name} after loading nn.LayerNorm's state_dict", atol=0, rtol=0)
