"""Chapter 7's claims, part A: the backward pass, initialization, outliers and the norm family.

Three kinds of checks: the glued numbers say what the prose claims; key glued numbers equal
an independent recomputation written here (same seeds, elementary operations or autograd
instead of the chapter's functions); and the chapter's own functions, executed from its
code cells, behave as the text says.
"""

import math
import re
import statistics

import jupytext
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from tests.conftest import REPO

STEM = "07_beyond_the_norm_layer"
CHAPTER = REPO / "chapters" / f"{STEM}.md"
N, D = 8, 6  # the backward-pass batch
DEPTH, WIDTH, BATCH = 50, 256, 128  # the plain MLP
N_EMBD, N_HEAD, T_GPT, B_GPT, GPT_SEEDS = 64, 4, 32, 4, range(3)  # the GPT-2 stacks
C_TOKEN = 1024  # the synthetic token with an outlier


@pytest.fixture(scope="module")
def glued(glued_numbers):
    def parse(value):
        if re.fullmatch(r"[-+0-9.e]+|inf|nan", value):
            return float(value)
        if value in ("True", "False"):
            return value == "True"
        return value.strip("'\"")

    return {name: parse(value) for name, value in glued_numbers(STEM).items()}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def chapter_code():
    """The chapter's functions and modules, executed from the code cells that define them."""
    wanted = ("def norm_input_grad", "def numerical_input_grad", "def activation_std_by_depth",
              "class CausalSelfAttention", "def absmax_int8", "def normalize_over",
              "class OriginalBlock")
    namespace = {"torch": torch, "nn": nn, "F": F, "math": math, "np": np}
    for cell in jupytext.read(CHAPTER, fmt="md:myst").cells:
        if cell.cell_type == "code" and any(key in cell.source for key in wanted):
            exec(cell.source, namespace)
    return namespace


def layer_norm_by_hand(x, gamma=None, beta=None, eps=1e-5):
    """LayerNorm over the last axis from elementary operations (biased variance)."""
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    y = (x - mu) / torch.sqrt(var + eps)
    return y if gamma is None else gamma * y + beta


def batch_norm_by_hand(x, gamma=None, beta=None, eps=1e-5):
    """Training-mode BatchNorm over axis 0 from elementary operations."""
    mu = x.mean(0)
    var = ((x - mu) ** 2).mean(0)
    y = (x - mu) / torch.sqrt(var + eps)
    return y if gamma is None else gamma * y + beta


# --- the backward pass ----------------------------------------------------------------


@pytest.mark.parametrize("norm", ["ln", "bn"])
@pytest.mark.parametrize("what", ["autograd_err", "dgamma_err", "dbeta_err"])
def test_hand_derived_gradients_match_autograd_to_float64_rounding(glued, norm, what):
    assert glued[f"bw_{norm}_{what}"] < 1e-13


@pytest.mark.parametrize("norm", ["ln", "bn"])
def test_hand_derived_gradients_match_central_differences(glued, norm):
    assert glued[f"bw_{norm}_numeric_err"] < 1e-7


def test_layer_norm_gradient_has_no_component_along_the_all_ones_direction(glued):
    assert glued["bw_dx_dot_ones"] < 1e-13


def test_layer_norm_gradient_keeps_only_an_eps_sized_component_along_x_hat(glued):
    assert 0 < glued["bw_dx_dot_xhat"] < 1e-3


