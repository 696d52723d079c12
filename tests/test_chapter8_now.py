"""Chapter 8, normalization in 2025-26: Derf and the element-wise critique, LayerNorm
removal, nGPT, norm placements and the curse of depth.

Three kinds of checks: the chapter's modules behave as their equations say; the glued
numbers that need no training equal an independent recomputation (reference code
written here from the equations, same seeds); and the glued phrases say what the glued
numbers show.
"""

import math
import re

import jupytext
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from tests.conftest import REPO, plain_value

STEM = "08_normalization_now"
CHAPTER = REPO / "chapters" / f"{STEM}.md"
VOCAB, SEQ_LEN, WIDTH, HEADS = 16, 8, 64, 4  # the chapter's model
HEAD_DIM = WIDTH // HEADS
RMS_EPS = torch.finfo(torch.float32).eps  # F.rms_norm's default eps for float32


@pytest.fixture(scope="module")
def glued(glued_numbers):
    return {name: plain_value(text) for name, text in glued_numbers(STEM).items()}


@pytest.fixture(scope="module")
def chapter_code():
    """The chapter's modules, executed from its code cells (no training)."""
    wanted = ("VOCAB, SEQ_LEN =", "class ReversalModel", "class DynamicTanh",
              "class FrozenLayerNorm", "def unit")
    namespace = {"torch": torch, "nn": nn, "F": F, "math": math, "np": np}
    for cell in jupytext.read(CHAPTER, fmt="md:myst").cells:
        if cell.cell_type == "code" and cell.source.lstrip().startswith(wanted):
            exec(cell.source, namespace)
    return namespace


# --- the chapter's modules -----------------------------------------------------------


def test_derf_computes_gamma_erf_alpha_x_plus_shift_plus_beta(chapter_code):
    derf = chapter_code["DynamicErf"](WIDTH)
    with torch.no_grad():
        derf.alpha.fill_(0.7)
        derf.shift.fill_(-0.2)
        derf.gamma.copy_(torch.linspace(0.5, 2, WIDTH))
        derf.beta.copy_(torch.linspace(-1, 1, WIDTH))
    x = 3 * torch.randn(2, SEQ_LEN, WIDTH)
    expected = derf.gamma * torch.special.erf(0.7 * x - 0.2) + derf.beta
    torch.testing.assert_close(derf(x), expected)


def test_derf_starts_at_alpha_one_half_and_shift_zero(chapter_code):
    derf = chapter_code["DynamicErf"](WIDTH)
    assert derf.alpha.item() == 0.5 and derf.shift.item() == 0.0


def block_and_branches(chapter_code, place, scale=1.0):
    torch.manual_seed(0)
    block = chapter_code["Block"](nn.LayerNorm, place, scale)
    with torch.no_grad():  # gains and biases away from 1 and 0, so that each norm counts
        for norm in block.norms:
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    return block, block.branches[0], block.branches[1], block.norms


