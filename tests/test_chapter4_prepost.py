"""Chapter 4's claims about pre-norm and post-norm.

Three kinds of checks: the glued numbers say what the prose claims; key glued numbers
equal an independent recomputation (reference blocks written here, same seeds); and
the chapter's own blocks follow the ex4_prepost contract and the equations.
"""

import math
import re
import statistics

import jupytext
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from tests.conftest import REPO

STEM = "04_pre_norm_vs_post_norm"
CHAPTER = REPO / "chapters" / f"{STEM}.md"
D_MODEL, N_HEADS, D_FF = 64, 4, 128  # the chapter's width
MAX_DEPTH, SEEDS, BATCH, T = 64, range(5), 8, 16  # the chapter's stacks at initialization
VOCAB = 16


@pytest.fixture(scope="module")
def glued(glued_numbers):
    return {name: float(value) if re.fullmatch(r"[-+0-9.e]+", value) else value.strip("'\"")
            for name, value in glued_numbers(STEM).items()}


pytestmark = pytest.mark.usefixtures("one_thread")


# --- an independent reference -------------------------------------------------------


class ReferenceBlock(nn.Module):
    """Either placement, written from the equations. Submodules are created in the
    contract's order, so a seed gives the same weights as the chapter's blocks."""

    def __init__(self, pre):
        super().__init__()
        self.pre = pre
        self.attn = nn.MultiheadAttention(D_MODEL, N_HEADS, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(D_MODEL, D_FF), nn.GELU(), nn.Linear(D_FF, D_MODEL))
        self.norm1 = nn.LayerNorm(D_MODEL)
        self.norm2 = nn.LayerNorm(D_MODEL)

    def attend(self, h, attn_mask=None):
        return self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]

    def forward(self, x, attn_mask=None):
        if self.pre:  # x + F(LN(x)), twice
            x = x + self.attend(self.norm1(x), attn_mask)
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.attend(x, attn_mask))  # LN(x + F(x)), twice
        return self.norm2(x + self.ffn(x))


def reference_run(pre, seed):
    """The chapter's set-up for one seed: 64 blocks, then an input and a target."""
    torch.manual_seed(seed)
    blocks = [ReferenceBlock(pre) for _ in range(MAX_DEPTH)]
    x = torch.randn(BATCH, T, D_MODEL)
    target = torch.randn(BATCH, T, D_MODEL)
    return blocks, x, target


def last_ffn_grad_norm(blocks, x, target, pre):
    """||d MSE / d ffn[2].weight|| of the last block of `blocks` (+ final LN for pre-norm)."""
    for block in blocks:
        x = block(x)
    if pre:
        x = F.layer_norm(x, (D_MODEL,))
    loss = F.mse_loss(x, target)
    (grad,) = torch.autograd.grad(loss, blocks[-1].ffn[2].weight)
    return grad.norm().item()


@pytest.fixture(scope="module")
def reference_runs():
    return {pre: [reference_run(pre, seed) for seed in SEEDS] for pre in (False, True)}


def stream_rms(blocks, x):
    sizes = []
    with torch.no_grad():
        for block in blocks:
            x = block(x)
            sizes.append(x.pow(2).mean().sqrt().item())
    return sizes


# --- forward pass: the residual stream ----------------------------------------------


def test_post_norm_stream_has_rms_one_after_every_block(glued, reference_runs):
    assert glued["rms_post_max_dev"] < 1e-3
    blocks, x, _ = reference_runs[False][0]
    assert stream_rms(blocks[:16], x) == pytest.approx([1.0] * 16, abs=1e-3)


def test_pre_norm_stream_grows_with_depth(glued):
    assert 1.0 < glued["rms_pre_1"] < glued["rms_pre_8"] < glued["rms_pre_64"]
    assert glued["rms_pre_64"] > 2.0


def test_pre_norm_stream_rms_equals_an_independent_computation(glued, reference_runs):
    after_64 = [stream_rms(blocks, x)[-1] for blocks, x, _ in reference_runs[True]]
    assert statistics.median(after_64) == pytest.approx(glued["rms_pre_64"], rel=1e-4)


def test_pre_norm_increments_grow_with_depth(glued):
    assert glued["rms2_step_late"] > glued["rms2_step_early"] > 0


