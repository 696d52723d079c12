"""Task 1: batch_norm_forward and batch_norm_backward, gradients by hand (5 points).

Both are called under torch.no_grad(), as the contract says: autograd is forbidden, and so is
every PyTorch batch-norm implementation. The cache travels from the forward to the backward
through the grader, as plain values and tensors (objects that are not plain stay in the worker
and come back as themselves). Expected values come from training-mode F.batch_norm in float64,
here in the trusted process.
"""

import pytest
import torch
from hypothesis import given, settings, strategies as st

from autograder.checks import Handle, SETTINGS, assert_close, call_backward, call_forward, fail, fail_naming, points
from autograder.suites.ex6_beyond_norm.common import (NORM_FAMILY, TOLERANCE, assert_relative, batch, expected,
                                                      expected_grads, randn)
from autograder.suites.ex6_beyond_norm.mistakes import backward_mistakes, forward_mistakes

PART = "batch_norm_forward_backward"
TITLE = "Task 1: batch_norm_forward and batch_norm_backward"
FORBIDDEN = NORM_FAMILY | {"autograd"}

GRAD_NAMES = ("dx", "dgamma", "dbeta")

# (N, D) batches with N >= 2, so that a column has a variance. No trailing dimension of size 1 (the wire cannot
# yet send back a tensor whose last dimension has size 1 and a stride other than 1).
shapes = st.tuples(st.integers(2, 12), st.integers(2, 10))
scales = st.sampled_from([0.1, 1.0, 30.0])

# Each example costs two calls into the worker (forward, then backward).
FEWER = settings(SETTINGS, max_examples=8)


def forward(sub, x, gamma, beta, eps=1e-5):
    """(out, cache) from the learner's batch_norm_forward."""
    return call_forward(sub, "batch_norm_forward", x, gamma, beta, eps)


def backward(sub, x, gamma, beta, dout, eps=1e-5):
    """(dx, dgamma, dbeta) from the learner's backward, fed with the cache of their forward."""
    _, cache = forward(sub, x, gamma, beta, eps)
    return call_backward(sub, "batch_norm_backward", dout, cache, GRAD_NAMES)


def check_grad(sub, name, shape, seed, scale=2.0, eps=1e-5):
    x, gamma, beta = batch(shape, seed, scale, torch.float64)
    dout = randn(shape, seed + 1, torch.float64)
    got = backward(sub, x, gamma, beta, dout, eps)[GRAD_NAMES.index(name)]
    want = expected_grads(x, gamma, beta, dout, eps)[GRAD_NAMES.index(name)]
    assert_relative(got, want, f"{name} for an input of shape {shape}",
                    mistakes=backward_mistakes(x, gamma, dout, eps, name))


def unchanged(before, after) -> bool:
    """Whether a (nested) cache came back as it went in: same tensors, same plain values, same handles."""
    if isinstance(before, torch.Tensor):
        return isinstance(after, torch.Tensor) and before.shape == after.shape and before.dtype == after.dtype \
            and torch.equal(before, after)
    if isinstance(before, (tuple, list)):
        return isinstance(after, (tuple, list)) and len(before) == len(after) and all(
            unchanged(b, a) for b, a in zip(before, after))
    if isinstance(before, dict):
        return isinstance(after, dict) and before.keys() == after.keys() and all(
            unchanged(before[k], after[k]) for k in before)
    if isinstance(before, Handle) or before is None or type(before) in (bool, int, float, str):
        return before == after
    return True


@points(1)
@given(shape=shapes, seed=st.integers(0, 2**16), scale=scales, dtype=st.sampled_from([torch.float32, torch.float64]))
@FEWER
def test_forward_matches_torch_in_training_mode(sub, shape, seed, scale, dtype):
    """The forward output is training-mode BatchNorm: each column (feature) normalized with its mean and biased
    variance over the batch (dimension 0, divide by N), then multiplied by gamma and shifted by beta."""
    x, gamma, beta = batch(shape, seed, scale, dtype)
    out, _ = forward(sub, x, gamma, beta)
    assert_close(out, expected(x, gamma, beta), f"batch_norm_forward's output on an input of shape {shape}",
                 **({"atol": 1e-4, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 1e-9, "rtol": 1e-9}),
                 mistakes=forward_mistakes(x, gamma, beta))


@points(0.5)
@pytest.mark.parametrize("shape", [(5, 3), (2, 7)])
def test_dbeta_is_dout_summed_over_the_batch(sub, shape):
    """dbeta has shape (D,): sum dout over the batch, dimension 0."""
    check_grad(sub, "dbeta", shape, seed=10 + shape[0])