@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 16), (1, 4)])
def test_norm_input_grad_over_the_last_axis_is_layer_norms_gradient(chapter_code, shape):
    torch.manual_seed(0)
    x = 3 * torch.randn(shape, dtype=torch.float64) + 1
    dy = torch.randn(shape, dtype=torch.float64)
    gamma, beta = torch.randn(shape[-1], dtype=torch.float64), torch.randn(shape[-1], dtype=torch.float64)
    x_leaf = x.clone().requires_grad_()
    (expected,) = torch.autograd.grad(layer_norm_by_hand(x_leaf, gamma, beta), x_leaf, dy)
    got = chapter_code["norm_input_grad"](x, dy, gamma, -1)
    assert torch.allclose(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n", [2, 5, 32])
def test_norm_input_grad_over_axis_0_is_batch_norms_gradient(chapter_code, n):
    torch.manual_seed(1)
    x = 2 * torch.randn(n, 4, dtype=torch.float64) - 1
    dy = torch.randn(n, 4, dtype=torch.float64)
    gamma, beta = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    x_leaf = x.clone().requires_grad_()
    (expected,) = torch.autograd.grad(batch_norm_by_hand(x_leaf, gamma, beta), x_leaf, dy)
    got = chapter_code["norm_input_grad"](x, dy, gamma, 0)
    assert torch.allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_norm_input_grad_leaves_its_arguments_unchanged(chapter_code):
    torch.manual_seed(2)
    x, dy, gamma = torch.randn(4, 6), torch.randn(4, 6), torch.randn(6)
    copies = [t.clone() for t in (x, dy, gamma)]
    chapter_code["norm_input_grad"](x, dy, gamma, 0)
    assert all(torch.equal(t, c) for t, c in zip((x, dy, gamma), copies))


def test_numerical_input_grad_differentiates_a_known_function(chapter_code):
    x = torch.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=torch.float64)
    dy = torch.tensor([[1.0, 2.0], [-1.0, 0.5]], dtype=torch.float64)
    got = chapter_code["numerical_input_grad"](lambda t: t**3, x, dy)
    assert torch.allclose(got, 3 * x**2 * dy, atol=1e-8)


def test_layer_norm_does_not_couple_the_samples_of_a_batch(glued):
    assert glued["bw_ln_coupling"] == 0.0
    assert glued["bw_ln_offdiag_max"] == 0.0
    assert glued["bw_ln_coupling_words"] == "exactly zero"


def test_batch_norm_couples_the_samples_of_a_batch(glued):
    assert glued["bw_bn_coupling"] > 0.05
    assert glued["bw_bn_coupling_share"] > 0.05
    assert 0.05 < glued["bw_bn_offdiag_over_diag"] < 1.0


def test_batch_norm_coupling_equals_an_independent_computation(glued):
    torch.manual_seed(0)  # the chapter's seed and draws, in its order
    x = 2.0 * torch.randn(N, D, dtype=torch.float64) + 0.5
    dy = torch.randn(N, D, dtype=torch.float64)
    torch.manual_seed(0)  # change_in_other_samples(..., seed=0)
    dy_changed = dy.clone()
    dy_changed[0] += torch.randn(D, dtype=torch.float64)
    x_leaf = x.clone().requires_grad_()
    y = batch_norm_by_hand(x_leaf)
    (before,) = torch.autograd.grad(y, x_leaf, dy, retain_graph=True)
    (after,) = torch.autograd.grad(y, x_leaf, dy_changed)
    assert (after - before)[1:].abs().max().item() == pytest.approx(glued["bw_bn_coupling"], rel=1e-9)


# --- initialization -------------------------------------------------------------------


@pytest.mark.parametrize("init", ["n", "xavier", "kaiming"])
def test_relu_per_layer_factor_matches_the_variance_argument(glued, init):
    theory = glued[f"init_relu_{init}_per_layer_theory"]
    assert glued[f"init_relu_{init}_per_layer"] == pytest.approx(theory, rel=0.05)


def test_relu_activations_explode_with_normal_and_vanish_with_xavier(glued):
    assert glued["init_relu_n_50"] > 1e40
    assert glued["init_relu_xavier_50"] < 1e-5
    assert 0.1 < glued["init_relu_kaiming_50"] < 10


def test_tanh_saturates_with_normal_and_drifts_down_with_xavier(glued):
    assert glued["init_tanh_n_saturated"] > 0.5
    assert glued["init_tanh_xavier_50"] < 0.5 * glued["init_tanh_xavier_1"]


@pytest.fixture(scope="module")
def plain_mlp_draws():
    torch.manual_seed(1)  # the chapter's seed_everything(1), then its draws in order
    x = torch.randn(BATCH, WIDTH, dtype=torch.float64)
    weights = [torch.randn(WIDTH, WIDTH, dtype=torch.float64) for _ in range(DEPTH)]
    return x, weights


@pytest.mark.parametrize(
    "name, act, std",
    [("init_relu_kaiming_50", torch.relu, math.sqrt(2 / WIDTH)),
     ("init_relu_xavier_50", torch.relu, math.sqrt(1 / WIDTH)),
     ("init_tanh_xavier_50", torch.tanh, math.sqrt(1 / WIDTH))],
)
def test_last_layer_std_equals_an_independent_computation(glued, plain_mlp_draws, name, act, std):
    h, weights = plain_mlp_draws
    for z in weights:
        h = act(h @ (std * z).T)
    assert float(np.std(h.numpy())) == pytest.approx(glued[name], rel=1e-9)