def test_drawn_order_is_not_post_norm(glued):
    assert glued["rms_post_12"] == pytest.approx(1.0, abs=1e-3)
    assert glued["rms_drawn_12"] > 2.0


# --- backward pass: the last layer's gradient ---------------------------------------


@pytest.mark.parametrize("pre, name", [(False, "post"), (True, "pre")])
def test_last_layer_gradient_equals_an_independent_computation(glued, reference_runs, pre, name):
    at_1 = [last_ffn_grad_norm(b[:1], x, t, pre) for b, x, t in reference_runs[pre]]
    at_64 = [last_ffn_grad_norm(b, x, t, pre) for b, x, t in reference_runs[pre]]
    assert statistics.median(at_1) == pytest.approx(glued[f"grad_{name}_1"], rel=1e-4)
    ratio = statistics.median(at_64) / statistics.median(at_1)
    assert ratio == pytest.approx(glued[f"grad_ratio_{name}"], rel=1e-3)


def test_post_norm_last_layer_gradient_does_not_depend_on_depth(glued):
    assert 0.8 < glued["grad_ratio_post"] < 1.25
    assert abs(glued["grad_slope_post"]) < 0.1


def test_pre_norm_last_layer_gradient_falls_with_depth(glued):
    assert glued["grad_ratio_pre"] < 0.5
    assert glued["grad_slope_pre"] < -0.2
    assert glued["grad_slope_pre_deep"] < -0.4  # steeper at the deep end


def test_pre_norm_gradient_falls_as_one_over_the_stream_rms(glued):
    assert glued["grad_times_rms_spread"] < 1.1


def test_layer_by_layer_post_norm_gradient_does_not_grow_towards_the_output(glued):
    # The chapter reports that Xiong et al.'s increasing profile does not reproduce.
    assert glued["profile_ratio_post"] < 1.0


def layer_profile(blocks, x, target, pre):
    """||d MSE / d ffn[2].weight|| of every block, one backward pass through all of them."""
    for block in blocks:
        x = block(x)
    if pre:
        x = F.layer_norm(x, (D_MODEL,))
    grads = torch.autograd.grad(F.mse_loss(x, target), [b.ffn[2].weight for b in blocks])
    return [g.norm().item() for g in grads]


def test_layer_profile_ratio_equals_an_independent_computation(glued, reference_runs):
    profiles = [layer_profile(b[:12], x, t, False) for b, x, t in reference_runs[False]]
    first = statistics.median(p[0] for p in profiles)
    last = statistics.median(p[-1] for p in profiles)
    assert last / first == pytest.approx(glued["profile_ratio_post"], rel=1e-4)


def test_warm_up_explanation_is_set_against_the_layer_profile(glued):
    """The warm-up paragraph states Xiong et al.'s mechanism, then what our profile shows."""
    grows = glued["profile_ratio_post"] > 1.1
    assert glued["warmup_mechanism_verdict"].startswith(
        "at this scale the gradients are indeed larger" if grows
        else "at this scale the gradients are not larger")


def test_warm_up_paragraph_quotes_the_profile_next_to_the_mechanism(prose):
    section = prose.split("## Training: post-norm needs warm-up", 1)[1].split("```", 1)[0]
    assert "large for the layers near the output" in section
    assert "{glue:text}`profile_ratio_post:.2f`" in section
    assert "{glue:text}`warmup_mechanism_verdict`" in section


def test_increment_words_follow_the_increments(glued):
    larger = glued["rms2_step_late"] > glued["rms2_step_early"]
    assert glued["rms2_trend"] == ("get larger" if larger else "do not get larger")


def test_attention_words_follow_the_attention_sizes(glued):
    grows = glued["attn_rms_last"] > glued["attn_rms_first"]
    assert glued["attn_rms_trend"] == ("grows" if grows else "does not grow")


def test_gradient_fall_words_follow_the_slopes(glued):
    steeper = glued["grad_slope_pre_deep"] < glued["grad_slope_pre"]
    follows = glued["grad_times_rms_spread"] < 1.1
    assert glued["grad_fall_shape"].startswith(
        "Since our stream grows slowly" if steeper and follows else "How fast the gradient")


def test_square_root_law_words_follow_the_increments(glued):
    faster = glued["rms2_step_late"] > glued["rms2_step_early"]
    assert glued["sqrt_law_words"].endswith("so it grows faster" if faster
                                            else "does not grow faster")
    grows = faster and glued["attn_rms_last"] > glued["attn_rms_first"]
    assert glued["rms_summary_words"].startswith("faster than √l" if grows else "no faster")


