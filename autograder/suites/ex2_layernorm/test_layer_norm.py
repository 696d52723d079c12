"""Task 1: layer_norm(x, weight, bias, eps=1e-5), from scratch (3 points)."""

import pytest
import torch
from hypothesis import given, strategies as st

from autograder.checks import SETTINGS, assert_close, fail, fail_naming, points
from autograder.suites.ex2_layernorm.common import expected, expected_grads, inputs, upstream
from autograder.suites.ex2_layernorm.mistakes import forward_mistakes, gradient_mistakes

PART = "layer_norm"
TITLE = "Task 1: layer_norm"
FORBIDDEN = {"layer_norm"}


@points(1)
@given(rows=st.integers(1, 6), d=st.integers(2, 40), seed=st.integers(0, 2**16),
       scale=st.sampled_from([0.1, 1.0, 30.0]), dtype=st.sampled_from([torch.float32, torch.float64]))
@SETTINGS
def test_matches_torch_on_random_rows(sub, rows, d, seed, scale, dtype):
    """Check the biased variance (divide by D), the axis (the last one) and that you multiply by weight, then add bias."""
    x, w, b = inputs((rows, d), seed, scale, offset=scale, dtype=dtype)
    assert_close(sub.call("layer_norm", x, w, b, 1e-5), expected(x, w, b), "layer_norm on a 2-D input",
                 atol=1e-4 if dtype == torch.float32 else 1e-9,
                 mistakes=forward_mistakes(x, w, b, 1e-5))


@points(0.5)
@pytest.mark.parametrize("shape", [(7,), (2, 3, 6), (2, 1, 3, 5)])
def test_works_for_any_number_of_leading_dimensions(sub, shape):
    """Normalize over the last dimension only, whatever the leading ones: avoid hard-coding 2-D shapes."""
    x, w, b = inputs(shape, seed=len(shape))
    assert_close(sub.call("layer_norm", x, w, b, 1e-5), expected(x, w, b),
                 f"layer_norm on a {len(shape)}-D input", atol=1e-4,
                 mistakes=forward_mistakes(x, w, b, 1e-5))


@points(0.5)
@pytest.mark.parametrize("spread", [0.0, 1e-3])
def test_constant_and_nearly_constant_rows_keep_eps_inside_the_root(sub, spread):
    """A row of (nearly) equal values must give finite numbers: add eps to the variance, inside the square root."""
    x, w, b = inputs((3, 8), seed=11, scale=spread, offset=3.0)
    out = sub.call("layer_norm", x, w, b, 1e-5)
    what = "layer_norm on constant rows" if spread == 0 else "layer_norm on nearly constant rows"
    mistakes = forward_mistakes(x, w, b, 1e-5)
    if isinstance(out, torch.Tensor) and not torch.isfinite(out).all():
        fail_naming(f"{what} gives NaN or inf", out, mistakes, atol=1e-3)
    assert_close(out, expected(x, w, b), what, atol=1e-3, mistakes=mistakes)


@points(0.25)
def test_uses_the_eps_argument(sub):
    """Use the eps you are given, not a constant."""
    x, w, b = inputs((4, 8), seed=5, scale=0.05)
    assert_close(sub.call("layer_norm", x, w, b, 0.1), expected(x, w, b, 0.1), "layer_norm with a non-default eps",
                 atol=1e-4, mistakes=forward_mistakes(x, w, b, 0.1))


@points(0.25)
def test_leaves_its_inputs_unchanged(sub):
    """Do not modify x, weight or bias in place (no -=, /=, or methods ending in _)."""
    x, w, b = inputs((3, 5), seed=3, scale=2.0, offset=1.0)
    result = sub.run("layer_norm", x, w, b, 1e-5, return_args=True)
    for name, before, after in zip(("x", "weight", "bias"), (x, w, b), result.args_after):
        if not torch.equal(before, after):
            fail(f"layer_norm changed {name} in place")


@points(0.5)
def test_gradients_match_torch_in_float64(sub):
    """Build the output from differentiable tensor operations: no .item(), .data, .detach() or numpy inside."""
    x, w, b = inputs((3, 6), seed=7, scale=2.0, dtype=torch.float64)
    dout = upstream((3, 6), seed=8)
    result = sub.run("layer_norm", x, w, b, 1e-5, grad_wrt=(0, 1, 2), dout=dout)
    wanted = expected_grads(x, w, b, dout)
    for index, (name, got, want) in enumerate(zip(("x", "weight", "bias"), result.grads, wanted)):
        if got is None:
            fail(f"no gradient flows back to {name}")
        assert_close(got, want, f"the gradient with respect to {name}", atol=1e-8, rtol=1e-7,
                     mistakes=gradient_mistakes(x, w, b, dout, 1e-5, index))
