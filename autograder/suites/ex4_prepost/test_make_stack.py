"""Task 3: make_stack(block_cls, depth, d_model, n_heads, d_ff) -> module with blocks and final_norm (3 points).

A stack is checked without trusting the learner's blocks (Tasks 1-2): block_cls is either
fixtures.ToyBlock, trusted blocks given parameters drawn here and computed here, or the
learner's own PreNormBlock/PostNormBlock, whose output is then compared with chaining those
same blocks. The final norm is always applied here, from what it holds.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from autograder.checks import (Handle, StudentError, assert_close, fail, is_a, points, reported, seeded_state,
                               single_threaded)
from autograder.sandboxed.fixtures import ToyBlock
from autograder.suites.ex4_prepost.mistakes import stack_mistakes
from autograder.suites.ex4_prepost.reference import masks, randn

PART = "make_stack"
TITLE = "Task 3: make_stack"
FORBIDDEN = set()

TOY = "torch:fixtures.ToyBlock"
SIZES = dict(d_model=8, n_heads=2, d_ff=12)
LAYER_NORM, IDENTITY = "LayerNorm", "Identity"  # what a final_norm should be an instance of (checks.is_a)


def block_class(sub, name: str):
    """A handle to a class in the worker: the learner's (by its name) or fixtures.ToyBlock (TOY)."""
    return sub.getattr(name, "__mro__")[0]


def build(sub, name: str, depth: int, seed: int = 0):
    d = SIZES
    return sub.call("make_stack", block_class(sub, name), depth, d["d_model"], d["n_heads"], d["d_ff"], seed=seed)


def blocks_of(sub, stack) -> list:
    blocks = sub.getattr(stack, "blocks")
    return [sub.method(blocks, "__getitem__", i) for i in range(sub.method(blocks, "__len__"))]


def final_kind(sub, final) -> str:
    """LAYER_NORM or IDENTITY when the module is an instance of nn.LayerNorm or nn.Identity (a subclass too), else
    ""."""
    if not getattr(final, "is_module", False):
        return ""
    described = sub.describe(final)
    return next((kind for kind in (LAYER_NORM, IDENTITY) if is_a(described, kind)), "")


def toy_states(sub, blocks: list) -> list[dict]:
    """Parameters drawn here for each fixtures.ToyBlock of a stack, loaded into it; one per position, the same
    for a block that appears at two positions."""
    states = {}
    for i, block in enumerate(blocks):
        if block not in states:
            states[block] = seeded_state(lambda: ToyBlock(**SIZES), 100 + i)
            try:
                sub.load_state_dict(block, states[block])
            except StudentError:
                fail("the blocks should be block_cls(d_model, n_heads, d_ff), with the sizes you are given")
    return [states[block] for block in blocks]


def final_norm_of(sub, final: Handle, h: torch.Tensor) -> torch.Tensor:
    """What the stack's final_norm makes of h, computed here: h itself for an nn.Identity, h normalized with the
    weight, bias and eps it reports for an nn.LayerNorm(d_model)."""
    kind = final_kind(sub, final)
    if kind == IDENTITY:
        return h
    if kind != LAYER_NORM:
        fail("final_norm should be nn.LayerNorm(d_model) or nn.Identity()")
    d = SIZES["d_model"]
    weight = reported(sub.getattr(final, "weight"), (d,), "final_norm's weight")
    bias = reported(sub.getattr(final, "bias"), (d,), "final_norm's bias")
    eps = sub.getattr(final, "eps")
    if type(eps) not in (int, float) or not 0 <= eps < math.inf:
        fail("final_norm's eps should be a number, zero or more")
    with torch.no_grad(), single_threaded():
        return F.layer_norm(h.double(), (d,), weight.double(), bias.double(), float(eps)).to(h.dtype)


@points(0.5)
@pytest.mark.parametrize("name, depth", [("PreNormBlock", 2), ("PostNormBlock", 1), (TOY, 3)])
def test_blocks_is_a_modulelist_of_depth_blocks_of_block_cls(sub, name, depth):
    """self.blocks = nn.ModuleList(block_cls(d_model, n_heads, d_ff) for _ in range(depth)): the class you are
    given, not one chosen by name, exactly depth times."""
    stack = build(sub, name, depth)
    blocks = sub.getattr(stack, "blocks")
    if not getattr(blocks, "is_module", False) or not is_a(sub.describe(blocks), "ModuleList"):
        fail("blocks should be an nn.ModuleList")
    found = blocks_of(sub, stack)
    if len(found) != depth:
        fail("the number of blocks differs from depth")
    wanted = block_class(sub, name)
    if any(sub.getattr(block, "__class__") != wanted for block in found):
        fail("the blocks should be instances of block_cls")


@points(0.5)
def test_blocks_share_no_parameters(sub):
    """Call block_cls(...) once per block: a list like [block] * depth repeats one block, so all the blocks share
    its parameters."""
    seen = set()
    for block in blocks_of(sub, build(sub, TOY, 3)):
        ids = set(sub.describe(block)["parameter_ids"])
        if ids & seen:
            fail("some blocks share parameters")
        seen |= ids


