"""Task 2: class BatchNorm1d(num_features, eps=1e-5, momentum=0.1), a drop-in for nn.BatchNorm1d (3 points).

The module is meant to call the learner's own ``batch_norm``. While the module runs, the
grader puts its own reference ``batch_norm`` (``fixtures.batch_norm``, in the worker) in
its place, so the module is judged on its own work and a bug in the learner's function
costs only Task 1. A step passes when the module's output and running statistics match
PyTorch's or the reference's, both computed here from the same input and the state the
module reports; a module that raises fails.
"""

from math import inf

import pytest
import torch
import torch.nn as nn

from autograder.checks import Diagnosis, StudentError, fail, points, reported
from autograder.suites.ex3_batchnorm.mistakes import step_mistake
from autograder.suites.ex3_batchnorm.reference import TOLERANCE, expected, grader_reference, make_batch, mismatch

PART = "BatchNorm1d"
TITLE = "Task 2: BatchNorm1d"
FORBIDDEN = {"batch_norm", "instance_norm"}

STATE = ("weight", "bias", "running_mean", "running_var")


def state_of(sub, module) -> dict:
    """The module's weight, bias, running_mean and running_var, as the worker reports them."""
    state = {}
    for name in STATE:
        try:
            state[name] = sub.getattr(module, name)
        except StudentError:
            fail(f"BatchNorm1d has no attribute {name}: keep the names nn.BatchNorm1d uses")
        if not isinstance(state[name], torch.Tensor):
            fail(f"BatchNorm1d's {name} should be a tensor")
    return state


def check_step(sub, module, x, training: bool, momentum: float, eps: float, what: str) -> None:
    """One forward of the module: output and running statistics after it, against PyTorch's and against the
    grader's reference batch_norm on the same input and state, both computed here. ``training``, ``momentum`` and
    ``eps`` are the module's intended settings."""
    before = state_of(sub, module)
    for name in STATE:  # a variance is never negative: sqrt(running_var + eps) would make the expected value NaN
        reported(before[name], (x.shape[1],), f"BatchNorm1d's {name}", at_least=0.0 if name == "running_var" else -inf)
    out = sub.run(module, x, substitute={"batch_norm": "fixtures.batch_norm"}).value
    after_state = state_of(sub, module)
    after = after_state["running_mean"], after_state["running_var"]

    args = (x, before["weight"], before["bias"], before["running_mean"].clone(), before["running_var"].clone())
    candidates = [expected(*args, training=training, momentum=momentum, eps=eps),
                  grader_reference(*args, training=training, momentum=momentum, eps=eps)]
    problems = []
    for wanted in candidates:
        problems.append(mismatch(out, wanted[0], f"{what}: the output")
                        or mismatch(after[0], wanted[1], f"{what}: running_mean after the call")
                        or mismatch(after[1], wanted[2], f"{what}: running_var after the call"))
        if problems[-1] is None:
            return
    named = step_mistake((out, *after), args, training, momentum, eps, TOLERANCE[torch.float32])
    if named:
        raise Diagnosis(f"{problems[0]}: {named}")
    fail(problems[0])


def plain_tensor(sub, module, name: str) -> bool:
    """Whether the module holds ``name`` as a tensor that is neither a parameter nor a buffer."""
    try:
        value = sub.getattr(module, name)
    except StudentError:
        return False
    return isinstance(value, torch.Tensor) and name not in sub.describe(module)["buffers"]


@points(0.5)
def test_weight_and_bias_are_parameters_starting_at_ones_and_zeros(sub):
    """Create weight = nn.Parameter(torch.ones(num_features)) and bias = nn.Parameter(torch.zeros(num_features)),
    and no other parameters."""
    module = sub.call("BatchNorm1d", 5)
    parameters = sub.describe(module)["parameters"]
    if not {"weight", "bias"} & set(parameters) and plain_tensor(sub, module, "weight"):
        fail("weight and bias are plain tensors, not parameters: wrap them in nn.Parameter")
    if set(parameters) != {"weight", "bias"}:
        fail("the module's parameters (nn.Parameter) should be exactly weight and bias")
    for name, init in (("weight", torch.ones(5)), ("bias", torch.zeros(5))):
        if parameters[name]["shape"] != [5] or not parameters[name]["requires_grad"]:
            fail(f"{name} should be a trainable parameter of shape (num_features,)")
        if not torch.equal(sub.getattr(module, name), init):
            fail(f"{name} does not start at {'ones' if name == 'weight' else 'zeros'}")


