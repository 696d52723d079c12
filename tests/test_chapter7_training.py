"""Chapter 7's training sections: watching a network train, deep stacks without a norm
layer, Dynamic Tanh, and QK-norm.

Three kinds of checks: the glued numbers and phrases say what the prose claims; a few
glued numbers equal an independent recomputation (reference code written here, same
seeds); and the chapter's own modules behave as the equations say.
"""

import math
import re
import statistics

import jupytext
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from tests.conftest import REPO, plain_value

STEM = "07_beyond_the_norm_layer"
CHAPTER = REPO / "chapters" / f"{STEM}.md"
VOCAB, SEQ_LEN, WIDTH, HEADS, DEPTH = 16, 8, 64, 4, 10  # the chapter's model
HEAD_DIM = WIDTH // HEADS
LR = 1e-2
LN_VOCAB = math.log(VOCAB)
NONORM_KEYS = ["plain", "post", "pre", "rezero", "layerscale", "fixup"]


@pytest.fixture(scope="module")
def glued(glued_numbers):
    return {name: plain_value(text) for name, text in glued_numbers(STEM).items()}


@pytest.fixture(scope="module")
def chapter_code():
    """The chapter's model code, executed from its code cells (no training)."""
    wanted = ("class SelfAttention", "VOCAB, SEQ_LEN =", "class ScaledResidual",
              "def fixup", "class DynamicTanh")
    namespace = {"torch": torch, "nn": nn, "F": F, "math": math}
    for cell in jupytext.read(CHAPTER, fmt="md:myst").cells:
        if cell.cell_type == "code" and cell.source.lstrip().startswith(wanted):
            exec(cell.source, namespace)
    return namespace


# --- the chapter's modules -----------------------------------------------------------


def test_scaled_residual_starting_at_zero_is_the_identity(chapter_code):
    torch.manual_seed(0)
    block = chapter_code["ScaledResidual"](chapter_code["feed_forward"](WIDTH), 0.0)
    x = 3 * torch.randn(2, SEQ_LEN, WIDTH)
    assert torch.equal(block(x), x)


def test_rezero_stack_is_the_identity_at_initialization(chapter_code):
    torch.manual_seed(0)
    model = chapter_code["scaled_stack"](0.0)
    x = torch.randn(2, SEQ_LEN, WIDTH)
    with torch.no_grad():
        for block in model.blocks:
            assert torch.equal(block(x), x)


def test_scale_starting_at_zero_gets_a_gradient_and_the_branch_does_not(chapter_code):
    torch.manual_seed(0)
    block = chapter_code["ScaledResidual"](chapter_code["feed_forward"](WIDTH), 0.0)
    block(torch.randn(2, SEQ_LEN, WIDTH)).pow(2).sum().backward()
    assert block.scale.grad.abs() > 0
    assert all(torch.all(p.grad == 0) for p in block.branch.parameters())


def test_layerscale_multiplies_each_channel_by_its_own_factor(chapter_code):
    torch.manual_seed(0)
    branch = nn.Linear(WIDTH, WIDTH)
    block = chapter_code["ScaledResidual"](branch, 0.1, (WIDTH,))
    assert block.scale.shape == (WIDTH,) and torch.all(block.scale == 0.1)
    with torch.no_grad():
        block.scale.copy_(torch.linspace(-1, 1, WIDTH))
        x = torch.randn(2, SEQ_LEN, WIDTH)
        assert torch.allclose(block(x), x + torch.linspace(-1, 1, WIDTH) * branch(x))


def test_fixup_makes_every_block_the_identity_and_the_head_zero(chapter_code):
    torch.manual_seed(0)
    model = chapter_code["fixup"](chapter_code["scaled_stack"](1.0))
    x = torch.randn(2, SEQ_LEN, WIDTH)
    with torch.no_grad():
        for block in model.blocks:
            assert torch.equal(block(x), x)
        assert torch.all(model(torch.randint(0, VOCAB, (2, SEQ_LEN))) == 0)