def layer_norm(norm, x):
    """LayerNorm from its definition: biased variance, eps inside the square root."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


@pytest.mark.parametrize("place", ["post", "pre", "peri", "reordered"])
def test_block_places_its_norms_as_its_docstring_says(chapter_code, place):
    block, attn, ffn, norms = block_and_branches(chapter_code, place, scale=0.5)
    x = torch.randn(2, SEQ_LEN, WIDTH)
    with torch.no_grad():
        h = x
        for i, f in enumerate((attn, ffn)):
            n = norms[i]
            if place == "post":
                h = layer_norm(n, h + f(h))
            elif place == "pre":
                h = h + f(0.5 * layer_norm(n, h))
            elif place == "reordered":
                h = h + layer_norm(n, f(h))
            else:
                h = h + layer_norm(norms[2 + i], f(layer_norm(n, h)))
        torch.testing.assert_close(block(x), h, rtol=1e-5, atol=1e-5)


def test_frozen_layer_norm_equals_layer_norm_for_tokens_at_its_scale(chapter_code):
    norm = nn.LayerNorm(WIDTH)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    x = torch.randn(5, WIDTH)
    x = (x - x.mean(-1, keepdim=True)) / x.std(-1, correction=0, keepdim=True) * 3.0
    sigma = math.sqrt(9.0 + norm.eps)                        # every token's own scale
    frozen = chapter_code["FrozenLayerNorm"](norm, sigma)
    torch.testing.assert_close(frozen(x), norm(x), rtol=1e-5, atol=1e-5)


def test_frozen_layer_norm_is_linear(chapter_code):
    frozen = chapter_code["FrozenLayerNorm"](nn.LayerNorm(WIDTH), 2.0)
    a, b = torch.randn(2, WIDTH), torch.randn(2, WIDTH)
    bias = frozen.bias
    torch.testing.assert_close(frozen(a + b) - bias, (frozen(a) - bias) + (frozen(b) - bias))


@pytest.mark.parametrize("scale", [0.01, 1.0, 100.0])
def test_sphere_block_keeps_every_state_on_the_unit_sphere(chapter_code, scale):
    torch.manual_seed(0)
    block = chapter_code["SphereBlock"]()
    h = F.normalize(scale * torch.randn(3, SEQ_LEN, WIDTH), dim=-1)
    with torch.no_grad():
        lengths = block(h).norm(dim=-1)
    torch.testing.assert_close(lengths, torch.ones_like(lengths))


def test_sphere_block_with_zero_step_is_the_identity(chapter_code):
    torch.manual_seed(0)
    block = chapter_code["SphereBlock"](alpha=0.0)
    h = F.normalize(torch.randn(3, SEQ_LEN, WIDTH), dim=-1)
    with torch.no_grad():
        torch.testing.assert_close(block(h), h)


# --- independent recomputations ------------------------------------------------------


def rms_norm(x):
    """RMSNorm from its definition, without a gain."""
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS)


def test_two_tokens_sharing_a_value_equal_an_independent_computation(glued):
    calm = torch.tensor([1.0, -1.0, 1.0, -1.0])
    loud = torch.tensor([1.0, -3.0, 3.0, -3.0])
    assert rms_norm(calm)[0].item() == pytest.approx(glued["derf_two_tokens_calm"], rel=1e-6)
    assert rms_norm(loud)[0].item() == pytest.approx(glued["derf_two_tokens_loud"], rel=1e-6)
    assert glued["derf_two_tokens_loud"] == pytest.approx(1 / math.sqrt(7), rel=1e-5)


def scattered_tokens(spread):
    """The chapter's tokens: seed 0, 1000 Gaussian tokens, then log-uniform scales."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(1000, WIDTH, generator=g)
    u = torch.rand(1000, 1, generator=g)
    return (z * torch.exp((2 * u - 1) * math.log(spread))).double()


def relative_error(y, fitted):
    return float(np.sqrt(np.mean((y - fitted) ** 2) / np.mean(y ** 2)))


def piecewise_line_error(x, y, bins=400):
    """Least-squares line in each of `bins` equal-count bins of x, in NumPy."""
    order = np.argsort(x, kind="stable")
    fitted = np.empty_like(y)
    for idx in np.array_split(order, bins):
        slope, intercept = np.polyfit(x[idx], y[idx], 1)
        fitted[idx] = slope * x[idx] + intercept
    return relative_error(y, fitted)


def best_scaled_error(squash, x, y):
    errors = []
    for alpha in np.logspace(-2, 1, 100):
        t = squash(alpha * x)
        c = t @ y / (t @ t)
        errors.append(relative_error(y, c * t))
    return min(errors)


@pytest.mark.parametrize("spread, suffix", [(1, "1"), (16, "16")])
def test_element_wise_fit_errors_equal_an_independent_computation(glued, spread, suffix):
    x = scattered_tokens(spread)
    y = rms_norm(x).numpy().ravel()
    x = x.numpy().ravel()
    assert piecewise_line_error(x, y) == pytest.approx(glued[f"derf_best_err_{suffix}"], abs=2e-3)
    assert best_scaled_error(np.tanh, x, y) == pytest.approx(glued[f"derf_dyt_err_{suffix}"],
                                                             abs=1e-3)
    erf = lambda v: torch.special.erf(torch.from_numpy(v)).numpy()
    assert best_scaled_error(erf, x, y) == pytest.approx(glued[f"derf_erf_err_{suffix}"], abs=1e-3)


