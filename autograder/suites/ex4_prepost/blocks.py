"""The checks both block tasks run, against the reference block of the same name (see reference.py).

test_PostNormBlock.py and test_PreNormBlock.py call these with their own class name, so
each task has its own tests, points and hints.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from autograder.checks import assert_close, fail, is_a
from autograder.suites.ex4_prepost.mistakes import block_gradient_mistakes, block_mistakes
from autograder.suites.ex4_prepost.reference import expected_output, loaded_block, masks, randn

# (d_model, n_heads) pairs, d_ff, batch and sequence sizes: small, heads dividing d_model, T >= 2 (one position
# makes attention trivial).
sizes = st.tuples(st.sampled_from([(4, 1), (4, 2), (6, 3), (8, 2), (8, 4)]), st.sampled_from([3, 8, 16]),
                  st.integers(1, 3), st.integers(2, 6))
scales = st.sampled_from([0.3, 1.0, 5.0])
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}  # float32 block against a float64 reference


def check_submodules(sub, name: str, d_model: int = 8, n_heads: int = 2, d_ff: int = 12) -> None:
    block = sub.call(name, d_model, n_heads, d_ff, seed=0)
    described = sub.describe(block)

    def part(path):
        return sub.getattr(block, path)

    def is_torch(path: str, kind: str) -> bool:
        """Whether the block's submodule at ``path`` is an nn.<kind> (a subclass of it too)."""
        return is_a(described, kind, path)

    if not is_torch("attn", "MultiheadAttention"):
        fail("attn should be nn.MultiheadAttention(d_model, n_heads, batch_first=True)")
    if part("attn.batch_first") is not True:
        fail("attn should be built with batch_first=True: the inputs are (B, T, d_model)")
    if part("attn.embed_dim") != d_model or part("attn.num_heads") != n_heads:
        fail("attn should be nn.MultiheadAttention(d_model, n_heads, ...), in this order")
    if part("attn.dropout") != 0:
        fail("the block has no dropout: keep nn.MultiheadAttention's default dropout=0")
    ffn = sub.describe(part("ffn"))
    layers = [path for path in ffn["modules"] if "." not in path]

    def layers_are(*kinds: str) -> bool:
        return is_a(ffn, "Sequential") and len(layers) == len(kinds) and all(
            is_a(ffn, kind, path) for kind, path in zip(kinds, layers))

    if layers_are("Linear", "ReLU", "Linear"):
        fail("ffn's activation is ReLU: the contract's feed-forward uses nn.GELU()")
    if not layers_are("Linear", "GELU", "Linear"):
        fail("ffn should be nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))")
    shapes = {path: tuple(info["shape"]) for path, info in ffn["parameters"].items()}
    if shapes.get("0.weight") != (d_ff, d_model) or shapes.get("2.weight") != (d_model, d_ff):
        fail("ffn's Linear layers should map d_model -> d_ff -> d_model")
    for norm in ("norm1", "norm2"):
        if not is_torch(norm, "LayerNorm") or tuple(part(f"{norm}.normalized_shape")) != (d_model,):
            fail(f"{norm} should be nn.LayerNorm(d_model)")
    if any(is_a(described, "Dropout", path) for path in described["modules"]):
        fail("the block has no dropout: remove the nn.Dropout")


def check_separate_norms(sub, name: str) -> None:
    block = sub.call(name, 4, 1, 8, seed=0)
    if sub.getattr(block, "norm1") == sub.getattr(block, "norm2"):
        fail("norm1 and norm2 are the same module")


def check_forward(sub, name: str, sizes, seed: int, scale: float, mask: str = "none", check_names=True) -> None:
    (d_model, n_heads), d_ff, b, t = sizes
    block, reference = loaded_block(sub, name, d_model, n_heads, d_ff, seed, check_names=check_names)
    x = randn((b, t, d_model), seed + 1, scale=scale)
    attn_mask = masks(t, seed + 2)[mask]
    got = sub.call(block, x) if attn_mask is None else sub.call(block, x, attn_mask=attn_mask)
    what = f"{name}'s output" + ("" if attn_mask is None else f" with a {mask} attn_mask")
    assert_close(got, expected_output(reference, x, attn_mask), what, **TOLERANCE,
                 mistakes=block_mistakes(name, reference, x, attn_mask))


def check_gradient(sub, name: str) -> None:
    block, reference = loaded_block(sub, name, 6, 2, 10, seed=5, dtype=torch.float64)
    x = randn((2, 4, 6), 6, torch.float64, scale=2.0)
    dout = randn((2, 4, 6), 7, torch.float64)
    mask = masks(4, 8)["causal bool"]
    result = sub.run(block, x, attn_mask=mask, grad_wrt=(0,), dout=dout)
    leaf = x.clone().requires_grad_()
    (expected,) = torch.autograd.grad(reference(leaf, attn_mask=mask), leaf, dout)
    if result.grads[0] is None:
        fail("no gradient flows back to x")
    assert_close(result.grads[0], expected, "the gradient with respect to x", atol=1e-9, rtol=1e-7,
                 mistakes=block_gradient_mistakes(name, reference, x, mask, dout))


def check_input_unchanged(sub, name: str) -> None:
    block, _ = loaded_block(sub, name, 4, 2, 8, seed=9)
    x = randn((2, 3, 4), 10, scale=2.0)
    mask = masks(3, 11)["float"]
    after = sub.run(block, x, mask, return_args=True).args_after
    if not torch.equal(after[0], x):
        fail(f"{name} changed x in place")
    if not torch.equal(after[1], mask):
        fail(f"{name} changed attn_mask in place")
