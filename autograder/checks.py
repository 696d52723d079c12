"""What a hidden suite imports: points, the submission it tests, and comparisons.

A suite module tests one contract part (``PART``) and lists what that part forbids
(``FORBIDDEN``: tags recorded by the worker's monitor: ``layer_norm``, ``batch_norm``,
``instance_norm``, ``rms_norm``, ``autograd``). Each ``test_*`` function takes the
fixture ``sub`` (a ``Submission``) and any ``pytest.mark.parametrize`` arguments, is
worth ``@points(n)`` when every case passes, and has a docstring: the hint a learner
sees when it is the task's first failed test and no message names the mistake. A check
that knows the wrong answers learners give passes them as ``mistakes`` (``known_mistake``),
so that the message names the one made. Failure messages must never contain the hidden inputs.

The suite runs in the trusted process. It never gets the submission's objects, only
fresh tensors and plain values decoded from the worker's answers, and handles to
objects that stay in the worker. Every expected value is computed here: the worker ran
learner code, so what it computes is believed only as the learner's answer. Trusted
models given to learner code get parameters chosen here (``seeded_state``, ``loaded``),
and a module's state, read from the worker, is checked (``reported``) before anything is
computed from it.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis.configuration import set_hypothesis_home_dir

from autograder.sandboxed import fixtures
from autograder.sandboxed.wire import Handle, TensorInfo, tensor_info

__all__ = ["points", "Submission", "StudentError", "WorkerLost", "Handle", "TensorInfo", "tensor_info",
           "assert_close", "SETTINGS", "fail", "assert_module_matches_function", "Diagnosis", "known_mistake",
           "fail_naming", "reported", "seeded_state", "loaded"]

# Hypothesis keeps a cache in ./.hypothesis by default: in a student's folder, or in an
# nbgrader source folder that nbgrader would copy into the release. Keep it out of both.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "autograder-hypothesis")

# Hypothesis for hidden suites: reproducible, no example database, no shrinking (a wrong
# submission fails on its first counterexample; shrinking would cost hundreds of calls).
SETTINGS = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck), print_blob=False)


def _digest_once() -> None:
    """Derandomized, Hypothesis seeds each run of a test from a digest of the test's source, which it
    tokenizes again on every run (twice: the seed and the example database's key): 8 ms a submission in
    ex2. The digest depends on the source alone, so each test's is kept for the life of the process."""
    import functools

    import hypothesis.core as core

    if hasattr(core, "function_digest") and not hasattr(core.function_digest, "cache_info"):
        core.function_digest = functools.lru_cache(maxsize=1024)(core.function_digest)


_digest_once()


def points(value: float):
    """Decorator: what the test is worth when all its cases pass."""

    def mark(func):
        func.points = value
        return func

    return mark


class StudentError(Exception):
    """The submission's code raised while the suite called it."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind, self.message = kind, message


class WorkerLost(Exception):
    """The worker died or went silent during a request (timeout, memory, exit)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


def fail(message: str):
    """Fail the current test with a learner-facing message."""
    raise AssertionError(message)


class Diagnosis(AssertionError):
    """A failure whose message names the mistake itself (as in ``known_mistake``).

    The feedback then leaves out the tests' fixed hints for that part: a checklist of the usual causes
    would name causes this answer does not have.
    """


def known_mistake(actual, mistakes, atol: float, rtol: float, expected=None) -> str | None:
    """The description of the known mistake whose answer ``actual`` equals, or None.

    ``mistakes``: (description, compute) pairs, ``compute()`` giving the answer that mistake makes on the
    test's input, computed here in the trusted process. A mistake that does not apply to the input (a
    dimension it does not have, ...) raises or gives None, and is skipped; so is one whose answer is right
    on this input (equal to ``expected``), or of another dtype than ``actual``. Where several mistakes match,
    the closest is named, unless the input cannot tell it from another (their answers agree to a tenth of
    the tolerance): then none is, as a guess would name a mistake the learner may not have made.
    """
    if not isinstance(actual, torch.Tensor):
        return None

    def close(a, b, scale=1.0):
        return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=atol * scale, rtol=rtol * scale,
                                                     equal_nan=True)

    found = []
    for description, compute in mistakes:
        try:
            wrong = compute()
        except Exception:  # the mistake cannot be made on this input
            continue
        if not isinstance(wrong, torch.Tensor) or wrong.dtype != actual.dtype:
            continue
        if isinstance(expected, torch.Tensor) and close(wrong, expected):
            continue
        if close(actual, wrong):
            error = (actual.double() - wrong.double()).abs().nan_to_num(0.0).max().item()
            found.append((error, len(found), description, wrong.double()))
    found.sort(key=lambda match: match[:2])
    if len(found) > 1 and found[1][2] != found[0][2] and close(found[0][3], found[1][3], scale=0.1):
        return None
    return found[0][2] if found else None


