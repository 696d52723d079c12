"""Task 2: make_mlp(depth, dim, residual) -> nn.Sequential of depth blocks (4 points).

With residual=True the blocks are the learner's own ResidualBlock; the tests check that
make_mlp wraps each sublayer in it, never what ResidualBlock computes (Task 1's job), and
find a block's sublayer without relying on the name ResidualBlock stores it under.
What a module is, is asked as isinstance (``checks.is_a``; for ResidualBlock, its class's
MRO), never by its class's name: a subclass of nn.Sequential or nn.Linear that behaves like
one passes, a class that is merely named so does not.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from autograder.checks import StudentError, fail, is_a, points, reported
from autograder.suites.ex1_residual.common import randn

PART = "make_mlp"
TITLE = "Task 2: make_mlp"
FORBIDDEN = set()

SUBLAYER_KINDS = ["Linear", "ReLU", "Linear"]


def build(sub, depth, dim, residual, seed=0):
    return sub.call("make_mlp", depth, dim, residual, seed=seed)


def blocks_of(sub, mlp) -> list:
    """Handles of the top-level blocks, by position (a repeated block appears once per position)."""
    return [sub.method(mlp, "__getitem__", i) for i in range(sub.method(mlp, "__len__"))]


def sublayer_of(sub, block):
    """The sublayer of a block, and its description: the block itself when it is an nn.Sequential, otherwise the
    block's only direct submodule, or its only direct nn.Sequential (a ResidualBlock's sublayer, whatever
    ResidualBlock calls it and whatever else it holds)."""
    desc = sub.describe(block)
    if not is_a(desc, "Sequential"):
        children = [name for name in desc["modules"] if "." not in name]
        if len(children) != 1:
            children = [name for name in children if is_a(desc, "Sequential", name)]
        if len(children) != 1:
            fail(f"a block ({desc['type']}) should hold one sublayer")
        block = sub.getattr(block, next(iter(children)))
        desc = sub.describe(block)
    return block, desc


def is_residual_block(sub, block) -> bool:
    """Whether ``block`` is an instance of the learner's ResidualBlock class (a subclass of it counts)."""
    try:
        residual_block = sub.getattr("ResidualBlock", "__mro__")[0]
        return residual_block in sub.getattr(block, "__class__.__mro__")
    except (StudentError, TypeError, IndexError):  # no ResidualBlock class, or an MRO that is not a tuple
        return False


def kind_of(sub, block) -> str:
    """"ResidualBlock" or "Sequential" when the block is an instance of one, else its class's name (for messages)."""
    if is_residual_block(sub, block):
        return "ResidualBlock"
    desc = sub.describe(block)
    return "Sequential" if is_a(desc, "Sequential") else str(desc["type"])


def miscounted(length: int, depth: int) -> str:
    """What a stack of ``length`` blocks, for ``depth``, got wrong."""
    if length == depth - 1:
        return "the stack has one block fewer than depth: the loop should run depth times"
    if length == 1:
        return "the stack has a single block, whatever the depth: make depth blocks, each with its own sublayer"
    return "the number of blocks differs from depth"


def inverted(sub) -> bool:
    """Whether residual=True gives bare sublayers and residual=False ResidualBlocks."""
    kinds = {residual: {kind_of(sub, block) for block in blocks_of(sub, build(sub, 2, 4, residual))}
             for residual in (True, False)}
    return kinds == {True: {"Sequential"}, False: {"ResidualBlock"}}


@points(0.5)
@pytest.mark.parametrize("depth", [1, 4])
@pytest.mark.parametrize("residual", [False, True])
def test_returns_an_nn_sequential_of_depth_blocks(sub, depth, residual):
    """Return nn.Sequential(*blocks) with exactly `depth` blocks (not a list or an nn.ModuleList)."""
    mlp = build(sub, depth, 3, residual)
    if not getattr(mlp, "is_module", False) or not is_a(sub.describe(mlp), "Sequential"):
        fail("make_mlp should return an nn.Sequential")
    length = sub.method(mlp, "__len__")
    if length != depth:
        fail(miscounted(length, depth))
    if not residual:  # the bare sublayers: whatever class the stack is, it runs them one after another
        x = randn((2, 3), depth)
        h = x
        for block in blocks_of(sub, mlp):
            h = sub.call(block, h)
        out = sub.call(mlp, x)
        if not isinstance(out, torch.Tensor) or not isinstance(h, torch.Tensor) or out.shape != h.shape \
                or not torch.allclose(out, h):
            fail("the stack should run its blocks in order, each on the previous one's output, as nn.Sequential "
                 "does")