@pytest.mark.parametrize(
    "init_name, torch_init",
    [("Xavier", nn.init.xavier_normal_),
     ("Kaiming", lambda w: nn.init.kaiming_normal_(w, nonlinearity="relu"))],
)
def test_chapter_init_stds_are_pytorchs_initializers(chapter_code, init_name, torch_init):
    torch.manual_seed(0)
    w = torch_init(torch.empty(1024, 1024))
    assert w.std().item() == pytest.approx(chapter_code["INIT_STD"][init_name](1024), rel=0.01)


# --- GPT-2's residual scaling ---------------------------------------------------------


def test_unscaled_residual_stream_variance_grows_in_proportion_to_depth(glued):
    assert glued["init_resid_plain_64"] > 30 * glued["init_resid_plain_1"] / 2
    assert 0.8 < glued["init_resid_plain_slope"] < 1.2


def test_scaled_c_proj_makes_the_stream_variance_independent_of_depth(glued):
    assert glued["init_resid_scaled_spread"] < 1.2
    assert glued["init_resid_scaled_64"] < 3
    assert glued["init_resid_plain_over_scaled_64"] > 20


@pytest.mark.parametrize("scale_residual, c_proj_std",
                         [(True, 0.02 / math.sqrt(2 * 8)), (False, 0.02)])
def test_gpt2_init_scales_only_the_c_proj_weights(chapter_code, scale_residual, c_proj_std):
    torch.manual_seed(0)
    blocks = nn.ModuleList(chapter_code["Block"](N_EMBD, N_HEAD) for _ in range(8))
    chapter_code["gpt2_init_"](blocks, scale_residual)
    for name, p in blocks.named_parameters():
        if name.endswith("c_proj.weight"):
            assert p.std().item() == pytest.approx(c_proj_std, rel=0.1), name
        elif "ln_" in name:
            assert torch.equal(p, torch.ones_like(p) if name.endswith("weight") else torch.zeros_like(p)), name
        elif name.endswith("weight"):
            assert p.std().item() == pytest.approx(0.02, rel=0.1), name
        else:
            assert torch.equal(p, torch.zeros_like(p)), name


def test_block_with_zero_output_projections_is_the_identity(chapter_code):
    torch.manual_seed(0)
    block = chapter_code["Block"](N_EMBD, N_HEAD)
    with torch.no_grad():
        for layer in (block.attn.c_proj, block.mlp.c_proj):
            layer.weight.zero_()
            layer.bias.zero_()
        x = torch.randn(2, 5, N_EMBD)
        assert torch.equal(block(x), x)


def test_block_attention_is_causal(chapter_code):
    torch.manual_seed(0)
    block = chapter_code["Block"](N_EMBD, N_HEAD)
    x = torch.randn(1, 6, N_EMBD)
    changed = x.clone()
    changed[:, -1] += 1.0
    with torch.no_grad():
        assert torch.allclose(block(x)[:, :5], block(changed)[:, :5], atol=1e-6)
        assert not torch.allclose(block(x)[:, 5], block(changed)[:, 5])


class ReferenceBlock(nn.Module):
    """GPT-2's pre-norm block with explicit masked softmax attention. Submodules are
    registered in nanoGPT's order, so a seed gives the chapter's weights."""

    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(N_EMBD)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
        self.attn.c_proj = nn.Linear(N_EMBD, N_EMBD)
        self.ln_2 = nn.LayerNorm(N_EMBD)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD)
        self.mlp.c_proj = nn.Linear(4 * N_EMBD, N_EMBD)

    def attend(self, h):
        B, T, C = h.shape
        hs = C // N_HEAD
        q, k, v = (t.reshape(B, T, N_HEAD, hs).permute(0, 2, 1, 3)
                   for t in self.attn.c_attn(h).chunk(3, -1))
        scores = q @ k.transpose(-1, -2) / math.sqrt(hs)
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        y = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        return self.attn.c_proj(y)

    def forward(self, x):
        x = x + self.attend(self.ln_1(x))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))