def fail_naming(message: str, actual, mistakes, atol: float = 1e-5, rtol: float = 1e-4, expected=None):
    """Fail with ``message``, followed by the mistake ``actual`` is the answer of when it is one of ``mistakes``."""
    named = known_mistake(actual, mistakes, atol, rtol, expected)
    if named is None:
        fail(message)
    raise Diagnosis(f"{message}: {named}")


@dataclass
class Result:
    value: object
    grads: list = field(default_factory=list)
    args_after: list = field(default_factory=list)


class Submission:
    """The submission under test, seen from the trusted process.

    ``transport(request) -> answer`` carries one request to the executor and returns its
    decoded answer: in-process for the nbgrader kernel, over a socket for the sandbox.
    """

    def __init__(self, transport):
        self.transport = transport
        self.used: set[str] = set()
        self.tampered = False
        self.ran: set[str] = set()  # the notebook code the requests ran ("cell:first:last")
        self.watch_autograd = False  # the part being graded forbids autograd: its calls run under the watch

    def request(self, op: str, **fields) -> dict:
        answer = self.transport({"op": op, **fields})
        monitor = answer.get("monitor") or {}
        self.used.update(tag for tag in monitor.get("used", ()) if type(tag) is str)
        self.tampered = self.tampered or monitor.get("tampered") is True
        self.ran.update(item for item in monitor.get("ran", ()) if type(item) is str)
        if "error" in answer:
            error = answer["error"] if type(answer["error"]) is dict else {}
            raise StudentError(str(error.get("type", "Error")), str(error.get("message", "")))
        return answer

    def has(self, name: str) -> bool:
        return self.request("has", target=name)["value"] is True

    def run(self, target, *args, method: str | None = None, seed: int | None = None, no_grad: bool = False,
            grad_wrt=(), dout=None, return_args: bool = False, substitute: dict | None = None, **kwargs) -> Result:
        """Call ``target`` (a notebook global's name or a Handle) in the worker.

        ``grad_wrt``: indices of tensor arguments to differentiate with respect to (the
        worker makes them leaves that require grad and back-propagates ``dout``, ones by
        default). ``return_args``: also return the arguments as they are after the call.
        ``seed``: torch.manual_seed before the call (for code that initializes weights).
        ``substitute``: {notebook global: "fixtures.<reference>"} in place for the call only.
        """
        answer = self.request("call", target=target, method=method, args=list(args), kwargs=kwargs, seed=seed,
                              no_grad=no_grad, grad_wrt=list(grad_wrt), dout=dout, return_args=return_args,
                              substitute=substitute or {}, watch_autograd=self.watch_autograd and not grad_wrt)
        return Result(answer.get("value"), list(answer.get("grads") or []), list(answer.get("args_after") or []))

    def call(self, target, *args, **kwargs):
        """The value of ``target(*args, **kwargs)`` in the worker."""
        return self.run(target, *args, **kwargs).value

    def method(self, obj: Handle, name: str, *args, **kwargs):
        return self.run(obj, *args, method=name, **kwargs).value

    def new(self, constructor: str, *args, **kwargs) -> Handle:
        """A torch module built in the worker, e.g. ``sub.new("nn.Linear", 4, 4)``."""
        return self.run(f"torch:{constructor}", *args, **kwargs).value

    def getattr(self, obj, path: str):
        return self.request("getattr", target=obj, path=path)["value"]

    def describe(self, obj) -> dict:
        """Class, training flag, parameters (shape, is nn.Parameter), buffers, submodules, attributes.

        ``kinds`` (and ``module_kinds``, per submodule) name the torch classes of the worker's fixed
        list (``executor.KINDS``) the module is an instance of: what a structural check tests, never
        the class's name (``type``, for messages only).
        """
        return self.request("describe", target=obj)["value"]

    def state_dict(self, obj) -> dict:
        return self.request("state_dict", target=obj)["value"]

    def load_state_dict(self, obj, state: dict, strict: bool = True) -> None:
        self.request("load_state_dict", target=obj, state=state, strict=strict)

    def set_grads(self, obj, fill: float) -> None:
        self.request("set_grads", target=obj, fill=float(fill))

    def train(self, obj, mode: bool = True) -> None:
        self.request("train", target=obj, mode=bool(mode))


def is_a(description: dict, kind: str, path: str | None = None) -> bool:
    """Whether a module the worker described (``Submission.describe``), or its submodule at ``path``, is an
    instance of ``nn.<kind>`` (a name of ``executor.KINDS``): a subclass is one, a class of the same name is not.
    What the worker says is the learner's answer; anything but a list of names is no."""
    kinds = description.get("kinds") if path is None else (description.get("module_kinds") or {}).get(path)
    return type(kinds) is list and kind in kinds