@points(1)
@pytest.mark.parametrize("name", ["PreNormBlock", "PostNormBlock", TOY])
def test_final_norm_is_a_layernorm_for_prenorm_and_identity_otherwise(sub, name):
    """final_norm = nn.LayerNorm(d_model) when block_cls is PreNormBlock (its stream is never normalized
    otherwise), and nn.Identity() for any other block class."""
    final = sub.getattr(build(sub, name, 1), "final_norm")
    wanted = LAYER_NORM if name == "PreNormBlock" else IDENTITY
    kind = final_kind(sub, final)
    if kind != wanted and final_norm_pattern(sub):
        fail(final_norm_pattern(sub))
    if name == "PreNormBlock":
        if kind != LAYER_NORM:
            fail("final_norm of a PreNormBlock stack should be nn.LayerNorm(d_model)")
        if tuple(sub.getattr(final, "normalized_shape")) != (SIZES["d_model"],):
            fail("final_norm should be nn.LayerNorm(d_model)")
    elif kind != IDENTITY:
        fail(f"final_norm of a {name.split('.')[-1]} stack should be nn.Identity()")


@points(1)
@pytest.mark.parametrize("name, mask", [(TOY, "none"), (TOY, "causal bool"), ("PreNormBlock", "float")])
def test_forward_runs_the_blocks_in_order_with_the_mask_then_final_norm(sub, name, mask):
    """forward(x, attn_mask=None) calls each block in order as block(x, attn_mask=attn_mask), feeding each block's
    output to the next, and returns final_norm of the last output (no extra norm, nothing skipped)."""
    depth, t = 2, 4
    stack = build(sub, name, depth, seed=1)
    x = randn((2, t, SIZES["d_model"]), 2)
    attn_mask = masks(t, 3)[mask]
    kwargs = {} if attn_mask is None else {"attn_mask": attn_mask}
    found = blocks_of(sub, stack)
    if len(found) != depth:
        fail("the number of blocks differs from depth")
    h = x
    if name == TOY:  # the trusted blocks' answer, computed here from the parameters given to them
        local_mask = None if attn_mask is None else attn_mask.double() if attn_mask.is_floating_point() else attn_mask
        h = h.double()
        local = ToyBlock(**SIZES).double()
        for state in toy_states(sub, found):
            local.load_state_dict(state)
            with torch.no_grad():
                h = local(h, attn_mask=local_mask)
        h = h.float()
    else:  # relative to the learner's own blocks (Task 2 scores what they compute)
        for block in found:
            h = sub.call(block, h, **kwargs)
            if not isinstance(h, torch.Tensor) or h.shape != x.shape or not h.is_floating_point():
                fail(f"a {name} should return a tensor of its input's shape")
    final_norm = sub.getattr(stack, "final_norm")
    expected = final_norm_of(sub, final_norm, h)
    what = "the stack's output" + ("" if attn_mask is None else f" with a {mask} attn_mask")
    run = run_toy_block(sub) if name == TOY else (
        lambda block, h, mask: sub.call(block, h, **({} if mask is None else {"attn_mask": mask})))
    assert_close(sub.call(stack, x, **kwargs), expected, what, atol=1e-4,
                 mistakes=stack_mistakes(run, lambda h: sub.call(final_norm, h), found, x, attn_mask))


def run_toy_block(sub):
    """run(block, h, mask): a fixtures.ToyBlock of the stack, computed here from its state_dict."""
    local = ToyBlock(**SIZES).double()

    def run(block, h, mask):
        local.load_state_dict(sub.state_dict(block))
        if mask is not None and mask.is_floating_point():
            mask = mask.double()
        with torch.no_grad():
            return local(h.double(), attn_mask=mask).float()

    return run


def final_norm_pattern(sub) -> str:
    """What a make_stack whose final_norm is wrong for some block class does, over the three classes."""
    kinds = {name: final_kind(sub, sub.getattr(build(sub, name, 1), "final_norm"))
             for name in ("PreNormBlock", "PostNormBlock", TOY)}
    if set(kinds.values()) == {IDENTITY}:
        return "final_norm is always nn.Identity(): a PreNormBlock stack needs nn.LayerNorm(d_model), as its " \
               "blocks never normalize the stream"
    if set(kinds.values()) == {LAYER_NORM}:
        return "final_norm is nn.LayerNorm for every block class: only a PreNormBlock stack needs one"
    if kinds == {"PreNormBlock": IDENTITY, "PostNormBlock": LAYER_NORM, TOY: IDENTITY}:
        return "final_norm is chosen the wrong way round: nn.LayerNorm(d_model) for a PreNormBlock stack, " \
               "nn.Identity() for a PostNormBlock one"
    if kinds == {"PreNormBlock": LAYER_NORM, "PostNormBlock": IDENTITY, TOY: LAYER_NORM}:
        return "final_norm is nn.LayerNorm for a ToyBlock stack too: only a PreNormBlock stack gets one; test " \
               "block_cls is PreNormBlock, not block_cls is not PostNormBlock"
    return ""
