"""Task 1: class PostNormBlock(d_model, n_heads, d_ff), forward(x, attn_mask=None) (2 points).

x = norm1(x + attn(x)); x = norm2(x + ffn(x)). The learner's block gets random parameters and is
compared with the reference block of reference.py holding the same ones (see blocks.py).
"""

import pytest
from hypothesis import given, settings, strategies as st

from autograder.checks import SETTINGS, points
from autograder.suites.ex4_prepost import blocks

PART = "PostNormBlock"
TITLE = "Task 1: PostNormBlock"
FORBIDDEN = set()


@points(0.25)
def test_has_the_contract_submodules(sub):
    """Build exactly attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True), ffn = nn.Sequential(
    nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model)), norm1 = nn.LayerNorm(d_model) and norm2 =
    nn.LayerNorm(d_model), with no dropout."""
    blocks.check_submodules(sub, PART)


@points(0.25)
def test_norm1_and_norm2_are_two_separate_layernorms(sub):
    """Create two LayerNorm modules: norm1 and norm2 each have their own weight and bias."""
    blocks.check_separate_norms(sub, PART)


@points(0.5)
@given(sizes=blocks.sizes, seed=st.integers(0, 2**16), scale=blocks.scales)
@settings(SETTINGS, max_examples=5)
def test_matches_the_reference_block_without_a_mask(sub, sizes, seed, scale):
    """Add first, then normalize: x = norm1(x + attn(x, x, x)), then x = norm2(x + ffn(x)). Both norms sit on
    the residual stream, after the add, and each norm is used once."""
    blocks.check_forward(sub, PART, sizes, seed, scale, check_names=False)


@points(0.5)
@pytest.mark.parametrize("mask", ["causal bool", "float"])
def test_passes_attn_mask_unchanged_to_attention(sub, mask):
    """Call self.attn(q, k, v, attn_mask=attn_mask, need_weights=False)[0] with the attn_mask you are given, as it
    is (boolean masks mark the positions to hide with True; float masks are added to the attention scores)."""
    blocks.check_forward(sub, PART, ((8, 2), 16, 2, 5), seed=3, scale=1.0, mask=mask)


@points(0.25)
def test_gradients_match_the_reference_in_float64(sub):
    """Build the output from differentiable operations only (no .detach(), .data or torch.no_grad() in forward),
    and do not create float32 tensors inside forward: a float64 block on a float64 input must work."""
    blocks.check_gradient(sub, PART)


@points(0.25)
def test_leaves_x_and_the_mask_unchanged(sub):
    """Do not modify x or attn_mask in place (no x += ...): assign the sums to a new variable."""
    blocks.check_input_unchanged(sub, PART)
