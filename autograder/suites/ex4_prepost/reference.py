"""Reference blocks for ex4_prepost, and the inputs the block tests share (trusted side).

The suite never trusts a learner's block to compute its own expected output: it loads
random parameters into the learner's block and the same parameters into a reference
block here, and compares the two outputs.
"""

from __future__ import annotations

from functools import lru_cache

import torch
import torch.nn as nn

from autograder.checks import StudentError, fail

CONTRACT_KEYS = {"attn.in_proj_weight", "attn.in_proj_bias", "attn.out_proj.weight", "attn.out_proj.bias",
                 "ffn.0.weight", "ffn.0.bias", "ffn.2.weight", "ffn.2.bias",
                 "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"}


class Block(nn.Module):
    """The contract's four submodules."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def attend(self, h, attn_mask):
        return self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]


class PostNorm(Block):
    def forward(self, x, attn_mask=None):  # (B, T, C) -> (B, T, C)
        x = self.norm1(x + self.attend(x, attn_mask))
        return self.norm2(x + self.ffn(x))


class PreNorm(Block):
    def forward(self, x, attn_mask=None):  # (B, T, C) -> (B, T, C)
        x = x + self.attend(self.norm1(x), attn_mask)
        return x + self.ffn(self.norm2(x))


REFERENCE = {"PostNormBlock": PostNorm, "PreNormBlock": PreNorm}


@lru_cache(maxsize=64)
def reference_block(name: str, d_model: int, n_heads: int, d_ff: int) -> Block:
    """A float64 reference block, built once per size (every use loads all its parameters first)."""
    return REFERENCE[name](d_model, n_heads, d_ff).double()


def randn(shape, seed: int, dtype=torch.float32, scale: float = 1.0) -> torch.Tensor:
    """A normal tensor drawn from its own generator (never the global RNG)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def random_state(reference: nn.Module, seed: int) -> dict:
    """Parameters for the contract's keys, in float32: weights ~ 1/sqrt(fan_in), and norms that differ from
    each other and from the default (ones, zeros), so that a shared or swapped norm changes the output."""
    g = torch.Generator().manual_seed(seed)
    state = {}
    for key, value in sorted(reference.state_dict().items()):
        noise = torch.randn(value.shape, generator=g, dtype=torch.float64)
        if key.startswith("norm"):
            noise = 1 + 0.5 * noise if key.endswith("weight") else 0.5 * noise
        elif value.dim() == 2:
            noise = noise / value.shape[1] ** 0.5
        else:
            noise = 0.2 * noise
        state[key] = noise.float()
    return state


def masks(t: int, seed: int) -> dict:
    """attn_mask examples for a sequence of length t: none, causal (bool, True = masked), additive float."""
    return {"none": None, "causal bool": torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1),
            "float": randn((t, t), seed, scale=2.0)}


def loaded_block(sub, name: str, d_model: int, n_heads: int, d_ff: int, seed: int, dtype=torch.float32,
                 check_names: bool = True):
    """The learner's block ``name`` and the reference block (float64), both holding the same random parameters.

    ``check_names=False`` skips fetching the block's state_dict to name a missing parameter (a block with other
    names then fails on its output instead; the submodule test names the problem)."""
    block = sub.call(name, d_model, n_heads, d_ff, seed=seed)
    if dtype == torch.float64:
        sub.method(block, "double")
    reference = reference_block(name, d_model, n_heads, d_ff)
    state = random_state(reference, seed)
    missing = CONTRACT_KEYS - set(sub.state_dict(block)) if check_names else ()
    if missing:
        fail(f"{name} has no parameter {sorted(missing)[0]}: name the submodules attn, ffn, norm1 and norm2")
    try:
        sub.load_state_dict(block, state, strict=False)
    except StudentError:
        fail(f"the parameters of {name}(d_model, n_heads, d_ff) do not have the contract's shapes")
    reference.load_state_dict(state)
    return block, reference


def expected_output(reference: nn.Module, x: torch.Tensor, attn_mask=None) -> torch.Tensor:
    if attn_mask is not None and attn_mask.is_floating_point():
        attn_mask = attn_mask.double()
    with torch.no_grad():
        return reference(x.double(), attn_mask=attn_mask).to(x.dtype)
