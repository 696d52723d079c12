"""Task 2: class ReZeroBlock(sublayer), forward(x) = x + alpha * sublayer(x), alpha a scalar starting at 0 (2 points).

The sublayers are trusted modules built in the worker (nn.Linear, fixtures.TanhMLP,
fixtures.CountingTanh), as in ex1's ResidualBlock suite; the expected output is computed here
from the parameters drawn here and loaded into them. The exercise is training without a norm
layer: the whole normalization family is forbidden in this task too.
"""

import torch
from hypothesis import given, strategies as st

from autograder.checks import SETTINGS, StudentError, assert_close, fail, fail_naming, points, tensor_info
from autograder.suites.ex6_beyond_norm.common import NORM_FAMILY, randn, sublayer
from autograder.suites.ex6_beyond_norm.mistakes import rezero_gradient_mistakes, rezero_mistakes

PART = "ReZeroBlock"
TITLE = "Task 2: ReZeroBlock"
FORBIDDEN = set(NORM_FAMILY)

# x of shape (*leading, d): no, one or two leading dimensions.
shapes = st.tuples(st.lists(st.integers(1, 4), min_size=0, max_size=2), st.integers(2, 8)).map(
    lambda s: (*s[0], s[1]))


def set_alpha(sub, block, value: float, dtype=torch.float32) -> None:
    """Give the block's alpha a value through its state_dict (the contract's name and shape: alpha, a scalar)."""
    try:
        sub.load_state_dict(block, {"alpha": torch.tensor(value, dtype=dtype)}, strict=False)
    except StudentError:
        fail("the block's alpha could not be set to another scalar: alpha should be a parameter of shape ()")


@points(0.25)
def test_stores_the_sublayer_as_self_sublayer(sub):
    """Assign the sublayer you are given to self.sublayer after super().__init__(), so that its parameters become
    the block's parameters."""
    linear = sub.new("nn.Linear", 3, 3, seed=0)
    block = sub.call("ReZeroBlock", linear)
    modules = sub.describe(block)["modules"]
    if modules.get("sublayer") != "Linear":
        others = [name for name, kind in modules.items() if kind == "Linear" and "." not in name]
        fail(f"the block has no submodule called sublayer: it stores the sublayer as self.{others[0]}; name it "
             f"self.sublayer" if others else "the block has no submodule called sublayer: the sublayer is not a "
             "submodule of the block (a Python list or dict hides it from PyTorch); assign the module itself to "
             "self.sublayer")
    if sub.getattr(block, "sublayer") != linear:
        fail("self.sublayer is not the module passed to ReZeroBlock")
    if not {"sublayer.weight", "sublayer.bias"} <= set(sub.describe(block)["parameters"]):
        fail("the sublayer's weight and bias are not parameters of the block")


@points(0.5)
def test_alpha_is_one_scalar_parameter_that_starts_at_zero(sub):
    """self.alpha = nn.Parameter(torch.zeros(())): one trainable scalar (shape (), not (1,) or (dim,)) that starts at
    zero, and the block's only parameter besides the sublayer's."""
    block = sub.call("ReZeroBlock", sub.new("nn.Linear", 4, 4, seed=1))
    parameters = sub.describe(block)["parameters"]
    own = {name for name in parameters if not name.startswith("sublayer.")}
    if not own:
        try:
            held = isinstance(sub.getattr(block, "alpha"), torch.Tensor)
        except StudentError:
            held = False
        if held:
            fail("alpha is a plain tensor, not a parameter: wrap it in nn.Parameter")
    if own != {"alpha"}:
        fail(f"the block's own parameters should be exactly alpha, found {sorted(own)}")
    info = parameters["alpha"]
    if not info["is_parameter"] or not info["requires_grad"]:
        fail("alpha should be an nn.Parameter that requires grad")
    if info["shape"] != []:
        fail(f"alpha has shape {tuple(info['shape'])}: it is one scalar for the whole block, shape ()")
    alpha = sub.getattr(block, "alpha")
    if not isinstance(alpha, torch.Tensor) or alpha.item() != 0.0:
        fail("alpha does not start at zero")