@points(0.5)
@pytest.mark.parametrize("shape", [(5, 3), (2, 7)])
def test_dgamma_is_dout_times_x_hat_summed_over_the_batch(sub, shape):
    """dgamma has shape (D,): sum dout * x_hat (the normalized input) over the batch, dimension 0."""
    check_grad(sub, "dgamma", shape, seed=20 + shape[0])


@points(1.75)
@given(shape=shapes, seed=st.integers(0, 2**16), scale=scales)
@FEWER
def test_dx_matches_autograd_in_float64(sub, shape, seed, scale):
    """dx has three parts: the direct path through x - mean, one through the mean and one through the variance,
    both of which depend on every x of the column; and the gradient reaching x_hat is dout * gamma."""
    check_grad(sub, "dx", shape, seed, scale=scale)


@points(0.25)
def test_dx_for_a_batch_of_two(sub):
    """With N = 2 each normalized value is +1 or -1 (up to eps): dx must still match, using the N of the batch."""
    check_grad(sub, "dx", (2, 5), seed=30)


@points(0.25)
def test_nearly_constant_columns_give_finite_output_and_gradients(sub):
    """Columns of (nearly) equal values must not give NaN or inf: eps goes inside the square root,
    sqrt(var + eps)."""
    x, gamma, beta = batch((8, 4), seed=40, dtype=torch.float64)
    x[:, 0] = 3.0  # a constant column
    x[:, 1] = 3.0 + 1e-3 * randn((8,), 41, torch.float64)  # a nearly constant one
    dout = randn((8, 4), 42, torch.float64)
    out, _ = forward(sub, x, gamma, beta)
    dx, dgamma, _ = backward(sub, x, gamma, beta, dout)
    want = expected_grads(x, gamma, beta, dout)
    mistakes = {"the output": forward_mistakes(x, gamma, beta), "dx": backward_mistakes(x, gamma, dout, 1e-5, "dx"),
                "dgamma": backward_mistakes(x, gamma, dout, 1e-5, "dgamma")}
    for what, got, ref in (("the output", out, expected(x, gamma, beta)), ("dx", dx, want[0]),
                           ("dgamma", dgamma, want[1])):
        if isinstance(got, torch.Tensor) and not torch.isfinite(got).all():
            fail_naming(f"{what} on nearly constant columns contains NaN or inf", got, mistakes[what], atol=1e-8)
        assert_relative(got, ref, f"{what} on nearly constant columns", mistakes=mistakes[what])


@points(0.25)
def test_uses_the_eps_argument(sub):
    """Use the eps you are given, in the forward and in the backward (keep it in the cache if you need it there)."""
    x, gamma, beta = batch((6, 4), seed=50, scale=0.05, dtype=torch.float64)
    dout = randn((6, 4), 51, torch.float64)
    out, _ = forward(sub, x, gamma, beta, 0.1)
    assert_close(out, expected(x, gamma, beta, 0.1), "batch_norm_forward with a non-default eps",
                 **TOLERANCE[torch.float64], mistakes=forward_mistakes(x, gamma, beta, 0.1))
    assert_relative(backward(sub, x, gamma, beta, dout, 0.1)[0], expected_grads(x, gamma, beta, dout, 0.1)[0],
                    "dx with a non-default eps", mistakes=backward_mistakes(x, gamma, dout, 0.1, "dx"))


@points(0.25)
def test_forward_leaves_x_gamma_and_beta_unchanged(sub):
    """batch_norm_forward may not modify its arguments in place: no -=, *=, or methods ending in _ on x, gamma or
    beta."""
    x, gamma, beta = batch((5, 3), seed=60, scale=2.0, dtype=torch.float64)
    result = sub.run("batch_norm_forward", x, gamma, beta, 1e-5, no_grad=True, return_args=True)
    for name, before, after in zip(("x", "gamma", "beta"), (x, gamma, beta), result.args_after):
        if not torch.equal(before, after):
            fail(f"batch_norm_forward changed {name} in place")


@points(0.25)
def test_backward_leaves_dout_and_the_cache_unchanged(sub):
    """batch_norm_backward may not modify dout or the tensors of the cache in place (dout *= gamma, x_hat.mul_(...)):
    compute new tensors instead."""
    x, gamma, beta = batch((5, 3), seed=70, scale=2.0, dtype=torch.float64)
    dout = randn((5, 3), 71, torch.float64)
    _, cache = forward(sub, x, gamma, beta)
    after = sub.run("batch_norm_backward", dout, cache, no_grad=True, return_args=True).args_after
    if not torch.equal(dout, after[0]):
        fail("batch_norm_backward changed dout in place")
    if not unchanged(cache, after[1]):
        fail("batch_norm_backward changed the cache in place")
