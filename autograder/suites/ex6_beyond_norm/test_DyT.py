"""Task 3: class DyT(dim, alpha_init=0.5), forward(x) = weight * tanh(alpha * x) + bias (3 points).

DyT replaces a norm layer: every normalization built-in is forbidden. The module's parameters
are given random values through its state_dict (the contract's names and shapes), and the
expected output is computed here from those values.
"""

import math

import pytest
import torch
from hypothesis import given, strategies as st

from autograder.checks import SETTINGS, Diagnosis, Handle, StudentError, assert_close, fail, points, tensor_info
from autograder.suites.ex6_beyond_norm.common import NORM_FAMILY, randn
from autograder.suites.ex6_beyond_norm.mistakes import dyt_gradient_mistakes, dyt_mistakes

PART = "DyT"
TITLE = "Task 3: DyT"
FORBIDDEN = set(NORM_FAMILY)

NAMES = ("alpha", "weight", "bias")
shapes = st.tuples(st.lists(st.integers(1, 4), min_size=0, max_size=2), st.integers(2, 12)).map(
    lambda s: (*s[0], s[1]))


def build(sub, *args, **kwargs) -> Handle:
    module = sub.call("DyT", *args, **kwargs)
    if not isinstance(module, Handle) or not module.is_module:
        fail("DyT(...) should build an nn.Module")
    return module


def random_state(dim: int, seed: int, dtype=torch.float32) -> dict:
    """alpha in [0.2, 1.5), weight in [0.5, 1.5), bias ~ N(0, 1)."""
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    return {"alpha": (torch.rand((), generator=g, dtype=f64) * 1.3 + 0.2).to(dtype),
            "weight": (torch.rand(dim, generator=g, dtype=f64) + 0.5).to(dtype),
            "bias": torch.randn(dim, generator=g, dtype=f64).to(dtype)}


def with_state(sub, dim: int, seed: int, dtype=torch.float32):
    """A DyT(dim) in ``dtype`` holding random parameters, and those parameters."""
    module = build(sub, dim)
    sub.method(module, "to", dtype)
    state = random_state(dim, seed, dtype)
    try:
        sub.load_state_dict(module, state)
    except StudentError:
        fail("DyT does not load a state_dict with alpha of shape (), weight and bias of shape (dim,)")
    return module, state


def formula(x, state):
    """weight * tanh(alpha * x) + bias in float64, rounded to x's dtype."""
    x64 = x.double()
    return (state["weight"].double() * torch.tanh(state["alpha"].double() * x64) + state["bias"].double()).to(x.dtype)


@points(0.5)
def test_has_parameters_alpha_weight_and_bias_of_the_contract_shapes(sub):
    """Three nn.Parameters: alpha, one scalar shared by every feature (shape ()); weight and bias, one value per
    feature (shape (dim,))."""
    module = build(sub, 6)
    parameters = sub.describe(module)["parameters"]
    for name in sorted(set(NAMES) - set(parameters)):
        try:
            held = isinstance(sub.getattr(module, name), torch.Tensor)
        except StudentError:
            held = False
        if held:  # names the mistake: the hint, about all three parameters, would name others too
            raise Diagnosis(f"{name} is a plain tensor, not a parameter: wrap it in nn.Parameter")
    if set(parameters) != set(NAMES):
        fail(f"DyT's parameters should be exactly alpha, weight and bias, found {sorted(parameters)}")
    for name, shape in (("alpha", []), ("weight", [6]), ("bias", [6])):
        info = parameters[name]
        if not info["is_parameter"] or not info["requires_grad"]:
            fail(f"{name} should be an nn.Parameter that requires grad")
        if info["shape"] != shape:  # names the mistake: the hint, about all three shapes, would name the others too
            raise Diagnosis(f"{name} has shape {tuple(info['shape'])}, expected {tuple(shape)}: " + (
                "alpha is one scalar shared by every feature" if name == "alpha" else
                f"{name} holds one value per feature"))


@points(0.5)
@pytest.mark.parametrize("args, kwargs, alpha", [((6,), {}, 0.5), ((6,), {"alpha_init": 1.25}, 1.25),
                                                 ((6, 0.1), {}, 0.1)])
