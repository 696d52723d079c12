"""Task 4: ffn_grad_norms(stack, x, target) -> list[float] (3 points).

The stack is a trusted fixtures.ToyStack (blocks x + ffn(x), then a Linear head) holding
parameters drawn here, where the expected norms are computed from the same parameters: they
never depend on Tasks 1-3, nor on what the worker reports its stack holds.
"""

from functools import lru_cache

import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from autograder.checks import SETTINGS, Diagnosis, fail, loaded, points, seeded_state
from autograder.sandboxed.fixtures import ToyStack
from autograder.suites.ex4_prepost.mistakes import norm_mistakes
from autograder.suites.ex4_prepost.reference import randn

PART = "ffn_grad_norms"
TITLE = "Task 4: ffn_grad_norms"
FORBIDDEN = set()

TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-9}  # relative


@lru_cache(maxsize=64)
def local_stack(depth, d_model, d_ff) -> ToyStack:
    """A float64 ToyStack here, built once per size (every use loads all its parameters first)."""
    return ToyStack(depth, d_model, d_ff).double()


def toy_stack(sub, depth, d_model, d_ff, seed, dtype=torch.float32):
    """A fixtures.ToyStack in the worker (in dtype) holding parameters drawn here, and the same stack here, in
    float64."""
    state = seeded_state(lambda: ToyStack(depth, d_model, d_ff), seed)
    stack = loaded(sub, "fixtures.ToyStack", state, depth, d_model, d_ff)
    if dtype == torch.float64:
        sub.method(stack, "double")
    local = local_stack(depth, d_model, d_ff)
    local.load_state_dict(state)
    return stack, local


def expected_norms(local, x, target) -> list[float]:
    weights = [block.ffn[2].weight for block in local.blocks]
    grads = torch.autograd.grad(F.mse_loss(local(x.double()), target.double()), weights)
    return [g.norm().item() for g in grads]


def as_numbers(value, depth: int) -> list[float]:
    """The values as floats; tuples and 0-d tensors are accepted here (the type is another test's business)."""
    if isinstance(value, torch.Tensor) and value.dim() == 1:
        value = list(value)
    if not isinstance(value, (list, tuple)):
        fail(f"ffn_grad_norms should return a list, got {type(value).__name__}")
    if len(value) != depth:
        fail("ffn_grad_norms should return one value per block of the stack")
    numbers = []
    for v in value:
        if isinstance(v, torch.Tensor) and v.numel() == 1:
            v = v.item()
        if type(v) not in (float, int):
            fail(f"ffn_grad_norms should return numbers, got a {type(v).__name__}")
        numbers.append(float(v))
    return numbers


def close(got: list[float], wanted: list[float], rtol: float) -> bool:
    return len(got) == len(wanted) and all(abs(a - e) <= rtol * abs(e) + 1e-12 for a, e in zip(got, wanted))


def check_norms(got: list[float], wanted: list[float], what: str, rtol: float, mistakes=()) -> None:
    """``got`` equals ``wanted``; if not, the message names the mistake (description, values) it equals."""
    for i, (a, e) in enumerate(zip(got, wanted)):
        if not abs(a - e) <= rtol * abs(e) + 1e-12:
            message = f"{what}: the value for block {i} is off by a factor {a / e:.6g}" if e else \
                f"{what}: the value for block {i} should be 0"
            named = next((description for description, values in mistakes if close(got, values, rtol)), None)
            if named:
                raise Diagnosis(f"{message}: {named}")
            fail(message)


@points(0.5)
def test_returns_a_list_with_one_python_float_per_block(sub):
    """Return a Python list with one float per block, in block order ([g.norm().item() for g in grads]), not a
    tensor or a list of tensors."""
    stack, _ = toy_stack(sub, 3, 4, 8, seed=1)
    value = sub.call("ffn_grad_norms", stack, randn((2, 3, 4), 2), randn((2, 3, 4), 3))
    if type(value) is not list:
        fail(f"ffn_grad_norms returned a {type(value).__name__}, expected a list")
    if len(value) != 3:
        fail("ffn_grad_norms should return one value per block of the stack")
    if any(type(v) is not float for v in value):
        fail("the values should be Python floats (use .item())")


@points(1.5)
@given(depth=st.integers(2, 4), d_model=st.integers(1, 6), d_ff=st.sampled_from([3, 8]), b=st.integers(1, 3),
       t=st.integers(1, 5), seed=st.integers(0, 2**16), dtype=st.sampled_from([torch.float32, torch.float64]))
@settings(SETTINGS, max_examples=5)
def test_matches_the_gradient_norms_of_each_blocks_ffn_output_weight(sub, depth, d_model, d_ff, b, t, seed, dtype):
    """With loss = F.mse_loss(stack(x), target) (the mean, not the sum, of the squared errors), differentiate the
    loss with respect to stack.blocks[i].ffn[2].weight (the second Linear's weight, not its bias or ffn[0]) and take
    the Frobenius norm (not squared) of each gradient, in block order."""
    stack, local = toy_stack(sub, depth, d_model, d_ff, seed, dtype)
    x, target = randn((b, t, d_model), seed + 1, dtype), randn((b, t, d_model), seed + 2, dtype)
    got = as_numbers(sub.call("ffn_grad_norms", stack, x, target), depth)
    check_norms(got, expected_norms(local, x, target), "ffn_grad_norms", TOLERANCE[dtype],
                norm_mistakes(local, x, target))


@points(1)
def test_does_not_depend_on_gradients_already_stored_on_the_parameters(sub):
    """Use torch.autograd.grad(loss, weights), or zero the gradients before loss.backward(): backward() adds into
    the .grad already stored on the parameters, so a second call (or earlier training) changes your answer."""
    stack, local = toy_stack(sub, 2, 4, 8, seed=4, dtype=torch.float64)
    sub.set_grads(stack, 5.0)
    x, target = randn((2, 3, 4), 5, torch.float64), randn((2, 3, 4), 6, torch.float64)
    wanted = expected_norms(local, x, target)
    for call in ("a first call", "a second call"):
        got = as_numbers(sub.call("ffn_grad_norms", stack, x, target), 2)
        check_norms(got, wanted, f"ffn_grad_norms on a stack whose parameters have a .grad ({call})", 1e-9,
                    norm_mistakes(local, x, target, stored=5.0))
