"""Task 3: layer_norm_forward and layer_norm_backward, gradients by hand (5 points).

Both are called under torch.no_grad(), as the contract says: autograd is forbidden. The
cache travels from the forward to the backward through the grader, as plain values and
tensors (objects that are not plain stay in the worker and come back as themselves).
"""

import pytest
import torch
from hypothesis import given, settings, strategies as st

from autograder.checks import SETTINGS, assert_close, call_backward, call_forward, fail, fail_naming, points
from autograder.suites.ex2_layernorm.common import expected, expected_grads, inputs, upstream
from autograder.suites.ex2_layernorm.mistakes import backward_mistakes, forward_mistakes

PART = "layer_norm_forward_backward"
TITLE = "Task 3: layer_norm_forward and layer_norm_backward"
FORBIDDEN = {"layer_norm", "autograd"}

GRAD_NAMES = ("dx", "dweight", "dbias")

# Each example costs two calls into the worker (forward, then backward): fewer examples than
# task 1's, over the same shapes, scales and dtypes.
FEWER = settings(SETTINGS, max_examples=8)


def forward(sub, x, w, b, eps=1e-5):
    """(out, cache) from the learner's layer_norm_forward."""
    return call_forward(sub, "layer_norm_forward", x, w, b, eps)


def backward(sub, x, w, b, dout, eps=1e-5):
    """(dx, dweight, dbias) from the learner's backward, fed with the cache of their forward."""
    _, cache = forward(sub, x, w, b, eps)
    return call_backward(sub, "layer_norm_backward", dout, cache, GRAD_NAMES)


def check_grad(sub, name, shape, seed, scale=2.0, eps=1e-5):
    x, w, b = inputs(shape, seed, scale=scale, offset=1.0, dtype=torch.float64)
    dout = upstream(shape, seed + 1)
    got = backward(sub, x, w, b, dout, eps)[GRAD_NAMES.index(name)]
    want = expected_grads(x, w, b, dout, eps)[GRAD_NAMES.index(name)]
    assert_close(got, want, f"{name} for a {len(shape)}-D input", atol=1e-8, rtol=1e-7,
                 mistakes=backward_mistakes(x, w, b, dout, eps, name))


@points(1)
@given(rows=st.integers(1, 6), d=st.integers(2, 40), seed=st.integers(0, 2**16),
       scale=st.sampled_from([0.1, 1.0, 30.0]), dtype=st.sampled_from([torch.float32, torch.float64]))
@FEWER
def test_forward_matches_torch_on_random_rows(sub, rows, d, seed, scale, dtype):
    """The forward output is layer_norm's: biased variance, statistics over the last dimension, then weight and bias."""
    x, w, b = inputs((rows, d), seed, scale, offset=scale, dtype=dtype)
    out, _ = forward(sub, x, w, b)
    assert_close(out, expected(x, w, b), "layer_norm_forward's output on a 2-D input",
                 atol=1e-4 if dtype == torch.float32 else 1e-9, mistakes=forward_mistakes(x, w, b, 1e-5))


@points(0.5)
@pytest.mark.parametrize("shape", [(2, 3, 6), (2, 1, 3, 5)])
def test_forward_works_for_any_number_of_leading_dimensions(sub, shape):
    """x may have shape (..., D): normalize over the last dimension without assuming x is 2-D."""
    x, w, b = inputs(shape, seed=len(shape), scale=2.0, offset=1.0)
    out, _ = forward(sub, x, w, b)
    assert_close(out, expected(x, w, b), f"layer_norm_forward's output on a {len(shape)}-D input", atol=1e-4,
                 mistakes=forward_mistakes(x, w, b, 1e-5))


@points(0.5)
@pytest.mark.parametrize("shape", [(5, 4), (2, 1, 3, 4)])
def test_dbias_is_dout_summed_over_every_leading_dimension(sub, shape):
    """dbias has shape (D,): sum dout over all the leading dimensions, not only the first."""
    check_grad(sub, "dbias", shape, seed=10 + len(shape))


