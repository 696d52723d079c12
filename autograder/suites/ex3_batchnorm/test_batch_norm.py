"""Task 1: batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5) (4 points)."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st

from autograder.checks import SETTINGS, assert_close, fail, fail_naming, points, single_threaded
from autograder.suites.ex3_batchnorm.mistakes import gradient_mistakes, mistakes
from autograder.suites.ex3_batchnorm.reference import TOLERANCE, expected, make_batch

PART = "batch_norm"
TITLE = "Task 1: batch_norm"
FORBIDDEN = {"batch_norm", "instance_norm"}

# (N, C) and (N, C, L) batches, N >= 2 so that training mode has a variance to take. No trailing dimension of
# size 1: autograder.wire cannot yet send back a tensor whose last dimension has size 1 and a stride other than 1
# (e.g. a correct output built by transposing or permuting back), so such shapes would fail correct code.
shapes = st.tuples(st.integers(2, 8), st.integers(2, 6), st.sampled_from([None, 2, 3, 7])).map(
    lambda s: s[:2] if s[2] is None else s)
scales = st.sampled_from([0.1, 1.0, 30.0])
dtypes = st.sampled_from([torch.float32, torch.float64])


def call(sub, batch, training, momentum=0.1, eps=1e-5, **options):
    return sub.run("batch_norm", *batch.args, training=training, momentum=momentum, eps=eps, **options)


@points(1)
@given(shape=shapes, seed=st.integers(0, 2**16), scale=scales, dtype=dtypes)
@SETTINGS
def test_training_output_matches_torch_for_2d_and_3d_batches(sub, shape, seed, scale, dtype):
    """In training mode normalize each channel with the mean and the biased variance (divide by n) of all its
    values in the batch: over N for (N, C) inputs, over N and L for (N, C, L) inputs. Then multiply by weight and
    add bias."""
    batch = make_batch(shape, seed, scale, dtype)
    out, _, _ = expected(*batch.args, training=True)
    assert_close(call(sub, batch, True).value, out, f"batch_norm on a {len(shape)}-D batch in training mode",
                 **TOLERANCE[dtype], mistakes=mistakes(batch.args, True, 0, dtype))


@points(1)
@given(shape=shapes, seed=st.integers(0, 2**16), scale=scales, dtype=dtypes,
       momentum=st.sampled_from([0.1, 0.25, 0.8]))  # not 0.9: a reversed momentum would then equal PyTorch's 0.1
@SETTINGS
def test_training_updates_the_running_stats_in_place_like_torch(sub, shape, seed, scale, dtype, momentum):
    """Update the caller's running_mean and running_var in place (e.g. .mul_() and .add_() under torch.no_grad()):
    new = (1 - momentum) * old + momentum * batch statistic, with the unbiased batch variance (divide by n - 1, n
    values per channel) for running_var."""
    batch = make_batch(shape, seed, scale, dtype)
    _, mean, var = expected(*batch.args, training=True, momentum=momentum)
    after = call(sub, batch, True, momentum=momentum, return_args=True).args_after
    for which, (name, before, got, wanted) in enumerate((("running_mean", batch.running_mean, after[3], mean),
                                                         ("running_var", batch.running_var, after[4], var)), 1):
        if isinstance(got, torch.Tensor) and torch.equal(got, before):
            fail(f"{name} did not change in training mode: update the caller's tensor in place, do not rebind it")
        assert_close(got, wanted, f"{name} after a training step", **TOLERANCE[dtype],
                     mistakes=mistakes(batch.args, True, which, dtype, momentum=momentum))


@points(0.5)
@pytest.mark.parametrize("shape", [(6, 3), (1, 4), (3, 2, 5)])
def test_eval_output_uses_the_running_stats(sub, shape):
    """In eval mode (training=False) normalize with running_mean and running_var, not with the batch's statistics
    (eval mode must also work for a batch of one sample)."""
    batch = make_batch(shape, seed=sum(shape), scale=2.0)
    out, _, _ = expected(*batch.args, training=False)
    assert_close(call(sub, batch, False).value, out, f"batch_norm on a {len(shape)}-D batch in eval mode",
                 **TOLERANCE[torch.float32], mistakes=mistakes(batch.args, False, 0, torch.float32))


@points(0.25)
@pytest.mark.parametrize("shape", [(6, 3), (3, 2, 5)])
def test_eval_mode_leaves_the_running_stats_unchanged(sub, shape):
    """In eval mode do not update running_mean or running_var."""
    batch = make_batch(shape, seed=7, scale=2.0)
    after = call(sub, batch, False, return_args=True).args_after
    for name, before, got in (("running_mean", batch.running_mean, after[3]),
                              ("running_var", batch.running_var, after[4])):
        if not torch.equal(got, before):
            fail(f"batch_norm changed {name} in eval mode")


@points(0.25)
@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 3)])
def test_constant_and_nearly_constant_channels_keep_eps_inside_the_root(sub, shape):
    """A channel whose values are (nearly) all equal must give finite numbers close to PyTorch's: divide by
    sqrt(variance + eps), with eps inside the square root."""
    batch = make_batch(shape, seed=3)
    g = torch.Generator().manual_seed(4)
    batch.x[:, 0] = 2.0  # a constant channel
    batch.x[:, 1] = 1e-3 * torch.randn(batch.x[:, 1].shape, generator=g)  # a nearly constant one
    out = call(sub, batch, True).value
    named = mistakes(batch.args, True, 0, torch.float32)
    if isinstance(out, torch.Tensor) and not torch.isfinite(out).all():
        fail_naming("batch_norm gives NaN or inf on a batch with a constant channel", out, named, atol=1e-3)
    assert_close(out, expected(*batch.args, training=True)[0], "batch_norm on (nearly) constant channels", atol=1e-3,
                 mistakes=named)


@points(0.25)
@pytest.mark.parametrize("training", [True, False])
def test_uses_the_eps_argument(sub, training):
    """Use the eps you are given, in both modes, not a constant."""
    batch = make_batch((6, 3, 2), seed=5, scale=0.1)
    out, _, _ = expected(*batch.args, training=training, eps=0.1)
    mode = "training" if training else "eval"
    assert_close(call(sub, batch, training, eps=0.1).value, out, f"batch_norm with a non-default eps in {mode} mode",
                 **TOLERANCE[torch.float32], mistakes=mistakes(batch.args, training, 0, torch.float32, eps=0.1))


@points(0.25)
@pytest.mark.parametrize("training", [True, False])
def test_leaves_x_weight_and_bias_unchanged(sub, training):
    """Do not modify x, weight or bias in place (no -=, /=, or methods ending in _ on them)."""
    batch = make_batch((5, 3, 2), seed=9, scale=2.0)
    after = call(sub, batch, training, return_args=True).args_after
    for name, before, got in zip(("x", "weight", "bias"), (batch.x, batch.weight, batch.bias), after):
        if not torch.equal(before, got):
            fail(f"batch_norm changed {name} in place")


@points(0.5)
@pytest.mark.parametrize("shape", [(6, 3), (3, 2, 4)])
def test_training_gradients_match_torch_in_float64(sub, shape):
    """In training mode gradients flow through the batch mean and variance too: compute the statistics you
    normalize with outside torch.no_grad(), without .detach(), .item() or .data (only the running-statistics
    update belongs under torch.no_grad())."""
    batch = make_batch(shape, seed=11, scale=2.0, dtype=torch.float64)
    dout = torch.randn(shape, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    result = call(sub, batch, True, grad_wrt=(0, 1, 2), dout=dout)
    leaves = [t.clone().requires_grad_() for t in (batch.x, batch.weight, batch.bias)]
    with single_threaded():
        out = F.batch_norm(leaves[0], batch.running_mean.clone(), batch.running_var.clone(), leaves[1], leaves[2],
                           True, 0.1, 1e-5)
        torch.autograd.backward(out, dout)
    for index, (name, got, leaf) in enumerate(zip(("x", "weight", "bias"), result.grads, leaves)):
        if got is None:
            fail(f"no gradient flows back to {name}")
        assert_close(got, leaf.grad, f"the gradient with respect to {name}", atol=1e-8, rtol=1e-6,
                     mistakes=gradient_mistakes(batch.args, dout, index))
