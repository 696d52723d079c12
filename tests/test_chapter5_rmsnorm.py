"""Chapter 5 (RMSNorm): the glued numbers agree with independent computations and with the papers.

The invariance table is recomputed here with NumPy, and the worked example with the standard library, so
that a mistake shared by the chapter and PyTorch could not hide behind the comparison.
"""

import ast
import math
import re
import statistics

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

STEM = "05_rmsnorm"

METHODS = ["BatchNorm", "WeightNorm", "LayerNorm", "RMSNorm"]
TRANSFORMS = [
    "weight matrix re-scaling",
    "weight matrix re-centering",
    "weight vector re-scaling",
    "dataset re-scaling",
    "dataset re-centering",
    "single training case re-scaling",
]
# Ba et al. (2016), Table 1, and Zhang & Sennrich (2019), Table 1: True = invariant.
PAPERS = {
    "BatchNorm": [True, False, True, True, True, False],
    "WeightNorm": [True, False, True, False, False, False],
    "LayerNorm": [True, True, False, True, False, True],
    "RMSNorm": [True, False, False, True, False, True],
}
CELLS = [(method, transform) for method in METHODS for transform in TRANSFORMS]


def slug(text):
    return text.lower().replace(" ", "_").replace("-", "")


def value(glued, name):
    """A glued value as a Python object (strings lose their quotes, booleans become bool)."""
    return ast.literal_eval(glued[name])


def parse_vector(text):
    return [float(v) for v in text.strip("'\"[] ").split(",")]


# --- the invariance table -------------------------------------------------------------------------


def normalized_summed_inputs(method, W, X):
    """The four methods of Ba et al. section 5.1, eps = 0, without gain and bias. W (H, D), X (N, D)."""
    a = X @ W.T  # (N, H)
    if method == "BatchNorm":  # each neuron over the cases
        return (a - a.mean(axis=0)) / a.std(axis=0)
    if method == "WeightNorm":  # no data statistics
        return X @ (W / np.linalg.norm(W, axis=1, keepdims=True)).T
    if method == "LayerNorm":  # each case over the neurons
        return (a - a.mean(axis=1, keepdims=True)) / a.std(axis=1, keepdims=True)
    if method == "RMSNorm":
        return a / np.sqrt((a**2).mean(axis=1, keepdims=True))
    raise ValueError(method)


def transformed(transform, W, X, rng):
    """Apply one of the papers' transformations with a random delta > 0 and a random gamma."""
    W, X = W.copy(), X.copy()
    delta = rng.uniform(0.2, 5.0)
    if transform == "weight matrix re-scaling":
        W = delta * W
    elif transform == "weight matrix re-centering":
        W = W + np.outer(np.ones(W.shape[0]), rng.normal(size=W.shape[1]))  # W + 1 gamma^T
    elif transform == "weight vector re-scaling":
        W[rng.integers(W.shape[0])] *= delta  # one neuron's incoming weights
    elif transform == "dataset re-scaling":
        X = delta * X
    elif transform == "dataset re-centering":
        X = X + rng.normal(size=X.shape[1])  # the same shift for every case
    elif transform == "single training case re-scaling":
        X[rng.integers(X.shape[0])] *= delta
    else:
        raise ValueError(transform)
    return W, X


def is_invariant(method, transform, trials=5):
    """Invariant if no random trial changes the normalized summed inputs beyond float64 rounding."""
    rng = np.random.default_rng(2016)
    for _ in range(trials):
        W, X = rng.normal(size=(6, 5)), rng.normal(size=(12, 5))
        before = normalized_summed_inputs(method, W, X)
        after = normalized_summed_inputs(method, *transformed(transform, W, X, rng))
        if np.abs(after - before).max() > 1e-9 * np.abs(before).max():
            return False
    return True


@pytest.mark.parametrize("method, transform", CELLS)
def test_invariance_cell_agrees_with_an_independent_numpy_computation(glued, method, transform):
    assert value(glued, f"inv_{slug(method)}_{slug(transform)}") is is_invariant(method, transform)


@pytest.mark.parametrize("method, transform", CELLS)
def test_invariance_cell_agrees_with_the_papers_table(glued, method, transform):
    expected = PAPERS[method][TRANSFORMS.index(transform)]
    assert value(glued, f"inv_{slug(method)}_{slug(transform)}") is expected


def test_rms_norm_is_not_invariant_to_rescaling_a_single_weight_vector(glued):
    assert value(glued, "inv_rmsnorm_weight_vector_rescaling") is False
    assert value(glued, "inv_rmsnorm_weight_matrix_rescaling") is True


def test_invariance_table_has_no_borderline_cell(glued):
    assert float(glued["inv_largest_invariant_change"]) < 1e-12
    assert float(glued["inv_smallest_broken_change"]) > 1e-3