def reference_stream(place, n_blocks, weights, embeddings, tokens):
    """RMS of the stream after the last block, written from the block equations."""
    tok, pos = embeddings
    x = tok[tokens] + pos[torch.arange(SEQ_LEN)]
    ln = lambda t: F.layer_norm(t, (WIDTH,))                # gains 1, biases 0 at init

    def attention(t, w):
        qkv = F.linear(t, w["qkv_w"], w["qkv_b"])
        q, k, v = (part.unflatten(-1, (HEADS, HEAD_DIM)) for part in qkv.split(WIDTH, -1))
        logits = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(HEAD_DIM)
        y = torch.einsum("bhts,bshd->bthd", logits.softmax(-1), v).flatten(-2)
        return F.linear(y, w["proj_w"], w["proj_b"])

    def mlp(t, w):
        return F.linear(F.gelu(F.linear(t, w["fc_w"], w["fc_b"])), w["out_w"], w["out_b"])

    for w in weights[:n_blocks]:
        for f in (attention, mlp):
            if place == "pre":
                x = x + f(ln(x), w)
            else:                                           # "reordered"
                x = x + ln(f(x, w))
    return x.pow(2).mean().sqrt().item()


def draw_model(n_blocks):
    """Weights drawn in the order the chapter's modules draw them."""
    weights = []
    for _ in range(n_blocks):
        qkv, proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        fc, out = nn.Linear(WIDTH, 2 * WIDTH), nn.Linear(2 * WIDTH, WIDTH)
        weights.append({"qkv_w": qkv.weight, "qkv_b": qkv.bias, "proj_w": proj.weight,
                        "proj_b": proj.bias, "fc_w": fc.weight, "fc_b": fc.bias,
                        "out_w": out.weight, "out_b": out.bias})
    tok, pos = nn.Embedding(VOCAB, WIDTH).weight, nn.Embedding(SEQ_LEN, WIDTH).weight
    nn.Linear(WIDTH, VOCAB)                                 # the head
    return weights, (tok, pos)


def test_stream_at_initialization_equals_an_independent_computation(glued):
    tokens = torch.randint(0, VOCAB, (256, SEQ_LEN), generator=torch.Generator().manual_seed(7))
    torch.manual_seed(0)
    with torch.no_grad():
        models = {place: draw_model(32) for place in ("post", "pre", "peri", "reordered")}
        for place in ("pre", "reordered"):
            value = reference_stream(place, 32, *models[place], tokens)
            assert value == pytest.approx(glued[f"place_init_{place}_32"], rel=1e-4)


# --- what the glued numbers say ------------------------------------------------------


def test_no_element_wise_map_follows_rmsnorm_over_spread_scales(glued):
    assert glued["derf_best_err_16"] > 4 * glued["derf_best_err_1"]
    assert glued["derf_best_err_16"] > 0.3


def test_tanh_and_erf_are_never_better_than_the_best_element_wise_map(glued):
    for key in ("dyt", "erf"):
        for spread in ("1", "16"):
            assert glued[f"derf_{key}_err_{spread}"] >= glued[f"derf_best_err_{spread}"] - 1e-3


def test_low_learning_rate_phrase_agrees_with_the_losses(glued):
    slower = max(glued["derf_loss_dyt_low"], glued["derf_loss_derf_low"]) > max(
        glued["derf_loss_layernorm_low"], glued["derf_loss_rmsnorm_low"])
    assert glued["derf_low_phrase"].startswith("learned more slowly") == slower
    assert (glued["derf_low_ratio"] > 1) == slower


def test_high_learning_rate_phrase_agrees_with_the_failures(glued):
    pointwise = glued["derf_failed_pointwise_high"]
    norms = glued["derf_failed_norms_high"]
    word = "more" if pointwise > norms else "less" if pointwise < norms else "as often"
    assert word in glued["derf_high_phrase"]
    failures = sum(2 - glued[f"derf_learned_{k}_high"] for k in ("dyt", "derf"))
    assert failures == pointwise


def test_layer_norm_free_verdict_agrees_with_the_gaps(glued):
    before, after = glued["lnfree_gap_before"], glued["lnfree_gap_after"]
    assert before == pytest.approx(glued["lnfree_loss_frozen"] - glued["lnfree_loss_ln"])
    assert after == pytest.approx(glued["lnfree_loss_tuned"] - glued["lnfree_loss_control"])
    verdict = glued["lnfree_verdict"]
    if after <= 0:
        assert "no worse" in verdict
    elif after < 0.5 * before:
        assert "most of the gap" in verdict
    else:
        assert "part" in verdict or "did not" in verdict


def test_every_norm_of_the_trained_model_was_frozen(glued):
    assert glued["lnfree_n_norms"] == 2 * 8 + 1             # two per block, the final one


def test_ngpt_states_have_unit_length(glued):
    assert glued["ngpt_norm_error"] < 1e-5


