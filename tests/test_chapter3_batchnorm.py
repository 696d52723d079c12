"""Chapter 3's claims: the 2x4 example, BatchNorm's running statistics, and batch dependence.

Reference values are computed with the standard library, so a mistake shared by the
chapter and PyTorch could not hide behind the comparison.
"""

import math
import re
import statistics

import jupytext
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

STEM = "03_batchnorm_vs_layernorm"
EPS = 1e-5  # nn.BatchNorm1d's and nn.LayerNorm's default
MOMENTUM = 0.1  # nn.BatchNorm1d's default: the weight of the new batch
BATCH_2X4 = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]  # seed 001
BATCH_3X4 = [[2.0, 0.0, 4.0, 1.0], [0.0, 2.0, 2.0, 3.0], [1.0, 1.0, 0.0, 8.0]]


def parse_vector(text):
    return [float(v) for v in text.strip("'\"[] ").split(",")]


def columns(rows):
    return [list(column) for column in zip(*rows)]


def normalize(values, eps=EPS):
    """(v - mean) / sqrt(biased variance + eps), for one group of numbers."""
    mu = statistics.fmean(values)
    sigma = math.sqrt(statistics.pvariance(values, mu) + eps)
    return [(v - mu) / sigma for v in values]


def running_stats_by_hand(batches, momentum=MOMENTUM, unbiased=True):
    """running_mean, running_var after training steps on `batches`, from 0 and 1."""
    n_features = len(batches[0][0])
    mean, var = [0.0] * n_features, [1.0] * n_features
    for rows in batches:
        for j, column in enumerate(columns(rows)):
            batch_var = statistics.variance(column) if unbiased else statistics.pvariance(column)
            mean[j] = (1 - momentum) * mean[j] + momentum * statistics.fmean(column)
            var[j] = (1 - momentum) * var[j] + momentum * batch_var
    return mean, var


@pytest.fixture(scope="module")
def chapter_batchnorm(repo):
    """The chapter's own BatchNorm class, taken from its code cell."""
    notebook = jupytext.read(repo / "chapters" / f"{STEM}.md")
    source = next(cell.source for cell in notebook.cells
                  if cell.cell_type == "code" and "class BatchNorm(nn.Module)" in cell.source)
    namespace = {"torch": torch, "nn": torch.nn}
    exec(source, namespace)
    return namespace["BatchNorm"]


# The 2x4 example


@pytest.mark.parametrize("row", [0, 1])
def test_2x4_batchnorm_normalizes_each_column(glued, row):
    by_column = [normalize(column) for column in columns(BATCH_2X4)]
    expected = [by_column[j][row] for j in range(4)]
    assert parse_vector(glued[f"bn_2x4_row{row}"]) == pytest.approx(expected, abs=5e-5)


@pytest.mark.parametrize("row", [0, 1])
def test_2x4_layernorm_normalizes_each_row(glued, row):
    assert parse_vector(glued[f"ln_2x4_row{row}"]) == pytest.approx(normalize(BATCH_2X4[row]),
                                                                    abs=5e-5)


def test_2x4_statistics_are_column_and_row_statistics(glued):
    assert parse_vector(glued["bn_col_mean"]) == [statistics.fmean(c) for c in columns(BATCH_2X4)]
    assert parse_vector(glued["bn_col_var"]) == [statistics.pvariance(c) for c in columns(BATCH_2X4)]
    assert parse_vector(glued["ln_row_mean"]) == [statistics.fmean(r) for r in BATCH_2X4]
    assert parse_vector(glued["ln_row_var"]) == [statistics.pvariance(r) for r in BATCH_2X4]


def test_2x4_batchnorm_magnitude_shows_eps_inside_the_root(glued):
    assert float(glued["bn_2x4_magnitude"]) == pytest.approx(2 / math.sqrt(4 + EPS), abs=1e-12)


# Running statistics


@pytest.mark.parametrize("steps", [1, 2])
def test_running_stats_are_the_unbiased_momentum_update(glued, steps):
    mean, var = running_stats_by_hand([BATCH_2X4, BATCH_3X4][:steps])
    digits = 5e-3 if steps == 1 else 5e-5  # glued with 2 and 4 decimals
    assert parse_vector(glued[f"step{steps}_running_mean"]) == pytest.approx(mean, abs=digits)
    assert parse_vector(glued[f"step{steps}_running_var"]) == pytest.approx(var, abs=digits)


@pytest.mark.parametrize("steps", [1, 2])
def test_running_var_is_not_the_biased_update(glued, steps):
    _, biased = running_stats_by_hand([BATCH_2X4, BATCH_3X4][:steps], unbiased=False)
    glued_var = parse_vector(glued[f"step{steps}_running_var"])
    assert all(abs(g - b) > 0.1 for g, b in zip(glued_var, biased))