def reference_growth(n_layer, scale_residual, seed):
    torch.manual_seed(seed)
    blocks = nn.ModuleList(ReferenceBlock() for _ in range(n_layer))
    for name, p in blocks.named_parameters():  # nanoGPT's initialization, written again
        if name.endswith("c_proj.weight") and scale_residual:
            nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
        elif name.endswith("weight") and p.dim() == 2:
            nn.init.normal_(p, 0.0, 0.02)
        elif name.endswith("bias") and "ln_" not in name:
            nn.init.zeros_(p)
    x = 0.02 * torch.randn(B_GPT, T_GPT, N_EMBD) + 0.02 * torch.randn(T_GPT, N_EMBD)
    var_in = x.var(correction=0).item()
    with torch.no_grad():
        for block in blocks:
            x = block(x)
    return x.var(correction=0).item() / var_in


@pytest.mark.parametrize("scale_residual, name",
                         [(False, "init_resid_plain_64"), (True, "init_resid_scaled_64")])
def test_stream_variance_at_64_blocks_equals_an_independent_computation(glued, scale_residual, name):
    growth = statistics.median(reference_growth(64, scale_residual, seed) for seed in GPT_SEEDS)
    assert growth == pytest.approx(glued[name], rel=1e-3)


# --- massive activations and outlier features -----------------------------------------


@pytest.mark.parametrize("size", [100, 1000])
def test_outlier_squeezes_the_other_features_as_the_estimate_says(glued, size):
    assert glued[f"ma_ln_squeeze_{size}"] == pytest.approx(glued[f"ma_squeeze_theory_{size}"], rel=0.05)
    assert glued[f"ma_rms_squeeze_{size}"] == pytest.approx(glued[f"ma_ln_squeeze_{size}"], rel=0.01)


def test_outlier_squeeze_equals_an_independent_computation(glued):
    torch.manual_seed(3)  # the chapter's seed_everything(3) and its one draw
    token = torch.randn(C_TOKEN, dtype=torch.float64).numpy()

    def others_std(z):
        normalized = (z - z.mean()) / np.sqrt(z.var() + 1e-5)
        return normalized[1:].std()

    with_outlier = token.copy()
    with_outlier[0] = 100.0
    assert others_std(with_outlier) / others_std(token) == pytest.approx(glued["ma_ln_squeeze_100"], rel=1e-9)


def test_one_int8_scale_per_token_erases_the_other_features(glued):
    assert glued["ma_int8_error_100"] > 10 * glued["ma_int8_error_none"]
    assert glued["ma_int8_zero_1000"] == 1.0
    assert glued["ma_int8_error_1000"] == pytest.approx(1.0)


@pytest.mark.parametrize("size", [100, 1000])
def test_quantizing_the_outlier_apart_restores_the_error(glued, size):
    assert glued[f"ma_int8_split_error_{size}"] == pytest.approx(glued["ma_int8_error_none"], rel=1e-9)


def test_outlier_dominates_the_normalized_token(glued):
    assert glued["ma_outlier_share_1000"] > 0.99


def test_absmax_int8_rounds_to_255_levels_of_the_largest_magnitude(chapter_code):
    torch.manual_seed(0)
    v = 5 * torch.randn(1000, dtype=torch.float64)
    q = chapter_code["absmax_int8"](v)
    step = v.abs().max() / 127
    levels = q / step
    assert torch.allclose(levels, levels.round(), atol=1e-9)
    assert levels.abs().max().item() == pytest.approx(127)
    assert (q - v).abs().max() <= step / 2 + 1e-12


def test_float16_variance_overflows_by_hand_but_not_in_layer_norm(glued):
    assert glued["ma_fp16_var_is_inf"] is True
    assert glued["ma_fp16_var_words"] == "overflows to inf"
    assert glued["ma_fp16_by_hand_zero"] == 1.0
    assert glued["ma_fp16_builtin_error"] < 1e-3


# --- the family and the lineage -------------------------------------------------------


def test_every_family_member_matches_pytorch(glued):
    assert glued["fam_max_err"] < 1e-12


@pytest.mark.parametrize("shape", [(2, 4, 3, 5), (3, 6, 2, 2)])
def test_group_normalize_with_one_group_is_layer_norm(chapter_code, shape):
    torch.manual_seed(0)
    x = 2 * torch.randn(shape, dtype=torch.float64) + 1
    assert torch.allclose(chapter_code["group_normalize"](x, 1), layer_norm_by_hand(x.flatten(1)).view(shape))