def test_every_cell_agrees_with_the_papers(glued):
    assert int(glued["inv_cells_total"]) == len(CELLS)
    assert int(glued["inv_cells_agreeing"]) == len(CELLS)


# --- definition, worked example, from scratch -----------------------------------------------------


TOKEN = [3.0, 1.0, 4.0, 1.0, 5.0]


def test_worked_token_statistics_satisfy_mean_square_identity(glued):
    mu, var = statistics.fmean(TOKEN), statistics.pvariance(TOKEN)
    mean_square = statistics.fmean(v * v for v in TOKEN)
    assert float(glued["token_mu"]) == pytest.approx(mu, abs=1e-12)
    assert float(glued["token_sigma"]) == pytest.approx(math.sqrt(var), abs=1e-12)
    assert float(glued["token_rms"]) == pytest.approx(math.sqrt(mean_square), abs=1e-12)
    assert mean_square == pytest.approx(mu**2 + var)


def test_worked_token_normalized_both_ways(glued):
    mu, var = statistics.fmean(TOKEN), statistics.pvariance(TOKEN)
    mean_square = statistics.fmean(v * v for v in TOKEN)
    layer_norm = [(v - mu) / math.sqrt(var + 1e-5) for v in TOKEN]
    rms_norm = [v / math.sqrt(mean_square + 1e-6) for v in TOKEN]
    assert parse_vector(glued["token_ln"]) == pytest.approx(layer_norm, abs=5e-4)
    assert parse_vector(glued["token_rmsnorm"]) == pytest.approx(rms_norm, abs=5e-4)
    assert min(parse_vector(glued["token_rmsnorm"])) > 0  # no re-centering


def test_rms_norm_output_has_rms_one_but_keeps_the_mean(glued):
    assert float(glued["stats_rmsnorm_rms"]) == pytest.approx(1.0, abs=1e-3)
    assert float(glued["stats_rmsnorm_mean"]) == pytest.approx(2 / math.sqrt(13), abs=0.05)
    assert float(glued["stats_layernorm_abs_mean"]) < 1e-4
    assert float(glued["stats_layernorm_std"]) == pytest.approx(1.0, abs=1e-3)


def test_scratch_rms_norm_matches_f_rms_norm_and_nn_rmsnorm(glued):
    assert 0.0 <= float(glued["scratch_max_abs_diff"]) < 1e-6
    assert 0.0 <= float(glued["scratch_module_max_abs_diff"]) < 1e-6


def test_rms_norm_equals_layer_norm_on_zero_mean_rows_only(glued):
    assert float(glued["zero_mean_max_abs_diff"]) < 1e-5
    assert float(glued["offset_max_abs_diff"]) > 0.1


# --- epsilon --------------------------------------------------------------------------------------


def test_default_eps_is_float32_machine_epsilon(glued):
    assert float(glued["float32_eps"]) == torch.finfo(torch.float32).eps
    assert float(glued["effective_eps_float32"]) == pytest.approx(torch.finfo(torch.float32).eps, rel=1e-3)


def test_nn_rmsnorm_default_eps_is_float32_epsilon_measured_here():
    torch.manual_seed(0)
    x = 3e-4 * torch.randn(16, 32, dtype=torch.float64)
    eps = torch.finfo(torch.float32).eps
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    with torch.no_grad():
        got = nn.RMSNorm(32)(x.float()).double()
    assert nn.RMSNorm(32).eps is None
    assert (got - expected).abs().max().item() < 1e-5


def test_half_precision_input_uses_float32_epsilon_too(glued):
    assert float(glued["bf16_error_vs_float32_eps"]) < 0.02
    assert float(glued["bf16_error_vs_input_eps"]) > 0.5


def test_eps_choice_matters_only_for_small_rows(glued):
    assert float(glued["eps_diff_typical"]) < 1e-4
    assert float(glued["eps_diff_small"]) > 0.1


# --- half precision -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("statistic", ["max", "mean"])
def test_error_without_float32_statistics_exceeds_error_with_them(glued, dtype, statistic):
    without = float(glued[f"{dtype}_same_dtype_{statistic}_error"])
    with_upcast = float(glued[f"{dtype}_upcast_{statistic}_error"])
    assert without > with_upcast


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_no_computation_beats_the_rounding_floor(glued, dtype):
    floor = float(glued[f"{dtype}_floor_mean_error"])
    assert float(glued[f"{dtype}_upcast_mean_error"]) >= floor
    assert float(glued[f"{dtype}_builtin_mean_error"]) >= floor


def test_float16_square_overflows_above_the_square_root_of_its_largest_value(glued):
    limit = math.sqrt(65504.0)  # float16's largest finite value
    assert float(glued["float16_square_limit"]) == pytest.approx(limit)
    assert torch.tensor(math.floor(limit), dtype=torch.float16).pow(2).isfinite()
    assert not torch.tensor(math.ceil(limit), dtype=torch.float16).pow(2).isfinite()


