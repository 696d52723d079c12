"""Task 1: class ResidualBlock(sublayer), forward(x) = x + sublayer(x) (2 points).

The sublayers are trusted modules built in the worker (nn.Linear, fixtures.TanhMLP,
fixtures.CountingTanh), holding parameters drawn here; the expected output is computed
here from those parameters, never from what the worker reports.
"""

import torch
from hypothesis import given, strategies as st

from autograder.checks import SETTINGS, assert_close, fail, points
from autograder.suites.ex1_residual.common import linear, randn, tanh_mlp
from autograder.suites.ex1_residual.mistakes import block_gradient_mistakes, block_mistakes

PART = "ResidualBlock"
TITLE = "Task 1: ResidualBlock"
FORBIDDEN = set()

# x of shape (*leading, d): no, one or two leading dimensions.
shapes = st.tuples(st.lists(st.integers(1, 4), min_size=0, max_size=2), st.integers(1, 8)).map(
    lambda s: (*s[0], s[1]))


@points(0.25)
def test_stores_the_sublayer_as_self_sublayer(sub):
    """Assign the sublayer you are given to self.sublayer after super().__init__(), so that its parameters become
    the block's parameters."""
    linear = sub.new("nn.Linear", 3, 3, seed=0)
    block = sub.call("ResidualBlock", linear)
    if sub.describe(block)["modules"].get("sublayer") != "Linear":
        fail("the block has no submodule called sublayer")
    if sub.getattr(block, "sublayer") != linear:
        fail("self.sublayer is not the module passed to ResidualBlock")
    names = set(sub.describe(block)["parameters"])
    if not {"sublayer.weight", "sublayer.bias"} <= names:
        fail("the sublayer's weight and bias are not parameters of the block")


@points(0.75)
@given(shape=shapes, seed=st.integers(0, 2**16), nonlinear=st.booleans(),
       dtype=st.sampled_from([torch.float32, torch.float64]))
@SETTINGS
def test_returns_x_plus_sublayer_of_x_for_any_leading_shape(sub, shape, seed, nonlinear, dtype):
    """forward(x) returns x + self.sublayer(x): the input added back to the sublayer's output, with the sublayer
    applied once to x itself, for any number of leading dimensions."""
    d = shape[-1]
    sublayer, local = tanh_mlp(sub, d, 5, d, seed, dtype) if nonlinear else linear(sub, d, seed, dtype)
    x = randn(shape, seed + 1, dtype, scale=2.0)
    block = sub.call("ResidualBlock", sublayer)
    with torch.no_grad():
        expected = (x.double() + local(x.double())).to(dtype)
    assert_close(sub.call(block, x), expected, "ResidualBlock's output",
                 atol=1e-5 if dtype == torch.float32 else 1e-12, mistakes=block_mistakes(x, local))


@points(0.5)
def test_gradient_reaches_x_through_the_shortcut_and_the_sublayer_in_float64(sub):
    """Build the output from differentiable operations on x: no .detach(), .data or torch.no_grad() in forward,
    so that the gradient flows through both the shortcut (identity) and the sublayer."""
    sublayer, local = tanh_mlp(sub, 4, 6, 4, seed=3, dtype=torch.float64)
    block = sub.call("ResidualBlock", sublayer)
    x = randn((3, 4), 4, torch.float64)
    dout = randn((3, 4), 5, torch.float64)
    result = sub.run(block, x, grad_wrt=(0,), dout=dout)
    leaf = x.clone().requires_grad_()
    (expected,) = torch.autograd.grad(leaf + local(leaf), leaf, dout)
    if result.grads[0] is None:
        fail("no gradient flows back to x")
    with torch.no_grad():
        forward_right = isinstance(result.value, torch.Tensor) and result.value.shape == x.shape and torch.allclose(
            result.value, x + local(x), atol=1e-10)
    assert_close(result.grads[0], expected, "the gradient with respect to x", atol=1e-10,
                 mistakes=block_gradient_mistakes(x, local, dout, forward_right))


@points(0.25)
def test_calls_the_sublayer_once_per_forward(sub):
    """Call self.sublayer exactly once in forward, on x, and reuse its output."""
    counter = sub.new("fixtures.CountingTanh")
    block = sub.call("ResidualBlock", counter)
    sub.call(block, randn((2, 3), 6))
    calls = sub.getattr(counter, "calls")
    if calls != 1:
        fail(f"one forward called the sublayer {calls} times")


@points(0.25)
def test_leaves_its_input_unchanged(sub):
    """Do not modify x in place (x += ... changes the caller's tensor): return a new tensor x + sublayer(x)."""
    sublayer = sub.new("nn.Linear", 4, 4, seed=7)
    block = sub.call("ResidualBlock", sublayer)
    x = randn((2, 4), 8)
    result = sub.run(block, x, return_args=True)
    if not torch.equal(result.args_after[0], x):
        fail("ResidualBlock changed x in place")