def test_fixup_scales_the_first_layer_of_each_branch_by_l_to_the_minus_one_half(
        chapter_code):
    torch.manual_seed(0)
    plain = chapter_code["scaled_stack"](1.0)
    torch.manual_seed(0)
    fixed = chapter_code["fixup"](chapter_code["scaled_stack"](1.0))
    factor = (2 * DEPTH) ** -0.5
    for before, after in zip(plain.blocks, fixed.blocks):
        assert torch.allclose(after[1].branch[0].weight, factor * before[1].branch[0].weight)
        q_k, value = slice(0, 2 * WIDTH), slice(2 * WIDTH, 3 * WIDTH)
        w_before, w_after = before[0].branch.qkv.weight, after[0].branch.qkv.weight
        assert torch.equal(w_after[q_k], w_before[q_k])
        assert torch.allclose(w_after[value], factor * w_before[value])


def test_dynamic_tanh_starts_at_alpha_one_half_gamma_one_beta_zero(chapter_code):
    dyt = chapter_code["DynamicTanh"](WIDTH)
    assert dyt.alpha.shape == () and dyt.alpha.item() == 0.5
    assert torch.equal(dyt.gamma, torch.ones(WIDTH))
    assert torch.equal(dyt.beta, torch.zeros(WIDTH))


@pytest.mark.parametrize("shape", [(WIDTH,), (3, WIDTH), (2, SEQ_LEN, WIDTH)])
def test_dynamic_tanh_computes_gamma_tanh_alpha_x_plus_beta(chapter_code, shape):
    torch.manual_seed(0)
    dyt = chapter_code["DynamicTanh"](WIDTH)
    with torch.no_grad():
        dyt.alpha.fill_(0.7)
        dyt.gamma.copy_(torch.randn(WIDTH))
        dyt.beta.copy_(torch.randn(WIDTH))
        x = 4 * torch.randn(shape)
        assert torch.allclose(dyt(x), dyt.gamma * torch.tanh(0.7 * x) + dyt.beta)


def queries_and_keys(attention, x):
    """(input, output) of the attention's q_norm and of its k_norm, each (B, H, T, D)."""
    seen = []
    hooks = [m.register_forward_hook(lambda m, inputs, out: seen.append((inputs[0], out)))
             for m in (attention.q_norm, attention.k_norm)]
    with torch.no_grad():
        attention(x)
    for hook in hooks:
        hook.remove()
    return seen


@pytest.mark.parametrize("scale", [0.1, 1.0, 1000.0])
def test_qk_norm_fixes_the_length_of_every_head_query_and_key(chapter_code, scale):
    torch.manual_seed(0)
    attention = chapter_code["SelfAttention"](WIDTH, HEADS, qk_norm=nn.LayerNorm)
    x = scale * torch.randn(2, SEQ_LEN, WIDTH)
    for raw, normalized in queries_and_keys(attention, x):
        assert normalized.shape == (2, HEADS, SEQ_LEN, HEAD_DIM)
        var = raw.var(-1, unbiased=False)
        fixed = (HEAD_DIM * var / (var + 1e-5)).sqrt()     # sqrt(D), up to eps
        assert torch.allclose(normalized.norm(dim=-1), fixed, rtol=1e-4)


def test_qk_norm_lengths_are_sqrt_head_dim_for_large_inputs(chapter_code):
    torch.manual_seed(0)
    attention = chapter_code["SelfAttention"](WIDTH, HEADS, qk_norm=nn.LayerNorm)
    for _, normalized in queries_and_keys(attention, 100 * torch.randn(2, SEQ_LEN, WIDTH)):
        lengths = normalized.norm(dim=-1)
        assert torch.allclose(lengths, torch.full_like(lengths, HEAD_DIM ** 0.5), rtol=1e-4)


def test_qk_norm_bounds_every_logit_by_sqrt_head_dim(chapter_code):
    torch.manual_seed(0)
    attention = chapter_code["SelfAttention"](WIDTH, HEADS, qk_norm=nn.LayerNorm)
    with torch.no_grad():
        attention(1000 * torch.randn(4, SEQ_LEN, WIDTH))
    assert attention.logits.abs().max() <= HEAD_DIM ** 0.5 * (1 + 1e-5)