@pytest.mark.parametrize("key", ["low", "high"])
def test_ngpt_speedup_is_the_ratio_of_steps(glued, key):
    ratio = glued[f"ngpt_steps_pre_{key}"] / glued[f"ngpt_steps_ngpt_{key}"]
    assert glued[f"ngpt_speedup_{key}"] == pytest.approx(ratio)


def test_ngpt_verdict_agrees_with_the_paper_s_lower_figure(glued):
    reaches = max(glued["ngpt_speedup_low"], glued["ngpt_speedup_high"]) >= 4
    assert ("does not reproduce" not in glued["ngpt_verdict"]) == reaches


def test_ngpt_high_phrase_agrees_with_the_losses(glued):
    lower = glued["ngpt_loss_high"] < glued["ngpt_loss_pre_high"]
    assert (glued["ngpt_high_phrase"] == "ended lower than") == lower


def test_post_norm_stream_stays_at_one_and_output_norms_grow_fastest(glued):
    assert glued["place_init_post_32"] == pytest.approx(1.0, abs=1e-3)
    for place in ("peri", "reordered"):
        assert glued[f"place_init_{place}_32"] > glued["place_init_pre_32"]


def test_output_norm_stream_grows_like_the_square_root_of_the_depth(glued):
    # 64 unit-size terms on top of an embedding of variance 2 (token plus position)
    for place in ("peri", "reordered"):
        assert 0.8 * math.sqrt(66) < glued[f"place_init_{place}_32"] < 1.3 * math.sqrt(66)


@pytest.mark.parametrize("place", ["pre", "peri", "reordered"])
def test_placement_outcome_agrees_with_the_count(glued, place):
    n = glued[f"place_learned_{place}"]
    phrase = glued[f"place_outcome_{place}"]
    assert ("both runs" in phrase and "learned" in phrase) == (n == 2)
    assert "failed in both" in phrase if n == 0 else "failed" not in phrase


def test_stream_sentence_agrees_with_the_trained_streams(glued):
    grew = all(glued[f"place_trained_{p}"] < glued["place_trained_pre"] for p in ("peri", "reordered"))
    assert glued["place_stream_sentence"].startswith("The other half") == grew


def test_curse_phrase_agrees_with_the_measured_contributions(glued):
    curse = glued["depth_deep_share_pre"] < 0.5 and glued["depth_cos_last_pre"] > 0.9
    assert ("do contribute less" in glued["depth_curse_phrase"]) == curse


def test_fix_phrase_names_the_fixes_that_raised_the_deep_share(glued):
    phrase = glued["depth_fix_phrase"]
    for name, key in [("LayerNorm Scaling", "lns"), ("Mix-LN", "mix")]:
        raised = glued[f"depth_deep_share_{key}"] > glued["depth_deep_share_pre"]
        assert (name in phrase) == raised


# --- the prose --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["derf_two_tokens_loud", "derf_best_err_16", "derf_low_phrase", "derf_high_phrase",
     "lnfree_loss_frozen", "lnfree_gap_after", "lnfree_verdict", "ngpt_norm_error",
     "ngpt_speedup_high", "ngpt_verdict", "place_init_reordered_32", "place_verdict",
     "place_stream_sentence", "depth_curse_phrase", "depth_fix_phrase"],
)
def test_glued_value_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)


@pytest.mark.parametrize("label", ["ch8-derf", "ch8-lnfree", "ch8-ngpt", "ch8-placement",
                                   "ch8-depth"])
def test_sections_have_their_labels(prose, label):
    assert f"({label})=\n## " in prose


@pytest.mark.parametrize("figure", ["ch8-elementwise", "ch8-derf-train",
                                    "ch8-placement-stream", "ch8-depth-contrib"])
def test_figures_have_a_name_and_a_one_line_alt_text(prose, figure):
    assert re.search(rf"^```{{glue:figure}} {figure}\n:name: {figure}\n:alt: \S.*$", prose, re.M)
    assert f'show_figure("{figure}")' in prose


@pytest.mark.parametrize("arxiv", ["2512.10938", "2409.13710", "2507.02559", "2410.01131",
                                   "2502.02732", "2501.00656", "2408.00118", "2503.19786", "2412.13795",
                                   "2502.05795"])
def test_every_paper_of_the_chapter_is_in_its_references(prose, arxiv):
    references = prose.split("## References")[1]
    assert f"arxiv.org/abs/{arxiv}" in references