def test_float16_overflow_silently_zeroes_the_token_and_its_gradient(glued):
    assert float(glued["overflow_zero_fraction"]) == 1.0
    assert float(glued["overflow_zero_grad_fraction"]) == 1.0
    assert value(glued, "overflow_output_finite") is True
    assert float(glued["overflow_upcast_max_error"]) < 0.05
    assert float(glued["overflow_module_max_error"]) < 0.05


# --- speed ----------------------------------------------------------------------------------------


SPEED_KEYS = ["handwritten_forward", "handwritten_forward_backward", "builtin_forward", "builtin_forward_backward"]


def words_for(ratio):
    if ratio < 0.9:
        return "faster than"
    if ratio > 1.1:
        return "slower than"
    return "about as fast as"


@pytest.mark.parametrize("key", SPEED_KEYS)
def test_speed_ratio_is_rms_time_over_layer_norm_time(glued, key):
    ratio = float(glued[f"time_rms_{key}"]) / float(glued[f"time_ln_{key}"])
    assert float(glued[f"ratio_{key}"]) == pytest.approx(ratio, rel=1e-6)


@pytest.mark.parametrize("key", SPEED_KEYS)
def test_speed_word_in_the_prose_follows_the_measured_ratio(glued, key):
    assert value(glued, f"speed_word_{key}") == words_for(float(glued[f"ratio_{key}"]))


@pytest.mark.parametrize("claim", ["RMSNorm is faster", "RMSNorm is slower", "faster than LayerNorm"])
def test_prose_asserts_no_speed_direction_of_its_own(prose, claim):
    assert claim not in prose


# --- quality --------------------------------------------------------------------------------------


def test_both_norms_train_to_the_same_median_loss(glued):
    assert float(glued["quality_median_rel_diff"]) < 0.02


def test_norm_choice_matters_less_than_the_seed(glued):
    assert float(glued["quality_largest_per_seed_rel_diff"]) < (float(glued["quality_seed_spread"]) - 1) / 2


def test_training_reduced_the_test_loss(glued):
    initial = float(glued["quality_initial_median"])
    assert float(glued["quality_median_layernorm"]) < initial / 5
    assert float(glued["quality_median_rmsnorm"]) < initial / 5


# --- prose ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["token_rms", "token_rmsnorm", "scratch_max_abs_diff", "zero_mean_max_abs_diff", "offset_max_abs_diff",
     "float32_eps", "effective_eps_float32", "eps_diff_typical", "eps_diff_small",
     "bfloat16_upcast_mean_error", "bfloat16_same_dtype_mean_error", "float16_upcast_mean_error",
     "float16_same_dtype_mean_error", "float16_square_limit", "overflow_zero_fraction",
     "inv_cells_agreeing", "inv_cells_total", "quality_median_layernorm", "quality_median_rmsnorm",
     "quality_verdict", "quality_summary", "bfloat16_builtin_vs_floor"]
    + [f"ratio_{key}" for key in SPEED_KEYS]
    + [f"speed_word_{key}" for key in SPEED_KEYS],
)
def test_glued_number_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)


@pytest.mark.parametrize(
    "model, facts",
    [
        ("BERT", ["LayerNorm", "post-norm"]),
        ("GPT-2", ["LayerNorm", "pre-norm"]),
        ("T5", ["no mean subtraction", "no bias", "pre-norm"]),
        ("LLaMA, LLaMA 2", ["RMSNorm", "pre-norm", "$10^{-6}$ (LLaMA)", "$10^{-5}$ (LLaMA 2)"]),
        ("Gemma 2", ["RMSNorm", "$(1 + w)$", "initialized to zero", "input *and* on the output"]),
    ],
)
def test_model_table_row_states_the_norm_and_its_placement(prose, model, facts):
    row = next(line for line in prose.splitlines() if line.startswith(f"| {model} |"))
    for fact in facts:
        assert fact in row


def test_chapter_closes_with_the_exercise_and_links_its_release(prose):
    exercise = prose.split("\n## Exercise\n", 1)[1].split("\n## ", 1)[0]
    assert "`ex5_rmsnorm`" in exercise
    assert "exercises/ex5_rmsnorm/ex5_rmsnorm.ipynb" in exercise
    assert "nn.RMSNorm" in exercise and "float32" in exercise


# --- gains and their parameterization ---------------------------------------------------------------


def test_gain_parameterizations_give_identical_outputs_at_initialization(glued):
    assert float(glued["gain_init_max_abs_diff"]) == 0.0


