"""Task 1: rms_norm(x, weight, eps=1e-6), with float32 statistics for half-precision inputs (6 points)."""

import pytest
import torch
from hypothesis import given, strategies as st

from autograder.checks import SETTINGS, Diagnosis, assert_close, fail, fail_naming, points
from autograder.suites.ex5_rmsnorm.common import expected, expected_grads, expected_llama, inputs
from autograder.suites.ex5_rmsnorm.mistakes import forward_mistakes, gradient_mistakes, half_mistakes

PART = "rms_norm"
TITLE = "Task 1: rms_norm"
FORBIDDEN = {"rms_norm", "layer_norm"}


def ulps_off(actual: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """How many units in the last place of ``want``'s (half) dtype each element of ``actual`` is off by."""
    magnitude = want.abs()
    spacing = torch.nextafter(magnitude, torch.full_like(magnitude, float("inf"))) - magnitude
    return (actual.to(want.dtype).double() - want.double()).abs() / spacing.double()


def ulps_off_either(actual: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Per element, the units in the last place by which ``actual`` misses the nearer of the two right orders:
    the weight applied in float32 before one cast, or LLaMA's cast back then weight."""
    return torch.minimum(ulps_off(actual, expected(x, w)), ulps_off(actual, expected_llama(x, w)))


def fail_half(message: str, actual, x, w):
    """Fail with ``message``, naming the wrong way of treating a half-precision input that ``actual`` equals."""
    for description, wrong in half_mistakes(x, w):
        if ulps_off(actual, wrong).max().item() <= 1:
            raise Diagnosis(f"{message}: {description}")
    fail(message)


def half_result(sub, x, w, what):
    """The learner's result on a half-precision input, as a finite tensor of x's shape (dtype checked elsewhere)."""
    out = sub.call("rms_norm", x, w, 1e-6)
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        fail(f"{what} should return a tensor of the input's shape")
    if not torch.isfinite(out).all():
        fail_half(f"{what} contains NaN or inf: the squares overflow unless you compute in float32", out, x, w)
    return out


@points(1.5)
@given(rows=st.integers(1, 6), d=st.integers(2, 40), seed=st.integers(0, 2**16),
       scale=st.sampled_from([0.1, 1.0, 30.0]), dtype=st.sampled_from([torch.float32, torch.float64]))
@SETTINGS
def test_matches_torch_on_random_rows(sub, rows, d, seed, scale, dtype):
    """Divide by the root of the MEAN of the squares over the last dimension (no mean subtracted), then multiply by
    weight; keep float32/float64 inputs in their dtype."""
    x, w = inputs((rows, d), seed, scale, offset=scale, dtype=dtype)
    assert_close(sub.call("rms_norm", x, w, 1e-6), expected(x, w), "rms_norm on a 2-D input",
                 atol=1e-4 if dtype == torch.float32 else 1e-9, mistakes=forward_mistakes(x, w))


@points(0.5)
@pytest.mark.parametrize("shape", [(7,), (2, 3, 6), (2, 1, 3, 5)])
def test_works_for_any_number_of_leading_dimensions(sub, shape):
    """Normalize over the last dimension only, whatever the leading ones: avoid hard-coding 2-D shapes."""
    x, w = inputs(shape, seed=len(shape), offset=0.5)
    assert_close(sub.call("rms_norm", x, w, 1e-6), expected(x, w), f"rms_norm on a {len(shape)}-D input", atol=1e-4,
                 mistakes=forward_mistakes(x, w))


@points(0.5)
def test_tiny_and_all_zero_rows_keep_eps_inside_the_root(sub):
    """Rows of tiny values (and all zeros) must give finite, correct numbers: add eps to the mean square, inside the
    square root."""
    x, w = inputs((4, 8), seed=11, scale=1e-3, dtype=torch.float64)
    x[0] = 0.0
    out = sub.call("rms_norm", x, w, 1e-6)
    if isinstance(out, torch.Tensor) and not torch.isfinite(out).all():
        fail_naming("rms_norm on an all-zero row gives NaN or inf", out, forward_mistakes(x, w), atol=1e-6)
    assert_close(out, expected(x, w), "rms_norm on rows of tiny values", atol=1e-6, mistakes=forward_mistakes(x, w))


@points(0.25)
def test_uses_the_eps_argument(sub):
    """Use the eps you are given, not a constant."""
    x, w = inputs((4, 8), seed=5, scale=0.05)
    assert_close(sub.call("rms_norm", x, w, 0.1), expected(x, w, 0.1), "rms_norm with a non-default eps", atol=1e-4,
                 mistakes=forward_mistakes(x, w, 0.1))


@points(0.25)
def test_leaves_its_inputs_unchanged(sub):
    """Do not modify x or weight in place (no -=, /=, or methods ending in _)."""
    x, w = inputs((3, 5), seed=3, scale=2.0, offset=1.0)
    result = sub.run("rms_norm", x, w, 1e-6, return_args=True)
    for name, before, after in zip(("x", "weight"), (x, w), result.args_after):
        if not torch.equal(before, after):
            fail(f"rms_norm changed {name} in place")


@points(1)
@pytest.mark.parametrize("shape", [(3, 6), (2, 3, 5)])
def test_gradients_match_torch_in_float64(sub, shape):
    """Build the output from differentiable tensor operations (no .item(), .data, .detach() or numpy inside), and keep
    float64 in float64."""
    x, w = inputs(shape, seed=7, scale=2.0, offset=1.0, dtype=torch.float64)
    dout = torch.randn(shape, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    result = sub.run("rms_norm", x, w, 1e-6, grad_wrt=(0, 1), dout=dout)
    for index, (name, got, want) in enumerate(zip(("x", "weight"), result.grads, expected_grads(x, w, dout))):
        if got is None:
            fail(f"no gradient flows back to {name}")
        assert_close(got, want, f"the gradient with respect to {name}", atol=1e-8, rtol=1e-7,
                     mistakes=gradient_mistakes(x, w, dout, 1e-6, index))


@points(0.75)
@pytest.mark.parametrize("scale, seed", [(300.0, 21), (1e-3, 22)])
def test_float16_statistics_are_computed_in_float32(sub, scale, seed):
    """float16 cannot hold the squares of values above 256 (nor of tiny values, accurately): convert x to float32,
    compute the statistics and the normalization there, then convert back to float16 (before or after multiplying
    by the weight)."""
    x, w = inputs((6, 32), seed, scale=scale, offset=scale / 2, dtype=torch.float16)
    what = "rms_norm on float16 values with large squares" if scale > 1 else "rms_norm on tiny float16 values"
    out = half_result(sub, x, w, what)
    off = ulps_off_either(out, x, w).max().item()
    if off > 1:
        fail_half(f"{what} is off by up to {off:.3g} units in the last place of float16", out, x, w)


@points(0.75)
def test_bfloat16_is_normalized_in_float32_and_rounded_once(sub):
    """bfloat16 keeps 8 bits of precision: computed in bfloat16, every step rounds; normalize in float32 and round
    the normalized value once, when you cast back (the weight here is a power of two, so multiplying by it after the
    cast, as LLaMA does, adds no rounding)."""
    x, _ = inputs((8, 64), seed=13, scale=2.0, offset=1.0, dtype=torch.bfloat16)
    g = torch.Generator().manual_seed(14)
    w = (2.0 ** torch.randint(-1, 2, (64,), generator=g)).to(torch.bfloat16)  # exact in any precision
    what = "rms_norm on bfloat16 input"
    out = half_result(sub, x, w, what)
    off = ulps_off_either(out, x, w)
    if off.max().item() > 1:
        fail_half(f"{what} is off by up to {off.max().item():.3g} units in the last place of bfloat16", out, x, w)
    wrong = (off > 0).double().mean().item()
    if wrong > 0.05:
        fail_half(f"{what} is rounded differently from a float32 computation in {wrong:.0%} of the elements", out,
                  x, w)


@points(0.5)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_input_gives_output_of_the_same_dtype(sub, dtype):
    """Return the result in x.dtype: convert back at the end, after computing in float32."""
    x, w = inputs((3, 8), seed=17, dtype=dtype)
    out = sub.call("rms_norm", x, w, 1e-6)
    if not isinstance(out, torch.Tensor):
        fail("rms_norm should return a tensor")
    if out.dtype != dtype:
        fail(f"a {dtype} input gave a {out.dtype} output, expected {dtype}")
