"""Task 2: RMSNorm(dim, eps=1e-6), whose state_dict loads into nn.RMSNorm (4 points).

The module's forward runs with the grader's reference in place of the learner's own
rms_norm (task 1), so a bug in task 1 costs task 1 only, and is compared with that
reference evaluated here on the same input and the weight the module reports. It is also
accepted when it matches PyTorch itself (a module that does not reuse rms_norm).
"""

import math

import pytest
import torch
import torch.nn as nn

from autograder.checks import (Handle, StudentError, assert_close, assert_module_matches_function, fail,
                               fail_naming, points, reported, tensor_info)
from autograder.suites.ex5_rmsnorm.common import expected, inputs
from autograder.suites.ex5_rmsnorm.mistakes import module_mistakes

PART = "RMSNorm"
TITLE = "Task 2: RMSNorm"
FORBIDDEN = {"rms_norm", "layer_norm"}

D = 8


def build(sub, *args, **kwargs) -> Handle:
    module = sub.call("RMSNorm", *args, **kwargs)
    if not isinstance(module, Handle) or not module.is_module:
        fail("RMSNorm(...) should build an nn.Module")
    return module


def load_random_weight(sub, module, seed, dtype=torch.float32):
    """Give the module a random weight if it accepts nn.RMSNorm's state_dict; keep its own otherwise."""
    _, w = inputs((1, D), seed, dtype=dtype)
    try:
        sub.load_state_dict(module, {"weight": w})
    except StudentError:
        pass  # the state_dict tests report this; forward is checked with the module's own weight


def check_forward(sub, module, x, eps, what):
    """The module's output equals the grader's rms_norm (or PyTorch's) with the module's weight."""
    w = reported(sub.getattr(module, "weight"), (D,), "RMSNorm's weight")
    rtol = 1e-2 if x.dtype == torch.bfloat16 else 1e-4
    try:
        assert_module_matches_function(sub, module, x, "rms_norm", (x, w, eps), expected(x, w.to(x.dtype), eps), what,
                                       rtol=rtol)
    except AssertionError as error:
        out = sub.run(module, x, substitute={"rms_norm": "fixtures.rms_norm"}).value
        fail_naming(str(error), out, module_mistakes(sub, module, x, w.to(x.dtype), eps, expected), atol=1e-4,
                    rtol=rtol)


def unregistered(sub, module) -> str:
    """Why a module has no parameter weight, when it holds one some other way."""
    if "weight" in sub.describe(module)["buffers"]:
        return "weight is a buffer (register_buffer), not a parameter: make it nn.Parameter"
    try:
        held = isinstance(sub.getattr(module, "weight"), torch.Tensor)
    except StudentError:
        held = False
    return "weight is a plain tensor, not a parameter: wrap it in nn.Parameter" if held else ""


@points(0.75)
def test_has_one_parameter_weight_of_shape_dim(sub):
    """RMSNorm has a single parameter: weight, an nn.Parameter of shape (dim,). There is no bias."""
    module = build(sub, D)
    found = sub.describe(module)["parameters"]
    if not found and unregistered(sub, module):
        fail(unregistered(sub, module))
    if set(found) == {"weight", "bias"}:
        fail("RMSNorm has no bias, unlike LayerNorm: weight is its only parameter")
    if set(found) != {"weight"}:
        fail(f"RMSNorm should have exactly one parameter, weight; found {sorted(found)}")
    info = found["weight"]
    if info["shape"] != [D]:
        fail(f"weight has shape {tuple(info['shape'])}, expected (dim,)")
    if not info["is_parameter"] or not info["requires_grad"]:
        fail("weight should be an nn.Parameter that requires grad")


@points(0.5)
def test_initializes_weight_to_ones(sub):
    """Start like nn.RMSNorm: weight all ones, in float32."""
    value = sub.getattr(build(sub, D), "weight")
    if not isinstance(value, torch.Tensor) or not tensor_info(value).is_parameter:
        fail("weight should be an nn.Parameter")
    if value.shape == (D,) and value.dtype == torch.float32 and not torch.equal(value, torch.ones(D)):
        fail("weight does not start at ones")
    assert_close(value, torch.ones(D), "the initial weight", atol=0, rtol=0)


@points(0.25)
@pytest.mark.parametrize("args, kwargs, eps", [((D,), {}, 1e-6), ((D,), {"eps": 1e-4}, 1e-4), ((D, 0.1), {}, 0.1)])
def test_stores_eps_as_an_attribute(sub, args, kwargs, eps):
    """Store the eps you are given (default 1e-6) as self.eps."""
    value = sub.getattr(build(sub, *args, **kwargs), "eps")
    if type(value) not in (int, float) or not math.isclose(value, eps, rel_tol=1e-9):
        fail("self.eps is not the eps passed to RMSNorm (or its default 1e-6)")


@points(0.75)
@pytest.mark.parametrize("shape, dtype", [((4, D), torch.float32), ((2, 3, D), torch.float32),
                                          ((2, 3, D), torch.bfloat16)])
def test_forward_normalizes_with_its_weight(sub, shape, dtype):
    """forward(x) should return rms_norm(x, self.weight, self.eps): any leading dimensions, and x's dtype (also for a
    bfloat16 module)."""
    module = build(sub, D)
    if dtype != torch.float32:
        sub.method(module, "to", dtype)
    load_random_weight(sub, module, seed=1, dtype=dtype)
    x, _ = inputs(shape, seed=2, scale=2.0, offset=1.0, dtype=dtype)
    check_forward(sub, module, x, 1e-6, f"RMSNorm's output on a {len(shape)}-D {dtype} input")


@points(0.75)
def test_forward_uses_the_eps_it_was_built_with(sub):
    """Pass self.eps on to rms_norm: an RMSNorm built with a non-default eps must normalize with that eps."""
    module = build(sub, D, eps=1e-2)
    load_random_weight(sub, module, seed=3)
    x, _ = inputs((4, D), seed=4, scale=0.05)
    check_forward(sub, module, x, 1e-2, "the output of an RMSNorm built with a non-default eps")


@points(0.5)
def test_state_dict_loads_into_nn_rmsnorm(sub):
    """Name the parameter weight, with shape (dim,), and add nothing else, so nn.RMSNorm can load your state_dict."""
    state = sub.state_dict(build(sub, D, eps=1e-4))
    reference = nn.RMSNorm(D, eps=1e-4)
    try:
        reference.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError):
        fail(f"nn.RMSNorm cannot load your state_dict (its keys are {sorted(state)[:6]})")


@points(0.5)
def test_loads_the_state_dict_of_nn_rmsnorm(sub):
    """Your module should accept nn.RMSNorm's state_dict and then hold exactly that weight."""
    reference = nn.RMSNorm(D, eps=1e-4)
    _, w = inputs((1, D), seed=5)
    with torch.no_grad():
        reference.weight.copy_(w)
    module = build(sub, D, eps=1e-4)
    sub.load_state_dict(module, dict(reference.state_dict()))
    assert_close(sub.getattr(module, "weight"), w, "weight after loading nn.RMSNorm's state_dict", atol=0, rtol=0)