@points(1)
@pytest.mark.parametrize("residual", [False, True])
def test_each_sublayer_is_linear_relu_linear_of_width_dim(sub, residual):
    """Each block's sublayer is nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim)), in this order,
    with biases."""
    dim = 5
    for block in blocks_of(sub, build(sub, 3, dim, residual)):
        sublayer, desc = sublayer_of(sub, block)
        layers = [name for name in desc["modules"] if "." not in name]
        kinds = [next((kind for kind in SUBLAYER_KINDS if is_a(desc, kind, name)), None) for name in layers]
        if not is_a(desc, "Sequential") or kinds != SUBLAYER_KINDS:
            named = ", ".join(str(desc["modules"][name]) for name in layers)
            if named == ", ".join(SUBLAYER_KINDS):
                fail("a sublayer holds a class named like nn.Linear or nn.ReLU that is not one (nor a subclass): "
                     "build it from nn.Linear(dim, dim), nn.ReLU() and nn.Linear(dim, dim) themselves")
            fail(f"a sublayer is {desc['type']}({named}), expected Sequential(Linear, ReLU, Linear)")
        shapes = {name: tuple(info["shape"]) for name, info in desc["parameters"].items()}
        wanted = {"0.weight": (dim, dim), "0.bias": (dim,), "2.weight": (dim, dim), "2.bias": (dim,)}
        if shapes == {name: shape for name, shape in wanted.items() if name.endswith("weight")}:
            fail("the Linear layers of a sublayer have no bias: keep nn.Linear's default bias=True")
        if shapes != wanted:
            fail("the Linear layers of a sublayer should both be nn.Linear(dim, dim), with a bias")
        state = sub.state_dict(sublayer)
        w0, b0, w2, b2 = (reported(state.get(name), wanted[name], f"the sublayer's {name}")
                          for name in ("0.weight", "0.bias", "2.weight", "2.bias"))
        x = randn((4, dim), 7)
        with torch.no_grad():
            expected = F.linear(F.relu(F.linear(x.double(), w0.double(), b0.double())), w2.double(), b2.double())
        out = sub.call(sublayer, x)
        if not isinstance(out, torch.Tensor) or out.shape != expected.shape \
                or not torch.allclose(out.double(), expected, atol=1e-5):
            fail("a sublayer should compute what nn.Linear -> nn.ReLU -> nn.Linear compute with its parameters")


@points(0.75)
def test_residual_true_wraps_each_sublayer_in_your_ResidualBlock(sub):
    """With residual=True every block is ResidualBlock(sublayer), using the ResidualBlock class from Task 1."""
    for block in blocks_of(sub, build(sub, 3, 4, True)):
        kind = kind_of(sub, block)
        if kind == "Sequential" and inverted(sub):
            fail("the residual flag is inverted: residual=True gives the bare sublayers, residual=False the "
                 "ResidualBlocks")
        if kind != "ResidualBlock":
            fail(f"with residual=True a block is a {kind.split('.')[-1]}, not your ResidualBlock: wrap each sublayer "
                 f"in the ResidualBlock class of Task 1")


@points(0.75)
def test_residual_false_puts_the_bare_sublayers_in_the_stack(sub):
    """With residual=False there is no shortcut: the blocks are the nn.Sequential sublayers themselves, not wrapped
    in ResidualBlock or anything else."""
    for block in blocks_of(sub, build(sub, 3, 4, False)):
        kind = kind_of(sub, block)
        if kind == "ResidualBlock" and inverted(sub):
            fail("the residual flag is inverted: residual=True gives the bare sublayers, residual=False the "
                 "ResidualBlocks")
        if kind == "ResidualBlock":
            fail("with residual=False a block is still a ResidualBlock: the residual flag makes no difference")
        if kind != "Sequential":
            fail(f"with residual=False a block is a {kind}, expected the bare nn.Sequential sublayer")


@points(0.5)
@pytest.mark.parametrize("residual", [False, True])
def test_blocks_share_no_parameters(sub, residual):
    """Create a new sublayer (and block) inside the loop, once per block: `[block] * depth` or one sublayer reused
    in every block makes all blocks share their weights."""
    seen = set()
    for block in blocks_of(sub, build(sub, 3, 4, residual)):
        ids = set(sub.describe(block)["parameter_ids"])
        if ids & seen:
            fail("some blocks share parameters")
        seen |= ids


@points(0.5)
def test_linear_layers_keep_pytorch_default_init(sub):
    """Keep nn.Linear's default initialization (uniform in +-1/sqrt(dim) for weights and biases): do not re-initialize
    the weights or zero the biases."""
    dim = 48
    state = sub.state_dict(build(sub, 3, dim, False, seed=1))
    bound = 1 / math.sqrt(dim)
    tensors = [t.double() for t in state.values() if isinstance(t, torch.Tensor)]
    weights = [t.flatten() for t in tensors if t.dim() == 2]
    biases = [t for t in tensors if t.dim() == 1]
    if not weights:
        fail("the MLP has no Linear weights")
    for kind, values, tolerance in (("weight", weights, 0.1), ("bias", biases, 0.25)):
        if not values:
            continue  # a missing bias is the sublayer test's business
        values = torch.cat(values)
        if kind == "bias" and not values.any():
            fail("the biases are all zero: keep nn.Linear's default initialization")
        if values.abs().max() > bound * (1 + 1e-6):
            fail(f"some {kind} values lie outside nn.Linear's default range")
        ratio = values.std() / (bound / math.sqrt(3))
        if not 1 - tolerance < ratio < 1 + tolerance:
            fail(f"the {kind} values do not look like nn.Linear's default uniform initialization")
