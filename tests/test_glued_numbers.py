"""The numbers glued into the chapters equal an independent computation.

The reference values are computed here with the standard library only, so a
bug shared by the chapter and PyTorch could not hide behind the comparison.
"""

import math
import re
import statistics

import pytest

STEM = "02_layer_normalization"
EPS = 1e-5  # nn.LayerNorm's default


def layer_norm_by_hand(values, eps=EPS):
    mu = statistics.fmean(values)
    var = statistics.pvariance(values, mu)  # biased: divide by D
    sigma = math.sqrt(var + eps)  # eps inside the square root
    return mu, var, sigma, [(v - mu) / sigma for v in values]


def parse_vector(text):
    return [float(v) for v in text.strip("'\"[] ").split(",")]


WORKED_EXAMPLES = {
    "ln5": [10.0, -5.0, 2.0, 8.0, -3.0],  # seed 000
    "ln4": [2.0, 4.0, 6.0, 8.0],  # seed 001
}


@pytest.mark.parametrize("prefix", WORKED_EXAMPLES)
def test_worked_example_mean_and_biased_variance(glued, prefix):
    mu, var, _, _ = layer_norm_by_hand(WORKED_EXAMPLES[prefix])
    assert float(glued[f"{prefix}_mu"]) == pytest.approx(mu, abs=1e-6)
    assert float(glued[f"{prefix}_var"]) == pytest.approx(var, abs=1e-6)


def test_worked_example_has_mu_2_4_and_var_34_64(glued):
    assert float(glued["ln5_mu"]) == pytest.approx(2.4, abs=1e-6)
    assert float(glued["ln5_var"]) == pytest.approx(34.64, abs=1e-6)


def test_worked_example_sigma_has_eps_inside_the_square_root(glued):
    _, _, sigma, _ = layer_norm_by_hand(WORKED_EXAMPLES["ln5"])
    assert float(glued["ln5_sigma"]) == pytest.approx(sigma, abs=1e-9)


@pytest.mark.parametrize("prefix", WORKED_EXAMPLES)
def test_worked_example_normalized_vector(glued, prefix):
    *_, xhat = layer_norm_by_hand(WORKED_EXAMPLES[prefix])
    assert parse_vector(glued[f"{prefix}_xhat"]) == pytest.approx(xhat, abs=5e-4)


def test_add_and_norm_example_uses_corrected_arithmetic(glued):
    x, sublayer = [1.0, 2.0, 3.0, 4.0], [0.5, -0.3, 0.2, 0.1]
    total = [a + b for a, b in zip(x, sublayer)]
    mu, var, _, xhat = layer_norm_by_hand(total)
    assert parse_vector(glued["addnorm_sum"]) == pytest.approx(total, abs=0.05)
    assert float(glued["addnorm_mu"]) == pytest.approx(mu, abs=1e-6)
    assert float(glued["addnorm_var"]) == pytest.approx(var, abs=1e-6)
    assert float(glued["addnorm_var"]) != pytest.approx(1.359, abs=1e-3)  # seed 001's wrong value
    assert parse_vector(glued["addnorm_xhat"]) == pytest.approx(xhat, abs=5e-4)


def test_scratch_layer_norm_matches_torch_to_float32_precision(glued):
    assert 0.0 <= float(glued["scratch_max_abs_diff"]) < 1e-5


def test_explorer_function_matches_torch_layer_norm_to_float64_rounding(glued):
    assert 0.0 <= float(glued["explorer_torch_max_abs_diff"]) < 1e-12


def test_injected_instability_leaves_less_of_the_identity_in_the_normalized_vector(glued):
    assert float(glued["explorer_cos_unstable"]) < float(glued["explorer_cos_stable"]) - 0.1


@pytest.mark.parametrize(
    "name",
    ["ln5_mu", "ln5_var", "ln5_sigma", "ln5_xhat", "ln4_mu", "ln4_var", "ln4_xhat",
     "addnorm_sum", "addnorm_mu", "addnorm_var", "addnorm_xhat", "scratch_max_abs_diff",
     "explorer_torch_max_abs_diff", "explorer_cos_stable", "explorer_cos_unstable"],
)
def test_glued_number_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)