@points(0.25)
@given(shape=shapes, seed=st.integers(0, 2**16), nonlinear=st.booleans())
@SETTINGS
def test_is_the_identity_at_initialization(sub, shape, seed, nonlinear):
    """With alpha = 0 the block returns x itself, whatever the sublayer and the leading dimensions."""
    remote, local = sublayer(sub, shape[-1], seed, nonlinear)
    x = randn(shape, seed + 1, scale=2.0)
    out = sub.call(sub.call("ReZeroBlock", remote), x)
    try:
        assert_close(out, x, "ReZeroBlock's output at initialization", atol=0, rtol=0)
    except AssertionError as error:  # exact, but a wrong answer is named to float32's precision
        fail_naming(str(error), out, rezero_mistakes(x, 0.0, local), atol=1e-5, expected=x)


@points(0.5)
@given(shape=shapes, seed=st.integers(0, 2**16), nonlinear=st.booleans(), alpha=st.sampled_from([0.3, -1.5, 2.0]),
       dtype=st.sampled_from([torch.float32, torch.float64]))
@SETTINGS
def test_returns_x_plus_alpha_times_the_sublayer_for_any_leading_shape(sub, shape, seed, nonlinear, alpha, dtype):
    """forward(x) returns x + self.alpha * self.sublayer(x): alpha scales the branch (not x), for any number of
    leading dimensions and either dtype."""
    remote, local = sublayer(sub, shape[-1], seed, nonlinear, dtype)
    block = sub.call("ReZeroBlock", remote)
    sub.method(block, "to", dtype)
    set_alpha(sub, block, alpha, dtype)
    x = randn(shape, seed + 1, dtype, scale=2.0)
    with torch.no_grad():
        want = (x.double() + alpha * local(x.double())).to(dtype)
    assert_close(sub.call(block, x), want, "ReZeroBlock's output with a non-zero alpha",
                 atol=1e-5 if dtype == torch.float32 else 1e-12, mistakes=rezero_mistakes(x, alpha, local))


@points(0.25)
def test_gradients_reach_alpha_and_x(sub):
    """Use self.alpha itself in forward (no .item(), .detach(), .data or torch.no_grad()), so that training can
    move it; the gradient with respect to x flows through the shortcut and through the scaled branch."""
    remote, local = sublayer(sub, 4, seed=3, nonlinear=True, dtype=torch.float64)
    sub.method(remote, "requires_grad_", False)  # only alpha is left to carry a gradient out of the block
    block = sub.call("ReZeroBlock", remote)
    sub.method(block, "to", torch.float64)
    set_alpha(sub, block, 0.7, torch.float64)
    x = randn((3, 4), 4, torch.float64)
    out = sub.call(block, x)
    if not isinstance(out, torch.Tensor) or not tensor_info(out).requires_grad:
        fail("no gradient reaches alpha: the output does not depend on it through autograd")
    dout = randn((3, 4), 5, torch.float64)
    result = sub.run(block, x, grad_wrt=(0,), dout=dout)
    leaf = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(leaf + 0.7 * local(leaf), leaf, dout)
    if result.grads[0] is None:
        fail("no gradient flows back to x")
    assert_close(result.grads[0], want, "the gradient with respect to x", atol=1e-10,
                 mistakes=rezero_gradient_mistakes(x, 0.7, local, dout))


@points(0.25)
def test_calls_the_sublayer_once_per_forward_and_leaves_x_unchanged(sub):
    """Call self.sublayer exactly once in forward, on x, and return a new tensor: x += ... would change the caller's
    x."""
    counter = sub.new("fixtures.CountingTanh")
    block = sub.call("ReZeroBlock", counter)
    set_alpha(sub, block, 0.5)
    x = randn((2, 3), 6)
    result = sub.run(block, x, return_args=True)
    calls = sub.getattr(counter, "calls")
    if calls != 1:
        fail(f"one forward called the sublayer {calls} times")
    if not torch.equal(result.args_after[0], x):
        fail("ReZeroBlock changed x in place")
