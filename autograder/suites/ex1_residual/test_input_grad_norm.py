"""Task 3: input_grad_norm(model, x) -> float, the L2 norm of d(model(x).sum())/dx (4 points).

The models are trusted (fixtures.TanhMLP) and hold parameters drawn here, where the
expected norm is computed: it never depends on the learner's other tasks, nor on what
the worker reports its model holds.
"""

import torch
from hypothesis import given, strategies as st

from autograder.checks import SETTINGS, Diagnosis, fail, points, tensor_info
from autograder.suites.ex1_residual.common import randn, tanh_mlp
from autograder.suites.ex1_residual.mistakes import norm_mistakes, stored_grad_mistake

PART = "input_grad_norm"
TITLE = "Task 3: input_grad_norm"
FORBIDDEN = set()

TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10}  # relative


def expected_norm(model, x: torch.Tensor) -> float:
    leaf = x.double().requires_grad_()
    (grad,) = torch.autograd.grad(model(leaf).sum(), leaf)
    return grad.norm().item()


def as_number(value, what: str) -> float:
    """The value as a float; a 0-d tensor is accepted here (its type is another test's business)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if type(value) in (float, int):
        return float(value)
    fail(f"{what} should return a number, got {type(value).__name__}")


def check_close(got: float, wanted: float, what: str, rtol: float, mistakes=()) -> None:
    """``got`` equals ``wanted`` to ``rtol``; if not, the message names the mistake (description, value) it equals."""
    if abs(got - wanted) <= rtol * abs(wanted) + 1e-300:
        return
    message = f"{what} is off by a factor {got / wanted:.6g}" if wanted else f"{what} should be 0"
    for description, value in mistakes:
        if value is not None and abs(got - value) <= rtol * abs(value) + 1e-300:
            raise Diagnosis(f"{message}: {description}")
    fail(message)


@points(2)
@given(leading=st.lists(st.integers(1, 4), min_size=0, max_size=2), d_in=st.integers(1, 6), d_out=st.integers(1, 4),
       seed=st.integers(0, 2**16), scale=st.sampled_from([0.1, 1.0, 5.0]),
       dtype=st.sampled_from([torch.float32, torch.float64]))
@SETTINGS
def test_matches_the_norm_of_the_input_gradient(sub, leading, d_in, d_out, seed, scale, dtype):
    """Differentiate model(x).sum() (the sum, not the mean) with respect to x, then take the L2 norm of that whole
    gradient (its square root of the sum of squares over all entries), for inputs of any shape and dtype."""
    model, local = tanh_mlp(sub, d_in, 7, d_out, seed, dtype)
    x = randn((*leading, d_in), seed + 1, dtype, scale)
    got = as_number(sub.call("input_grad_norm", model, x), "input_grad_norm")
    check_close(got, expected_norm(local, x), "input_grad_norm", TOLERANCE[dtype], norm_mistakes(local, x))


@points(0.5)
def test_returns_a_python_float(sub):
    """Return a Python float (grad.norm().item()), not a tensor."""
    model, _ = tanh_mlp(sub, 3, 4, 2, seed=2)
    value = sub.call("input_grad_norm", model, randn((2, 3), 3))
    if type(value) is not float:
        fail(f"input_grad_norm returned a {type(value).__name__}, expected a Python float")


@points(0.5)
def test_leaves_an_x_without_requires_grad_unchanged(sub):
    """Work on a detached copy of x (x.detach().clone().requires_grad_()): x itself keeps requires_grad=False, gets no
    .grad and keeps its values."""
    model, _ = tanh_mlp(sub, 3, 4, 2, seed=4)
    x = randn((2, 3), 5)
    after = sub.run("input_grad_norm", model, x, return_args=True).args_after[1]
    info = tensor_info(after)
    if info.requires_grad:
        fail("x.requires_grad was False and is True after input_grad_norm")
    if info.has_grad:
        fail("input_grad_norm left a .grad on x")
    if not torch.equal(after, x):
        fail("input_grad_norm changed the values of x")


@points(0.5)
def test_leaves_an_x_that_requires_grad_unchanged(sub):
    """When x already requires grad, it must still require grad afterwards and get no .grad from your call: take
    the gradient of a detached copy, not of x."""
    model, _ = tanh_mlp(sub, 3, 4, 2, seed=6)
    x = randn((2, 3), 7)
    after = sub.run("input_grad_norm", model, x, grad_wrt=(1,), return_args=True).args_after[1]
    info = tensor_info(after)
    if not info.requires_grad:
        fail("x.requires_grad was True and is False after input_grad_norm")
    if info.has_grad:
        fail("input_grad_norm left a .grad on x")


@points(0.5)
def test_ignores_and_keeps_the_gradients_stored_on_the_model(sub):
    """Compute the gradient with torch.autograd.grad(out, x_copy): .backward() would add into (and depend on) the
    .grad already stored on the model's parameters."""
    model, local = tanh_mlp(sub, 4, 5, 3, seed=8, dtype=torch.float64)
    sub.set_grads(model, 5.0)
    x = randn((3, 4), 9, torch.float64)
    got = as_number(sub.call("input_grad_norm", model, x), "input_grad_norm")
    check_close(got, expected_norm(local, x), "input_grad_norm on a model whose parameters have a .grad", 1e-10,
                norm_mistakes(local, x))
    found = {name: sub.getattr(model, f"{name}.grad") for name in ("0.weight", "0.bias", "2.weight", "2.bias")}
    for grad in found.values():
        if not isinstance(grad, torch.Tensor) or not torch.equal(grad, torch.full_like(grad, 5.0)):
            fail(stored_grad_mistake(local, x, 5.0, found))