def test_without_qk_norm_logits_grow_with_the_square_of_the_input(chapter_code):
    torch.manual_seed(0)
    attention = chapter_code["SelfAttention"](WIDTH, HEADS)
    nn.init.zeros_(attention.qkv.bias)      # without biases the logits are quadratic in x
    x = torch.randn(4, SEQ_LEN, WIDTH)
    with torch.no_grad():
        attention(x)
        small = attention.logits.clone()
        attention(10 * x)
    assert torch.allclose(attention.logits, 100 * small, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("place", ["pre", "post"])
def test_block_places_the_norm_as_named(chapter_code, place):
    torch.manual_seed(0)
    block = chapter_code["NormBlock"](WIDTH, HEADS, nn.LayerNorm, place)
    x = 5 * torch.randn(2, SEQ_LEN, WIDTH)
    with torch.no_grad():
        y = block(x)
        if place == "post":                  # LN(x' + FFN(x')) with x' = LN(x + attn(x))
            h = block.norm1(x + block.attn(x))
            expected = block.norm2(h + block.ffn(h))
        else:                                # x' + FFN(LN(x')) with x' = x + attn(LN(x))
            h = x + block.attn(block.norm1(x))
            expected = h + block.ffn(block.norm2(h))
    assert torch.allclose(y, expected, atol=1e-6)


def test_chapter_classes_are_not_the_exercise_solutions(prose):
    # ex6_beyond_norm asks for ReZeroBlock(sublayer) and DyT(dim, alpha_init).
    assert "class ReZeroBlock" not in prose and "class DyT(" not in prose


# --- independent recomputations ------------------------------------------------------


def test_adam_first_step_estimate_equals_an_independent_computation(glued):
    # The chapter's pre-norm model of seed 0 draws its blocks' weights first, in this
    # order: per block qkv, proj and the FFN's two linear layers (then embeddings, head).
    torch.manual_seed(0)
    weights = []
    for _ in range(DEPTH):
        for fan_in, fan_out in [(WIDTH, 3 * WIDTH), (WIDTH, WIDTH), (WIDTH, 2 * WIDTH),
                                (2 * WIDTH, WIDTH)]:
            weights.append(nn.Linear(fan_in, fan_out).weight)
    ratios = [math.log10(LR / w.std().item()) for w in weights]
    assert statistics.median(ratios) == pytest.approx(glued["watch_adam_estimate"], abs=1e-6)


def reference_logits(qkv, x, normalize):
    """Attention logits (B, H, T, T) written from the equations, with einsum."""
    q, k, _ = F.linear(x, qkv.weight, qkv.bias).split(WIDTH, dim=-1)
    q = q.unflatten(-1, (HEADS, HEAD_DIM))                  # (B, T, H, D)
    k = k.unflatten(-1, (HEADS, HEAD_DIM))
    if normalize:
        q, k = F.layer_norm(q, (HEAD_DIM,)), F.layer_norm(k, (HEAD_DIM,))
    return torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(HEAD_DIM)


def test_largest_logits_at_input_rms_100_equal_an_independent_computation(glued):
    torch.manual_seed(0)
    qkv = nn.Linear(WIDTH, 3 * WIDTH)                       # the chapter's first module
    for fan_in, fan_out in [(WIDTH, WIDTH), (WIDTH, 3 * WIDTH), (WIDTH, WIDTH)]:
        nn.Linear(fan_in, fan_out)      # its proj, then the copy's qkv and proj, replaced
    with torch.no_grad():
        for scale in (1, 10, 100):                          # the chapter draws x in turn
            x = scale * torch.randn(4, SEQ_LEN, WIDTH)
        plain = reference_logits(qkv, x, normalize=False).abs().max().item()
        normalized = reference_logits(qkv, x, normalize=True).abs().max().item()
    assert plain == pytest.approx(glued["qk_logit_plain_100"], rel=1e-4)
    assert normalized == pytest.approx(glued["qk_logit_qk_100"], rel=1e-4)


# --- watching a network train --------------------------------------------------------


def test_post_norm_gradients_vanish_towards_the_input(glued):
    assert glued["watch_grad_orders_post"] > 3        # "next to no gradient at all"


def test_pre_norm_gradients_have_similar_sizes_in_every_block(glued):
    assert abs(glued["watch_grad_orders_pre"]) < 1.5


def test_pre_norm_stream_widens_with_depth(glued):
    assert glued["watch_stream_rms_last_pre"] > glued["watch_stream_rms_first_pre"]


def test_adam_first_step_ratio_is_log10_of_lr_over_weight_size(glued):
    assert glued["watch_taken_step1"] == pytest.approx(glued["watch_adam_estimate"], abs=0.1)


def test_rule_of_thumb_phrase_agrees_with_the_measured_ratio(glued):
    taken = glued["watch_taken_pre"]
    assert glued["watch_rule_phrase"] == ("above" if taken > -3 else "below")
    assert glued["watch_orders_from_rule"] == pytest.approx(abs(taken + 3))


def test_adam_ratio_hardly_separates_the_models_and_lr_times_grad_does(glued):
    assert glued["watch_taken_spread"] < 1.0 < glued["watch_lr_grad_spread"]
    taken = [glued[f"watch_taken_{key}"] for key in ("plain", "post", "pre")]
    assert max(taken) - min(taken) == pytest.approx(glued["watch_taken_spread"])


@pytest.mark.parametrize("key", ["plain", "post", "pre"])
def test_watched_outcome_phrase_agrees_with_the_final_loss(glued, key):
    learned = glued[f"watch_loss_{key}"] <= LN_VOCAB / 2
    assert glued[f"watch_outcome_{key}"] == ("learned the task" if learned
                                               else "did not learn the task")


# --- training without a norm layer --------------------------------------------------


@pytest.mark.parametrize("key", NONORM_KEYS)
def test_outcome_phrase_agrees_with_the_failure_fraction(glued, key):
    fraction, phrase = glued[f"nonorm_fail_{key}"], glued[f"nonorm_outcome_{key}"]
    seeds = int(glued["nonorm_seeds"])
    if fraction == 0:
        assert phrase == f"learned the task in all {seeds} runs"
    elif fraction == 1:
        assert phrase == f"failed in all {seeds} runs"
    else:
        assert phrase == f"failed in {round(fraction * seeds)} of {seeds} runs"


def test_post_norm_and_the_plain_stack_fail_at_depth_ten(glued):
    assert glued["nonorm_depth"] == DEPTH
    assert glued["nonorm_fail_post"] == 1.0 and glued["nonorm_fail_plain"] == 1.0


@pytest.mark.parametrize("key", ["pre", "rezero", "layerscale", "fixup"])
def test_pre_norm_and_the_three_recipes_learn_at_depth_ten(glued, key):
    assert glued[f"nonorm_fail_{key}"] == 0.0
    assert glued[f"nonorm_loss_{key}"] < 0.1 * LN_VOCAB


def test_verdict_names_the_measured_contrast(glued):
    assert glued["nonorm_verdict"].startswith("At this depth, starting every branch small")
    assert glued["nonorm_recipes_outcome"] == "learned the task in every run"


def test_plain_stack_loss_jumps_far_above_a_guess(glued):
    assert glued["nonorm_plain_peak"] > 2 * LN_VOCAB
    assert glued["nonorm_plain_sentence"].startswith("Its first updates threw it far off")


def test_fixup_factor_and_layerscale_init(glued):
    assert glued["nonorm_fixup_factor"] == pytest.approx((2 * DEPTH) ** -0.5)
    assert glued["nonorm_layerscale_init"] == 0.1          # CaiT's value up to depth 18


def test_rezero_scalars_moved_away_from_zero(glued):
    assert glued["nonorm_rezero_alpha"] > 0.01


# --- Dynamic Tanh ---------------------------------------------------------------------


def test_tanh_fit_is_never_worse_than_a_straight_line(glued):
    assert glued["dyt_fit_error"] <= glued["dyt_line_error"] + 1e-6
    assert 0 <= glued["dyt_best_gain"] < 1


def test_s_shape_verdict_agrees_with_the_fits(glued):
    reproduced = glued["dyt_best_gain"] > 0.1
    assert glued["dyt_shape_short"] == ("shows weakly" if reproduced else "does not show")
    assert glued["dyt_verdict"].startswith("So a weak S-shape" if reproduced
                                           else "So the S-shape does not reproduce")
    straight = glued["dyt_fit_error"] >= 0.9 * glued["dyt_line_error"]
    assert glued["dyt_shape_phrase"].startswith("is nearly straight" if straight
                                                else "bends visibly")


def test_dyt_trains_like_layer_norm_on_the_toy_task(glued):
    assert glued["dyt_outcome"] == "learned the task in all 3 runs"
    assert glued["dyt_loss_ln"] == pytest.approx(glued["nonorm_loss_pre"])
    lower = glued["dyt_loss"] < glued["dyt_loss_ln"]
    assert glued["dyt_compare_phrase"] == ("lower than" if lower else "higher than")


def test_alpha_sentence_agrees_with_the_correlation(glued):
    tracks = glued["dyt_alpha_corr"] > 0.5
    assert ("did not track" in glued["dyt_alpha_short"]) is not tracks
    assert glued["dyt_alpha_min"] <= 0.5 + glued["dyt_alpha_moved"]


# --- QK-norm ----------------------------------------------------------------------------


def test_qk_norm_logit_bound_is_sqrt_head_dim(glued):
    assert glued["qk_bound"] == pytest.approx(HEAD_DIM ** 0.5)
    assert glued["qk_logit_qk_100"] <= glued["qk_bound"]
    assert glued["qk_logit_plain_100"] > 100 * glued["qk_bound"]


def test_attention_logit_instability_reproduces_and_qk_norm_stops_it(glued):
    assert glued["qk_verdict"].startswith("The instability reproduces")
    assert glued["qk_loss_none"] > LN_VOCAB / 2 > glued["qk_loss_qk"]
    assert glued["qk_peak_logit_none"] > 1000 > 100 > glued["qk_peak_logit_qk"]


def test_qk_norm_raises_the_largest_stable_learning_rate(glued):
    assert float(glued["qk_stable_qk"]) > float(glued["qk_stable_none"])


def test_qk_top_sentence_agrees_with_the_top_learning_rate(glued):
    failed = glued["qk_fail_top_qk"]
    sentence = glued["qk_top_sentence"]
    if failed == 1:
        assert sentence.startswith("QK-norm is not a licence")
    elif failed == 0:
        assert sentence.startswith("Even at")


# --- the prose --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["watch_grad_orders_post", "watch_taken_pre", "watch_adam_estimate",
     "watch_closest_sentence", "nonorm_outcome_plain", "nonorm_outcome_rezero",
     "nonorm_outcome_layerscale", "nonorm_outcome_fixup", "nonorm_verdict", "dyt_fit_alpha",
     "dyt_fit_error", "dyt_verdict", "dyt_outcome", "qk_verdict", "qk_peak_logit_none",
     "qk_peak_logit_qk", "qk_bound"],
)
def test_glued_number_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)


@pytest.mark.parametrize("label", ["ch7-watch", "ch7-nonorm", "ch7-dyt", "ch7-qknorm"])
def test_training_sections_have_their_labels(prose, label):
    assert f"({label})=\n## " in prose


@pytest.mark.parametrize("figure", ["ch7-watch-hist", "ch7-watch-ratio", "ch7-nonorm-train",
                                    "ch7-dyt-map", "ch7-dyt-train", "ch7-qk-logits"])
def test_training_figures_have_a_name_and_a_one_line_alt_text(prose, figure):
    assert re.search(rf"^```{{glue:figure}} {figure}\n:name: {figure}\n:alt: \S.*$", prose, re.M)
    assert f'show_figure("{figure}")' in prose