def test_both_measures_words_follow_the_ratios(glued):
    same_way = (glued["change_post_over_pre_64"] > glued["change_post_over_pre_8"] > 1
                and glued["grad_post_over_pre_64"] > glued["grad_post_over_pre_8"] > 1)
    assert glued["both_measures_words"].startswith(
        "Both quantities point the same way" if same_way else "The two quantities do not")


def test_pre_norm_change_words_follow_its_slope(glued):
    assert glued["pre_change_words"] == ("our stacks grow faster than that"
                                         if glued["change_slope_pre"] > 0.2
                                         else "our stacks are consistent with that")


def test_stream_sizes_name_their_setup(prose):
    paragraph = prose.split("{glue:text}`rms_pre_64:.2f` after 64.", 1)[1].split("\n\n", 1)[0]
    assert "this chapter's setup" in paragraph and "RMS 1" in paragraph
    assert "Chapter 6" in paragraph and "Chapter 7" in paragraph


# --- training with and without warm-up ----------------------------------------------


def test_ln_vocab_is_the_loss_of_a_uniform_prediction(glued):
    assert glued["ln_vocab"] == pytest.approx(math.log(VOCAB))


def test_post_norm_without_warm_up_stays_near_ln_vocab(glued):
    assert glued["loss_post_nowarm_6"] == pytest.approx(glued["ln_vocab"], rel=0.1)


@pytest.mark.parametrize("name", ["loss_post_warm_6", "loss_pre_nowarm_6", "loss_post_nowarm_6_half_lr"])
def test_other_configurations_learn_the_task(glued, name):
    assert glued[name] < 0.1 * glued["ln_vocab"]


def test_need_for_warm_up_grows_with_depth(glued):
    fractions = [glued[f"fail_post_nowarm_{depth}"] for depth in (2, 4, 6)]
    assert fractions == sorted(fractions)
    assert fractions[0] == 0.0 and fractions[-1] >= 0.6


@pytest.mark.parametrize("name", ["fail_post_warm_6", "fail_pre_nowarm_6", "fail_post_nowarm_6_half_lr"])
def test_no_run_fails_with_warm_up_pre_norm_or_a_smaller_rate(glued, name):
    assert glued[name] == 0.0


def test_vaswani_peak_learning_rate(glued):
    assert glued["vaswani_peak_lr"] == pytest.approx(512**-0.5 * 4000**-0.5)


# --- amplification of a weight perturbation -----------------------------------------


def test_output_change_grows_faster_for_post_norm_than_pre_norm(glued):
    assert glued["change_growth_post"] > glued["change_growth_pre"] > 1.5
    assert glued["change_post_over_pre_64"] > 1.3


def test_deepnorm_keeps_the_output_change_flat(glued):
    assert 0.67 < glued["change_growth_deepnorm"] < 1.5
    assert abs(glued["change_slope_deepnorm"]) < 0.1


def test_deepnorm_constants_for_64_blocks(glued):
    assert glued["deepnorm_alpha_64"] == pytest.approx((2 * 64) ** 0.25)
    assert glued["deepnorm_beta_64"] == pytest.approx((8 * 64) ** -0.25)


# --- the chapter's own code ----------------------------------------------------------


@pytest.fixture(scope="module")
def chapter_code():
    """The chapter's blocks, stack and ffn_grad_norms, executed from its code cells."""
    wanted = ("class PostNormBlock", "class Stack", "def ffn_grad_norms")
    namespace = {"torch": torch, "nn": nn, "F": F, "math": math}
    for cell in jupytext.read(CHAPTER, fmt="md:myst").cells:
        if cell.cell_type == "code" and any(key in cell.source for key in wanted):
            exec(cell.source, namespace)
    return namespace


@pytest.mark.parametrize("block_name", ["PostNormBlock", "PreNormBlock"])
def test_chapter_blocks_have_the_contract_submodules(chapter_code, block_name):
    block = chapter_code[block_name](D_MODEL, N_HEADS, D_FF)
    assert isinstance(block.attn, nn.MultiheadAttention) and block.attn.batch_first
    assert [type(m) for m in block.ffn] == [nn.Linear, nn.GELU, nn.Linear]
    assert isinstance(block.norm1, nn.LayerNorm) and isinstance(block.norm2, nn.LayerNorm)
    assert block.ffn[0].out_features == D_FF