@pytest.mark.parametrize("shape", [(2, 4, 3, 5), (3, 6, 2, 2)])
def test_group_normalize_with_one_group_per_channel_is_instance_norm(chapter_code, shape):
    torch.manual_seed(0)
    x = 2 * torch.randn(shape, dtype=torch.float64) + 1
    expected = layer_norm_by_hand(x.flatten(2)).view(shape)  # per sample and channel
    assert torch.allclose(chapter_code["group_normalize"](x, shape[1]), expected)


def test_normalize_over_batch_height_width_is_batch_norm(chapter_code):
    torch.manual_seed(0)
    x = torch.randn(4, 3, 5, 5, dtype=torch.float64)
    channels_last = x.permute(0, 2, 3, 1).reshape(-1, 3)  # (N*H*W, C)
    expected = batch_norm_by_hand(channels_last).reshape(4, 5, 5, 3).permute(0, 3, 1, 2)
    assert torch.allclose(chapter_code["normalize_over"](x, (0, 2, 3)), expected)


@pytest.mark.parametrize("depth", [1, 4, 16, 64])
def test_pre_activation_stack_passes_the_top_gradient_on_intact(glued, depth):
    assert glued[f"fam_preact_identity_{depth}"] == pytest.approx(1.0, abs=0.1)


def test_original_stack_gates_the_top_gradient(glued):
    assert glued["fam_orig_identity_1"] < 0.7
    assert glued["fam_orig_identity_4"] < glued["fam_orig_identity_1"]
    assert glued["fam_orig_gain_64"] > glued["fam_preact_gain_64"]


def test_pre_activation_block_with_a_silent_branch_is_the_identity(chapter_code):
    torch.manual_seed(0)
    block = chapter_code["PreActBlock"](4)
    with torch.no_grad():
        block.conv2.weight.zero_()
        x = torch.randn(2, 4, 5, 5)
        assert torch.equal(block(x), x)


def test_original_block_with_a_silent_branch_is_a_relu(chapter_code):
    torch.manual_seed(0)
    block = chapter_code["OriginalBlock"](4)
    with torch.no_grad():
        block.bn2.weight.zero_()
        x = torch.randn(2, 4, 5, 5)
        assert torch.equal(block(x), F.relu(x))


# --- the prose ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["bw_ln_autograd_err", "bw_bn_autograd_err", "bw_ln_numeric_err", "bw_bn_numeric_err",
     "bw_ln_coupling_words", "bw_bn_coupling", "init_relu_n_50", "init_relu_xavier_per_layer",
     "init_relu_kaiming_per_layer", "init_tanh_n_saturated", "init_resid_plain_64",
     "init_resid_scaled_spread", "ma_ln_squeeze_100", "ma_int8_error_100", "ma_int8_split_error_1000",
     "ma_fp16_var_words", "fam_max_err", "fam_preact_identity_64", "fam_orig_identity_4"],
)
def test_glued_number_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)


def test_sections_come_in_the_order_of_the_chapter_opening(prose):
    marks = ["\n(ch7-backward)=\n", "\n(ch7-init)=\n", "\n(ch7-watch)=\n", "\n(ch7-nonorm)=\n",
             "\n(ch7-dyt)=\n", "\n(ch7-qknorm)=\n", "\n(ch7-outliers)=\n", "\n(ch7-family)=\n",
             "\n## Summary\n"]
    positions = [prose.index(mark) for mark in marks]
    assert positions == sorted(positions)


def test_chapter_leaves_the_exercises_functions_to_the_learner(prose):
    assert "def batch_norm_forward" not in prose and "def batch_norm_backward" not in prose


def test_exercise_section_names_ex6_beyond_norm_and_links_its_release(prose):
    exercise = prose.split("## Exercise", 1)[1].split("\n## ", 1)[0]
    assert "`ex6_beyond_norm`" in exercise and "exercises/ex6_beyond_norm/ex6_beyond_norm.ipynb" in exercise
    for name in ("batch_norm_forward", "batch_norm_backward", "ReZeroBlock", "DyT"):
        assert f"`{name}`" in exercise