@settings(max_examples=40, deadline=None)
@given(
    batch_sizes=st.lists(st.integers(min_value=2, max_value=9), min_size=1, max_size=4),
    features=st.integers(min_value=1, max_value=5),
    momentum=st.floats(min_value=0.01, max_value=0.99),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_chapter_batchnorm_stores_the_unbiased_variance(chapter_batchnorm, batch_sizes, features,
                                                        momentum, seed):
    generator = torch.Generator().manual_seed(seed)
    batches = [3 * torch.randn(n, features, generator=generator, dtype=torch.float64) + 1
               for n in batch_sizes]
    bn = chapter_batchnorm(features, momentum=momentum).double()
    with torch.no_grad():
        for x in batches:
            bn(x)
    mean, var = running_stats_by_hand([x.tolist() for x in batches], momentum=momentum)
    assert bn.running_mean.tolist() == pytest.approx(mean, rel=1e-9, abs=1e-12)
    assert bn.running_var.tolist() == pytest.approx(var, rel=1e-9)


def test_scratch_batchnorm_matches_torch_to_float32_precision(glued):
    assert 0.0 <= float(glued["scratch_bn_worst_diff"]) < 1e-5


@pytest.mark.parametrize("n", [2, 4, 8, 32])
def test_biased_running_var_settles_at_n_minus_1_over_n(glued, n):
    assert float(glued[f"correct_var_ratio_n{n}"]) == pytest.approx(1.0, abs=0.05)
    assert float(glued[f"biased_var_ratio_n{n}"]) == pytest.approx((n - 1) / n, abs=0.05)


@pytest.mark.parametrize("n", [2, 4])
def test_biased_running_var_inflates_eval_outputs(glued, n):
    assert float(glued[f"biased_eval_std_n{n}"]) > float(glued[f"correct_eval_std_n{n}"]) + 0.1


def test_reversed_momentum_makes_the_running_mean_noisier(glued):
    assert float(glued["momentum_noise_ratio"]) > 2.0


# Batch dependence: exactly zero for LayerNorm, clearly positive for BatchNorm

DEPENDENCE = ["companion", "alone", "padding", "padding_128", "future_leak"]


def dependence_name(norm, kind):
    return f"{norm}_{kind}" if kind == "future_leak" else f"{norm}_{kind}_max_abs_diff"


@pytest.mark.parametrize("kind", DEPENDENCE)
def test_layernorm_output_difference_is_exactly_zero(glued, kind):
    assert float(glued[dependence_name("layernorm", kind)]) == 0.0


def test_layernorm_padding_difference_is_zero_at_every_length(glued):
    assert float(glued["layernorm_padding_worst"]) == 0.0


@pytest.mark.parametrize("kind", DEPENDENCE)
def test_batchnorm_output_difference_is_positive(glued, kind):
    assert float(glued[dependence_name("batchnorm", kind)]) > 1e-3


def test_more_padding_changes_batchnorm_output_more(glued):
    assert float(glued["batchnorm_padding_128_max_abs_diff"]) > float(
        glued["batchnorm_padding_max_abs_diff"])


# Small batches (the claims the prose makes about the measured trend)


def test_batchnorm_error_rises_as_the_batch_shrinks(glued):
    assert float(glued["error_bn_b2"]) > float(glued["error_bn_b4"]) > float(glued["error_bn_b32"])
    assert float(glued["error_bn_b2"]) > float(glued["error_bn_b32"]) + 0.05


@pytest.mark.parametrize("other", ["ln", "gn"])
def test_batch_independent_norms_beat_batchnorm_at_batch_size_2(glued, other):
    assert float(glued[f"error_{other}_b2"]) < float(glued["error_bn_b2"]) - 0.05


@pytest.mark.parametrize("other", ["ln", "gn"])
def test_batch_independent_norms_are_flat_across_batch_sizes(glued, other):
    assert float(glued[f"error_{other}_spread"]) < 0.05


@pytest.mark.parametrize("norm", ["bn", "ln", "gn"])
def test_no_model_beats_the_bayes_error(glued, norm):
    errors = [float(glued[f"error_{norm}_b{b}"]) for b in (2, 4, 8, 16, 32)]
    assert min(errors) > float(glued["bayes_error"])


def test_two_sample_batchnorm_outputs_are_nearly_plus_or_minus_one(glued):
    assert float(glued["pair_fraction_near_one"]) > 0.9


# CNNs


def test_folded_conv_equals_conv_then_batchnorm(glued):
    assert float(glued["fold_max_abs_diff"]) < 1e-4


@pytest.mark.parametrize(
    "name",
    ["bn_2x4_row0", "bn_2x4_row1", "ln_2x4_row0", "step1_running_var", "step2_running_var",
     "scratch_bn_worst_diff", "biased_eval_std_n2", "momentum_noise_ratio",
     "batchnorm_companion_max_abs_diff", "layernorm_companion_max_abs_diff",
     "batchnorm_padding_max_abs_diff", "layernorm_padding_worst", "error_bn_b2", "error_bn_b32",
     "error_ln_b2", "error_gn_b2", "layernorm_future_leak", "fold_max_abs_diff",
     # words chosen by the measurement, never typed
     "wu_he_verdict", "ln_gn_flat", "bayes_verdict", "large_batch_verdict",
     "momentum_prediction_verdict", "bn_error_change", "ln_gn_flat_summary"],
)
def test_glued_number_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)


def test_contrast_table_is_shown(prose):
    assert "```{glue:md} contrast_table" in prose


def test_exercise_follows_the_summary_and_links_the_ex3_release(prose):
    assert prose.index("## Summary") < prose.index("## Exercise")
    exercise = prose[prose.index("## Exercise"):]
    assert "exercises/ex3_batchnorm/ex3_batchnorm.ipynb" in exercise
