"""Chapter 7's ConvNeXt LayerNorm, its two -0.86 values and its page polish.

ConvNeXt (Liu et al., 2022) normalizes the C channels at each position of an (N, C, H, W)
tensor. The checks: the glued numbers equal a recomputation written here from elementary
operations (the chapter's seed and draw); the chapter's module behaves as the equations say
(per-pixel LayerNorm, GroupNorm(1, C) only where a sample has one position); the words the
prose glues follow the numbers; and the built page prints neither seeds nor raw tables.
"""

import math
import re

import jupytext
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from tests.conftest import REPO

import addnorm_helpers  # chapters/ is on pytest's pythonpath (pyproject.toml)

STEM = "07_beyond_the_norm_layer"
CHAPTER = REPO / "chapters" / f"{STEM}.md"
EPS = 1e-6  # ConvNeXt's LayerNorm eps (models/convnext.py)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def glued(glued_numbers):
    def parse(value):
        if re.fullmatch(r"[-+0-9.e]+|inf|nan", value):
            return float(value)
        return value.strip("'\"")

    return {name: parse(value) for name, value in glued_numbers(STEM).items()}


@pytest.fixture(scope="module")
def chapter_code():
    """normalize_over and ChannelLayerNorm, executed from the cells that define them."""
    namespace = {"torch": torch, "nn": nn, "F": F, "math": math}
    for cell in jupytext.read(CHAPTER, fmt="md:myst").cells:
        if cell.cell_type == "code" and ("def normalize_over" in cell.source
                                         or "class ChannelLayerNorm" in cell.source):
            exec(cell.source, namespace)
    return namespace


def per_position_by_hand(x, eps=EPS):
    """Mean and biased variance over axis 1 (the channels), from elementary operations."""
    mu = x.sum(1, keepdim=True) / x.shape[1]
    var = ((x - mu) ** 2).sum(1, keepdim=True) / x.shape[1]
    return (x - mu) / torch.sqrt(var + eps)


def per_sample_by_hand(x, eps=EPS):
    """One mean and biased variance per sample, over C, H and W: GroupNorm with one group."""
    flat = x.reshape(x.shape[0], -1)
    mu = flat.mean(1, keepdim=True)
    var = ((flat - mu) ** 2).mean(1, keepdim=True)
    return ((flat - mu) / torch.sqrt(var + eps)).reshape(x.shape)


@pytest.fixture(scope="module")
def chapter_tensor():
    torch.manual_seed(4)  # the chapter's seed_everything(4) and its one draw
    return 3.0 * torch.randn(4, 6, 5, 5, dtype=torch.float64) + 1.0  # (N, C, H, W)


# --- the module behaves as the equations say (fast) ------------------------------------


@pytest.mark.parametrize("shape", [(2, 4, 3, 5), (3, 8, 2, 2), (1, 6, 7, 1)])
def test_channel_layer_norm_is_layer_norm_of_every_pixel(chapter_code, shape):
    torch.manual_seed(0)
    x = 2 * torch.randn(shape, dtype=torch.float64) + 1
    ours = chapter_code["ChannelLayerNorm"](shape[1]).double()(x)
    pixels = x.permute(0, 2, 3, 1).reshape(-1, shape[1])  # one row per (n, h, w)
    mu = pixels.mean(1, keepdim=True)
    var = ((pixels - mu) ** 2).mean(1, keepdim=True)
    expected = ((pixels - mu) / torch.sqrt(var + EPS)).reshape(
        shape[0], shape[2], shape[3], shape[1]).permute(0, 3, 1, 2)
    assert torch.allclose(ours, expected, atol=1e-12)


def test_channel_layer_norm_applies_its_scale_and_shift_per_channel(chapter_code):
    torch.manual_seed(0)
    norm = chapter_code["ChannelLayerNorm"](3).double()
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0, -1.0]))
        norm.bias.copy_(torch.tensor([0.0, 0.5, 3.0]))
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64)
    x_hat = per_position_by_hand(x)
    expected = norm.weight.view(1, 3, 1, 1) * x_hat + norm.bias.view(1, 3, 1, 1)
    assert torch.allclose(norm(x), expected, atol=1e-12)


def test_channel_layer_norm_uses_convnext_eps(chapter_code):
    assert chapter_code["ChannelLayerNorm"](4).eps == EPS


def test_channel_layer_norm_is_group_norm_with_one_group_only_for_a_single_position(
        chapter_code):
    torch.manual_seed(0)
    norm = chapter_code["ChannelLayerNorm"](6).double()
    single = torch.randn(3, 6, 1, 1, dtype=torch.float64)
    image = torch.randn(3, 6, 4, 4, dtype=torch.float64)
    assert torch.allclose(norm(single), per_sample_by_hand(single), atol=1e-12)
    assert not torch.allclose(norm(image), per_sample_by_hand(image), atol=1e-3)


# --- the glued numbers equal an independent recomputation ------------------------------