@pytest.mark.parametrize("block_name, pre", [("PostNormBlock", False), ("PreNormBlock", True)])
def test_chapter_blocks_compute_their_equations(chapter_code, block_name, pre):
    torch.manual_seed(0)
    block = chapter_code[block_name](D_MODEL, N_HEADS, D_FF)
    with torch.no_grad():
        for p in block.parameters():  # trained-looking, so that LN gains and biases matter
            p.add_(0.1 * torch.randn_like(p))
    reference = ReferenceBlock(pre)
    reference.load_state_dict(block.state_dict())
    with torch.no_grad():
        x = 3 * torch.randn(2, 5, D_MODEL)
        assert torch.allclose(block(x), reference(x), atol=1e-5)


@pytest.mark.parametrize("block_name", ["PostNormBlock", "PreNormBlock"])
def test_chapter_blocks_pass_the_attention_mask_on(chapter_code, block_name):
    torch.manual_seed(0)
    block = chapter_code[block_name](D_MODEL, N_HEADS, D_FF)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    x = torch.randn(1, 5, D_MODEL)
    changed = x.clone()
    changed[:, -1] += 1.0  # only the last token differs
    with torch.no_grad():
        first_four = block(x, attn_mask=causal)[:, :4]
        assert torch.allclose(first_four, block(changed, attn_mask=causal)[:, :4])
        assert not torch.allclose(block(x)[:, :4], block(changed)[:, :4])


@pytest.mark.parametrize("block_name, final", [("PostNormBlock", nn.Identity), ("PreNormBlock", nn.LayerNorm)])
def test_make_stack_ends_pre_norm_with_a_final_layer_norm(chapter_code, block_name, final):
    stack = chapter_code["make_stack"](chapter_code[block_name], 3, D_MODEL, N_HEADS, D_FF)
    assert isinstance(stack.blocks, nn.ModuleList) and len(stack.blocks) == 3
    assert type(stack.final_norm) is final


def test_ffn_grad_norms_ignores_stored_gradients(chapter_code):
    torch.manual_seed(0)
    stack = chapter_code["make_stack"](chapter_code["PreNormBlock"], 3, D_MODEL, N_HEADS, D_FF)
    x, target = torch.randn(2, 5, D_MODEL), torch.randn(2, 5, D_MODEL)
    clean = chapter_code["ffn_grad_norms"](stack, x, target)
    for p in stack.parameters():
        p.grad = torch.full_like(p, 7.0)
    assert chapter_code["ffn_grad_norms"](stack, x, target) == pytest.approx(clean)
    assert len(clean) == 3 and all(g > 0 for g in clean)


# --- the prose ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["rms_post_max_dev", "rms_pre_64", "grad_ratio_post", "grad_ratio_pre", "grad_slope_pre",
     "profile_ratio_post", "loss_post_nowarm_6", "loss_post_warm_6", "loss_pre_nowarm_6",
     "fail_post_nowarm_2", "fail_post_nowarm_6", "change_growth_post", "change_growth_pre",
     "change_growth_deepnorm", "rms_drawn_12",
     # words chosen by the measurement, never typed
     "grad_post_depth_verdict", "grad_follows_stream", "profile_post_verdict", "post6_verdict",
     "warmup_need_trend", "warmup_takeaway", "half_lr_verdict", "post6_runs_failed",
     "pre6_runs_failed", "deepnorm_flat", "perturb_takeaway", "separation_at_8",
     "rms2_trend", "attn_rms_trend", "grad_fall_shape", "warmup_mechanism_verdict",
     "sqrt_law_words", "rms_summary_words", "both_measures_words", "pre_change_words"],
)
def test_glued_number_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)


def test_prose_places_bert_among_post_norm_models(prose):
    assert "BERT is post-norm" in prose


def test_exercise_section_names_ex4_prepost_and_links_its_release(prose):
    exercise = prose.split("## Exercise", 1)[1].split("\n## ", 1)[0]
    assert "`ex4_prepost`" in exercise and "exercises/ex4_prepost/ex4_prepost.ipynb" in exercise
    for name in ("PostNormBlock", "PreNormBlock", "make_stack", "ffn_grad_norms"):
        assert f"`{name}`" in exercise