def test_starts_at_alpha_init_ones_and_zeros(sub, args, kwargs, alpha):
    """alpha starts at alpha_init (default 0.5), weight at ones and bias at zeros, in float32."""
    module = build(sub, *args, **kwargs)
    values = {name: sub.getattr(module, name) for name in NAMES}
    if not isinstance(values["alpha"], torch.Tensor) or values["alpha"].numel() != 1:
        fail("alpha should be one scalar tensor, of shape ()")
    if not math.isclose(values["alpha"].double().item(), alpha, rel_tol=1e-6):
        fail("alpha does not start at alpha_init")
    for name, init in (("weight", torch.ones(6)), ("bias", torch.zeros(6))):
        value = values[name]
        if isinstance(value, torch.Tensor) and value.shape == init.shape and value.dtype == init.dtype \
                and not torch.equal(value, init):
            fail(f"{name} does not start at {'ones' if name == 'weight' else 'zeros'}")
    assert_close(values["weight"], torch.ones(6), "the initial weight", atol=0, rtol=0)
    assert_close(values["bias"], torch.zeros(6), "the initial bias", atol=0, rtol=0)


@points(1)
@given(shape=shapes, seed=st.integers(0, 2**16), scale=st.sampled_from([0.1, 1.0, 30.0]),
       dtype=st.sampled_from([torch.float32, torch.float64]))
@SETTINGS
def test_forward_is_weight_times_tanh_of_alpha_x_plus_bias(sub, shape, seed, scale, dtype):
    """forward(x) = self.weight * torch.tanh(self.alpha * x) + self.bias: alpha inside the tanh, weight and bias
    outside, over the last dimension, for any leading dimensions and either dtype."""
    module, state = with_state(sub, shape[-1], seed, dtype)
    x = randn(shape, seed + 1, dtype, scale=scale, offset=scale)
    assert_close(sub.call(module, x), formula(x, state), f"DyT's output on a {len(shape)}-D {dtype} input",
                 atol=1e-5 if dtype == torch.float32 else 1e-12, mistakes=dyt_mistakes(x, state))


@points(0.25)
def test_each_output_depends_on_its_own_input_only(sub):
    """DyT has no statistics: changing one element of x changes that element of the output and no other (no mean,
    no variance, no normalization before the tanh)."""
    module, _ = with_state(sub, 8, seed=7, dtype=torch.float64)
    x = randn((3, 8), 8, torch.float64, scale=2.0, offset=1.0)
    nudged = x.clone()
    nudged[1, 2] += 5.0
    before, after = sub.call(module, x), sub.call(module, nudged)
    if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor) or before.shape != x.shape:
        fail("DyT should return a tensor of the input's shape")
    moved = (before != after)
    moved[1, 2] = False
    if moved.any():
        fail("changing one element of x changed other outputs: DyT must not normalize or mix elements")


@points(0.5)
def test_gradients_reach_x_alpha_weight_and_bias(sub):
    """Use self.alpha, self.weight and self.bias themselves in forward (no .item(), .detach() or .data), so that each
    is trained; the gradient with respect to x is dout * weight * alpha * (1 - tanh(alpha * x)^2)."""
    module, state = with_state(sub, 5, seed=9, dtype=torch.float64)
    x = randn((4, 5), 10, torch.float64, scale=2.0)
    for name in NAMES:
        for other in NAMES:  # only `name` may carry a gradient out of the module
            sub.call(sub.getattr(module, f"{other}.requires_grad_"), other == name)
        out = sub.call(module, x)
        if not isinstance(out, torch.Tensor) or not tensor_info(out).requires_grad:
            fail(f"no gradient reaches {name}: the output does not depend on it through autograd")
    for other in NAMES:
        sub.call(sub.getattr(module, f"{other}.requires_grad_"), True)
    dout = randn((4, 5), 11, torch.float64)
    result = sub.run(module, x, grad_wrt=(0,), dout=dout)
    leaf = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(formula(leaf, state), leaf, dout)
    if result.grads[0] is None:
        fail("no gradient flows back to x")
    assert_close(result.grads[0], want, "the gradient with respect to x", atol=1e-10,
                 mistakes=dyt_gradient_mistakes(x, state, dout))


@points(0.25)
def test_leaves_its_input_unchanged(sub):
    """Do not modify x in place (x.mul_(alpha), x.tanh_()): return a new tensor."""
    module, _ = with_state(sub, 4, seed=12)
    x = randn((2, 4), 13, scale=2.0)
    result = sub.run(module, x, return_args=True)
    if not torch.equal(result.args_after[0], x):
        fail("DyT changed x in place")