def test_convnext_layer_norm_agrees_with_pytorch_to_rounding(glued):
    assert glued["cnx_vs_channels_last"] < 1e-12
    assert glued["cnx_vs_per_pixel"] < 1e-12
    assert glued["fam_max_err"] < 1e-12  # the family table, ConvNeXt's row included


def test_difference_from_group_norm_equals_an_independent_computation(glued, chapter_tensor):
    gap = (per_position_by_hand(chapter_tensor) - per_sample_by_hand(chapter_tensor)).abs()
    assert gap.max().item() == pytest.approx(glued["cnx_vs_group_max"], rel=1e-9)
    assert gap.pow(2).mean().sqrt().item() == pytest.approx(glued["cnx_vs_group_rms"], rel=1e-9)


def test_channel_means_per_position_equal_an_independent_computation(glued, chapter_tensor):
    group_mean = per_sample_by_hand(chapter_tensor).mean(1).abs().max().item()
    assert group_mean == pytest.approx(glued["cnx_group_pixel_mean"], rel=1e-9)
    assert glued["cnx_pixel_mean"] < 1e-12  # "at every position" it is zero up to rounding


def test_group_norm_keeps_what_convnext_removes(glued):
    """The prose: the per-position channel mean is zero after ConvNeXt's LayerNorm, not
    after GroupNorm(1, C), and the two outputs differ by an amount of order one."""
    assert glued["cnx_group_pixel_mean"] > 0.1
    assert glued["cnx_vs_group_max"] > 0.1
    assert glued["cnx_vs_group_words"] == "differs from"


# --- the two -0.86 values ---------------------------------------------------------------


def test_measured_first_step_and_estimate_are_two_numbers(glued):
    gap = glued["watch_adam_estimate_gap"]
    assert gap == pytest.approx(abs(glued["watch_adam_estimate"] - glued["watch_taken_step1"]),
                                abs=1e-12)
    assert gap > 0


def test_the_two_values_are_shown_to_enough_digits_to_tell_them_apart(glued, prose):
    assert f"{glued['watch_taken_step1']:.4f}" != f"{glued['watch_adam_estimate']:.4f}"
    assert "{glue:text}`watch_taken_step1:.4f`" in prose
    assert "{glue:text}`watch_adam_estimate:.4f`" in prose


# --- the pre-activation ResNet: words follow the measurement ---------------------------


def test_pre_activation_words_follow_the_coefficients(glued):
    intact = all(abs(glued[f"fam_preact_identity_{d}"] - 1) < 0.1 for d in (1, 4, 16, 64))
    assert glued["fam_preact_words"].startswith(
        "the identity path delivers it intact" if intact else "the identity path does not")


def test_original_block_words_follow_the_coefficients(glued):
    gated = glued["fam_orig_identity_4"] < glued["fam_orig_identity_1"] < 0.7
    assert glued["fam_orig_words"].endswith("gates it" if gated else "measurably")


def test_gain_words_follow_the_gains(glued):
    grow = all(glued[f"fam_{name}_gain_64"] > glued[f"fam_{name}_gain_1"]
               for name in ("orig", "preact"))
    assert glued["fam_gain_words"].startswith(
        "Both gradients also grow" if grow else "The two gradients do not")


# --- the prose ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["cnx_vs_channels_last", "cnx_vs_per_pixel", "cnx_vs_group_max", "cnx_vs_group_rms",
     "cnx_vs_group_words", "cnx_pixel_mean", "cnx_group_pixel_mean", "watch_adam_estimate_gap",
     "fam_preact_words", "fam_orig_words", "fam_gain_words", "watch_pre_stream_words",
     "watch_pre_grad_words", "watch_post_grad_words", "watch_post_first_blocks"],
)
def test_glued_number_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)


def test_watched_stack_words_follow_the_measurement(glued):
    widens = glued["watch_stream_rms_last_pre"] > glued["watch_stream_rms_first_pre"]
    assert glued["watch_pre_stream_words"] == (
        "widens with depth" if widens else "does not widen with depth")
    similar = abs(glued["watch_grad_orders_pre"]) < 1
    assert glued["watch_pre_grad_words"].startswith(
        "gradients of similar sizes" if similar else "gradients whose sizes differ")
    vanish = glued["watch_grad_orders_post"] > 3
    assert glued["watch_post_grad_words"].startswith(
        "the worst gradients" if vanish else "gradients that do not vanish")
    assert glued["watch_post_first_blocks"].endswith(
        "next to no gradient at all" if vanish else "still get a gradient")


def test_watched_stream_sizes_name_their_setup(prose):
    paragraph = prose.split("Three different pictures.", 1)[1].split("\n\n", 1)[0]
    assert "this section's own" in paragraph and "after 60 steps of training" in paragraph
    assert "Chapter 4" in paragraph and "Chapter 6" in paragraph


def test_references_cite_convnext(prose):
    references = prose.split("## References", 1)[1]
    assert "A ConvNet for the 2020s" in references and "arXiv:2201.03545" in references


def test_a_quiz_asks_about_convnext_layer_norm(prose):
    quizzes = prose.split("## Check your understanding", 1)[1]
    assert "ConvNeXt" in quizzes