@points(0.5)
@pytest.mark.parametrize("shape", [(5, 4), (2, 1, 3, 4)])
def test_dweight_is_dout_times_x_hat_summed_over_every_leading_dimension(sub, shape):
    """dweight has shape (D,): sum dout * x_hat (the normalized input) over all the leading dimensions."""
    check_grad(sub, "dweight", shape, seed=20 + len(shape))


@points(1.25)
@given(rows=st.integers(1, 5), d=st.integers(2, 24), seed=st.integers(0, 2**16),
       scale=st.sampled_from([0.1, 1.0, 30.0]))
@FEWER
def test_dx_matches_autograd_in_float64(sub, rows, d, seed, scale):
    """dx needs three terms: the direct one, one from the mean and one from the variance depending on every x of the
    row; and g = dout * weight."""
    check_grad(sub, "dx", (rows, d), seed, scale=scale)


@points(0.5)
@pytest.mark.parametrize("shape", [(2, 3, 6), (2, 1, 3, 5)])
def test_dx_works_for_any_number_of_leading_dimensions(sub, shape):
    """dx has the shape of x, whatever its leading dimensions: take the row statistics over the last dimension only."""
    check_grad(sub, "dx", shape, seed=30 + len(shape))


@points(0.25)
def test_nearly_constant_rows_give_finite_output_and_gradients(sub):
    """Rows of (nearly) equal values must not give NaN or inf: eps goes inside the square root, sqrt(var + eps)."""
    x, w, b = inputs((3, 8), seed=40, scale=1e-3, offset=3.0, dtype=torch.float64)
    x[0] = 3.0  # one row exactly constant
    dout = upstream((3, 8), seed=41)
    out, _ = forward(sub, x, w, b)
    dx, dweight, dbias = backward(sub, x, w, b, dout)
    want = expected_grads(x, w, b, dout)
    mistakes = {"the output": forward_mistakes(x, w, b, 1e-5), "dx": backward_mistakes(x, w, b, dout, 1e-5, "dx"),
                "dweight": backward_mistakes(x, w, b, dout, 1e-5, "dweight")}
    for what, got, ref in (("the output", out, expected(x, w, b)), ("dx", dx, want[0]), ("dweight", dweight, want[1])):
        if isinstance(got, torch.Tensor) and not torch.isfinite(got).all():
            fail_naming(f"{what} on nearly constant rows contains NaN or inf", got, mistakes[what], atol=1e-6)
        assert_close(got, ref, f"{what} on nearly constant rows", atol=1e-6, mistakes=mistakes[what])


@points(0.25)
def test_uses_the_eps_argument(sub):
    """Use the eps you are given, in the forward and in the backward (keep it in the cache if you need it there)."""
    x, w, b = inputs((4, 8), seed=50, scale=0.05, dtype=torch.float64)
    dout = upstream((4, 8), seed=51)
    out, _ = forward(sub, x, w, b, 0.1)
    assert_close(out, expected(x, w, b, 0.1), "layer_norm_forward with a non-default eps", atol=1e-8,
                 mistakes=forward_mistakes(x, w, b, 0.1))
    assert_close(backward(sub, x, w, b, dout, 0.1)[0], expected_grads(x, w, b, dout, 0.1)[0],
                 "dx with a non-default eps", atol=1e-8, mistakes=backward_mistakes(x, w, b, dout, 0.1, "dx"))


@points(0.25)
def test_leaves_its_inputs_unchanged(sub):
    """Neither function may modify its arguments in place: no -=, *=, or methods ending in _ on x, weight, bias or
    dout."""
    x, w, b = inputs((3, 5), seed=60, scale=2.0, offset=1.0, dtype=torch.float64)
    dout = upstream((3, 5), seed=61)
    result = sub.run("layer_norm_forward", x, w, b, 1e-5, no_grad=True, return_args=True)
    for name, before, after in zip(("x", "weight", "bias"), (x, w, b), result.args_after):
        if not torch.equal(before, after):
            fail(f"layer_norm_forward changed {name} in place")
    if not isinstance(result.value, (tuple, list)) or len(result.value) != 2:
        fail("layer_norm_forward should return a pair (out, cache)")
    after = sub.run("layer_norm_backward", dout, result.value[1], no_grad=True, return_args=True).args_after
    if not torch.equal(dout, after[0]):
        fail("layer_norm_backward changed dout in place")