def test_decay_alone_shrinks_a_stored_gain_by_one_minus_lr_decay_per_step(glued):
    lr, decay, steps = 1e-2, 0.1, 2000
    gain = 1.0
    for _ in range(steps):  # decoupled decay; Adam's update is 0 for a zero gradient
        gain -= lr * decay * gain
    assert float(glued["gain_decay_only_plain"]) == pytest.approx(gain, rel=1e-4)
    assert float(glued["gain_decay_only_predicted"]) == pytest.approx(gain, rel=1e-9)


def test_decay_alone_leaves_gemmas_gain_at_one(glued):
    assert float(glued["gain_decay_only_gemma"]) == 1.0
    assert float(glued["gain_decay_only_plain"]) < 0.5


D_IN, D_OUT, WIDTH, DEPTH = 16, 4, 32, 4


def teacher_task_reference(seed, n_train=4096, n_test=1024):
    gen = torch.Generator().manual_seed(1000 + seed)
    W1 = torch.randn(D_IN, 64, generator=gen) / math.sqrt(D_IN)
    W2 = torch.randn(64, D_OUT, generator=gen) / 8
    X = torch.randn(n_train + n_test, D_IN, generator=gen) + 1.0
    Y = torch.tanh(X @ W1) @ W2
    Y = Y / Y.std()
    return X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]


def final_mean_gain(one_plus_w, seed=10, steps=600, lr=3e-3):
    """The residual MLP of the quality section written as functions; gains stored as g or as w."""
    torch.manual_seed(seed)
    embed = nn.Linear(D_IN, WIDTH)
    blocks = [(nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)) for _ in range(DEPTH)]
    head = nn.Linear(WIDTH, D_OUT)
    start = 0.0 if one_plus_w else 1.0
    gains = [nn.Parameter(torch.full((WIDTH,), start)) for _ in range(DEPTH + 1)]
    applied = (lambda p: 1 + p) if one_plus_w else (lambda p: p)

    def rms(x, p):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * applied(p)

    def net(x):
        h = embed(x)
        for (fc, proj), p in zip(blocks, gains):
            h = h + proj(F.gelu(fc(rms(h, p))))
        return head(rms(h, gains[-1]))

    params = [*embed.parameters(), *[q for fc, proj in blocks for q in (*fc.parameters(), *proj.parameters())],
              *head.parameters(), *gains]
    X, Y, _, _ = teacher_task_reference(0)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.1)
    for _ in range(steps):
        idx = torch.randint(0, len(X), (64,))
        loss = F.mse_loss(net(X[idx]), Y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.cat([applied(p).detach() for p in gains]).mean().item()


@pytest.mark.parametrize("one_plus_w, name", [(False, "gain_training_plain"), (True, "gain_training_gemma")])
def test_gain_after_training_agrees_with_an_independent_run(glued, one_thread, one_plus_w, name):
    assert float(glued[name]) == pytest.approx(final_mean_gain(one_plus_w), abs=2e-3)


def test_training_with_decay_leaves_gemmas_gain_closer_to_one(glued):
    plain, gemma = float(glued["gain_training_plain"]), float(glued["gain_training_gemma"])
    assert abs(gemma - 1) < abs(plain - 1)
    assert value(glued, "gain_training_verdict") == "stayed closer to 1"


def test_gemma_gain_facts_name_the_checked_code(prose):
    section = prose.split("## Gains and their parameterization", 1)[1].split("\n## ", 1)[0]
    for fact in ["google-deepmind/gemma", "`7691fd4`", "zeros_init()", "normed_inputs * (1 + scale)",
                 "GemmaRMSNorm", "torch.zeros(dim)", "meta-llama/llama", "torch.ones(dim)"]:
        assert fact in section


@pytest.mark.parametrize(
    "cited", ["arxiv.org/abs/1607.06450", "arxiv.org/abs/1910.07467", "arxiv.org/abs/1711.05101",
              "arxiv.org/abs/2408.00118", "arxiv.org/abs/2302.13971", "github.com/google-deepmind/gemma"]
)
def test_references_list_every_cited_work(prose, cited):
    assert cited in prose.split("\n## References\n", 1)[1]


def test_the_epsilon_wording_follows_the_measurement(glued):
    """Which epsilon nn.RMSNorm uses is said from the measured errors and eps, never assumed."""
    eps32 = torch.finfo(torch.float32).eps
    measured = float(glued["effective_eps_float32"])
    assert glued["eps_float32_is"].strip("'\"") == ("which is" if abs(measured - eps32) < 0.01 * eps32
                                                   else "which is not")
    closer_to_float32 = float(glued["bf16_error_vs_float32_eps"]) < float(glued["bf16_error_vs_input_eps"])
    says_matches = glued["half_eps_match"].strip("'\"") == "matches"
    assert closer_to_float32 or not says_matches  # "matches" needs bfloat16's output closer to float32's eps