@points(0.5)
def test_running_stats_are_buffers_starting_at_zeros_and_ones(sub):
    """Register running_mean (zeros) and running_var (ones) with self.register_buffer: buffers, not parameters
    and not plain attributes."""
    module = sub.call("BatchNorm1d", 5)
    info = sub.describe(module)
    for name, init in (("running_mean", torch.zeros(5)), ("running_var", torch.ones(5))):
        if name in info["parameters"]:
            fail(f"{name} is a parameter: register it as a buffer")
        if name not in info["buffers"]:
            fail(f"{name} is not a buffer: register it with self.register_buffer")
        if info["buffers"][name] != [5]:
            fail(f"{name} should have shape (num_features,)")
        if not torch.equal(sub.getattr(module, name), init):
            fail(f"{name} does not start at {'zeros' if name == 'running_mean' else 'ones'}")


@points(0.5)
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 5)])
def test_training_mode_uses_batch_stats_and_updates_the_buffers(sub, shape):
    """In training mode (the default) call batch_norm with training=True, passing the module's own weight, bias,
    running_mean and running_var so that the buffers themselves are updated, step after step."""
    module = sub.call("BatchNorm1d", 4)
    for step in range(2):
        x = make_batch(shape, seed=20 + step, scale=3.0).x
        what = f"BatchNorm1d on a {len(shape)}-D batch, training step {step + 1}"
        check_step(sub, module, x, True, 0.1, 1e-5, what)


@points(0.5)
def test_uses_its_eps_and_momentum_arguments(sub):
    """Store eps and momentum in __init__ and pass them on to batch_norm in forward."""
    module = sub.call("BatchNorm1d", 3, eps=0.5, momentum=0.3)
    for step in range(2):
        x = make_batch((5, 3, 2), seed=30 + step, scale=0.3).x
        what = f"BatchNorm1d with its own eps and momentum, training step {step + 1}"
        check_step(sub, module, x, True, 0.3, 0.5, what)
    sub.train(module, False)
    x = make_batch((5, 3, 2), seed=32, scale=0.3).x
    check_step(sub, module, x, False, 0.3, 0.5, "BatchNorm1d with its own eps and momentum, in eval mode")


@points(0.5)
def test_follows_train_and_eval_modes(sub):
    """Read self.training in forward: after .eval() normalize with the running statistics and leave them
    unchanged (also for a single sample), after .train() use batch statistics again."""
    module = sub.call("BatchNorm1d", 4)
    check_step(sub, module, make_batch((8, 4, 3), seed=40, scale=2.0).x, True, 0.1, 1e-5,
               "BatchNorm1d in training mode")
    sub.train(module, False)
    for shape in ((6, 4, 3), (1, 4)):
        x = make_batch(shape, seed=41, scale=2.0).x
        check_step(sub, module, x, False, 0.1, 1e-5, "BatchNorm1d after .eval()")
    sub.train(module, True)
    check_step(sub, module, make_batch((8, 4), seed=42, scale=2.0).x, True, 0.1, 1e-5,
               "BatchNorm1d after .eval() then .train()")


@points(0.5)
def test_state_dict_round_trips_with_nn_batchnorm1d(sub):
    """Name things as nn.BatchNorm1d does (parameters weight and bias, buffers running_mean and running_var, and
    nothing else except an optional num_batches_tracked) so that each module loads the other's state_dict."""
    module = sub.call("BatchNorm1d", 4)
    info = sub.describe(module)
    # The keys of the module's state_dict, read through describe and getattr: the wire cannot carry the 0-d
    # num_batches_tracked tensor that sub.state_dict would include.
    names = (set(info["parameters"]) | set(info["buffers"])) - {"num_batches_tracked"}
    if names != set(STATE):
        fail("the state_dict's keys should be weight, bias, running_mean and running_var "
             "(and optionally num_batches_tracked), as in nn.BatchNorm1d")
    try:
        nn.BatchNorm1d(4).load_state_dict(state_of(sub, module))
    except RuntimeError:
        fail("the state_dict does not load into nn.BatchNorm1d(num_features): check the shapes")

    theirs = make_batch((2, 4), seed=50)
    torch_state = {"weight": theirs.weight, "bias": theirs.bias, "running_mean": theirs.running_mean,
                   "running_var": theirs.running_var}
    sub.load_state_dict(module, torch_state, strict=False)  # without nn.BatchNorm1d's num_batches_tracked
    loaded = state_of(sub, module)
    for name in STATE:
        if not torch.equal(loaded[name], torch_state[name]):
            fail(f"after loading nn.BatchNorm1d's state_dict, {name} does not hold the loaded values")