def assert_close(actual, expected: torch.Tensor, what: str, atol: float = 1e-5, rtol: float = 1e-4,
                 mistakes=()) -> None:
    """Fail with a learner-facing message unless ``actual`` is a tensor close to ``expected``.

    The message names ``what`` and the size of the error, never the inputs; and, when ``actual`` is the
    answer of one of the ``mistakes`` (see ``known_mistake``), that mistake.
    """
    if mistakes:
        try:
            assert_close(actual, expected, what, atol, rtol)
        except AssertionError as error:
            fail_naming(str(error), actual, mistakes, atol, rtol, expected)
        return
    if not isinstance(actual, torch.Tensor):
        fail(f"{what} should return a tensor, got {type(actual).__name__}")
    if tuple(actual.shape) != tuple(expected.shape):
        fail(f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    if actual.dtype != expected.dtype:
        fail(f"{what} has dtype {actual.dtype}, expected {expected.dtype}")
    a, e = actual.double(), expected.double()
    if torch.isnan(a).any() and not torch.isnan(e).any():
        fail(f"{what} contains NaN")
    if not torch.allclose(a, e, atol=atol, rtol=rtol, equal_nan=True):
        error = (a - e).abs().nan_to_num(float("inf")).max().item()
        fail(f"{what} is off by up to {error:.3g}")


def assert_module_matches_function(sub: Submission, module: Handle, x: torch.Tensor, function: str, args: tuple,
                                   expected: torch.Tensor, what: str, atol: float = 1e-4, rtol: float = 1e-4) -> None:
    """``module(x)`` is right, judged on the module's own work.

    The learner's ``function`` (which the contract says the module uses) is replaced, for the
    call, by the grader's reference ``fixtures.<function>`` in the worker, so a bug in the
    function costs only the function's task. The output must then equal that same reference
    evaluated here, on ``args`` (the input, and the state the module reports, checked with
    ``reported``), or else PyTorch's ``expected``. The reference's value in the worker is never
    asked for: torch there may have been patched while the cells ran, so that it computes the
    module's wrong answer too. A module that raises fails: raising is never passing.
    """
    out = sub.run(module, x, substitute={function: f"fixtures.{function}"}).value
    with torch.no_grad(), single_threaded():
        own = getattr(fixtures, function)(*args)
    if isinstance(out, torch.Tensor) and out.shape == own.shape and out.dtype == own.dtype \
            and torch.allclose(out.double(), own.double(), atol=1e-5, rtol=1e-4):
        return
    assert_close(out, expected, what, atol=atol, rtol=rtol)


def reported(value, shape: tuple, what: str, at_least: float = float("-inf")) -> torch.Tensor:
    """``value``, a tensor the worker reported (a module's parameter or buffer), once it is known to be a
    floating-point tensor of the contract's ``shape`` holding finite values no smaller than ``at_least``. Only
    then is anything computed from it here: nothing computed here grows with what the worker sends, and no
    expected value is NaN (which a NaN output would match)."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        fail(f"{what} should be a floating-point tensor")
    if tuple(value.shape) != tuple(shape):
        fail(f"{what} has shape {tuple(value.shape)}, expected {tuple(shape)}")
    if not torch.isfinite(value).all():
        fail(f"{what} holds NaN or inf")
    if (value < at_least).any():
        fail(f"{what} holds values below {at_least:g}")
    return value


def seeded_state(build, seed: int) -> dict:
    """The state_dict of ``build()`` called here right after ``torch.manual_seed(seed)``: PyTorch's default
    initialization, the same every run, chosen where no learner code ran (the worker's RNG, its
    ``reset_parameters`` and its ``state_dict`` may all have been patched). This process's own random state is
    left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return {name: value.detach().clone() for name, value in build().state_dict().items()}


def loaded(sub: Submission, constructor: str, state: dict, *args, **kwargs) -> Handle:
    """A trusted model built in the worker (``sub.new(constructor, *args, **kwargs)``) holding ``state``.

    The expected value is computed from ``state`` here, never from what the worker says the model holds: if
    learner code stopped the load from happening, only the learner's own answer is wrong."""
    model = sub.new(constructor, *args, **kwargs)
    sub.load_state_dict(model, state)
    return model


@contextmanager
def single_threaded():
    """PyTorch's kernels on one thread while the scoring process computes an expected value: on the suites'
    tiny tensors a CPU kernel (F.batch_norm's, say) otherwise splits the work between threads and, on a busy
    2-core machine, waits milliseconds per call for the second one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def call_forward(sub: Submission, name: str, *args):
    """(out, cache) from a learner's forward of a hand-written forward/backward pair, called without autograd."""
    result = sub.call(name, *args, no_grad=True)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        fail(f"{name} should return a pair (out, cache)")
    return result


def call_backward(sub: Submission, name: str, dout, cache, grad_names: tuple[str, str, str]):
    """The three gradients from a learner's backward, fed with the cache of their forward, without autograd."""
    grads = sub.call(name, dout, cache, no_grad=True)
    if not isinstance(grads, (tuple, list)) or len(grads) != 3:
        fail(f"{name} should return three tensors: ({', '.join(grad_names)})")
    return grads
