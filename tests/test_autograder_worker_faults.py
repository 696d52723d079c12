"""What a worker sends is bounded and blamed on the submission; a crash costs only its own task.

One class of ex2_layernorm submissions is graded in one run. Some write hostile frames
straight to the worker's socket (found by scanning their file descriptors), some crash the
worker in the middle of a task, some raise in ways that used to pass a test. The grading
processes report their own peak memory, which must stay under 300 MB whatever the frames.
"""

import pytest

from grading import max_scores, part_scores, reference, results_of, run_grader, with_cell, with_cells, write_class

ASSIGNMENT = "ex2_layernorm"

# Finds the worker's socket and writes ``frames`` to it, then returns the right answer: the
# grader must read the hostile bytes first, and must not be fooled or hurt by them.
WRITER = """
import os as _os, stat as _stat
def _socket_fds():
    return [fd for fd in range(3, 64) if _is_socket(fd)]
def _is_socket(fd):
    try:
        return _stat.S_ISSOCK(_os.fstat(fd).st_mode)
    except OSError:
        return False
def _send(payload):
    for fd in _socket_fds():
        try:
            _os.write(fd, payload)
        except OSError:
            pass
def layer_norm(x, weight, bias, eps=1e-5):
    _send(FRAME)
    m = x.mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + eps) * weight + bias
"""
HOSTILE_FRAMES = {
    "announces-a-200-mb-frame": "FRAME = (200 * 2**20).to_bytes(4, 'big') + b'{' * 4096\n",
    "sends-a-7-mb-json-header": "FRAME = (7 * 2**20).to_bytes(4, 'big') + (7 * 2**20 - 4).to_bytes(4, 'big') "
                                "+ b'[' * (7 * 2**20 - 4)\n",
    "forges-a-tensor-of-2-to-the-62-elements": """
import json as _json
_header = _json.dumps({"dict": {"value": {"tensor": {"dtype": "float32", "shape": [2**62, 2**62, 0], "offset": 0,
                                                      "nbytes": 0}}}}).encode()
_payload = len(_header).to_bytes(4, 'big') + _header
FRAME = len(_payload).to_bytes(4, 'big') + _payload
""",
    "forges-a-whole-answer-and-trailer": """
import json as _json
_header = _json.dumps({"dict": {"value": None}}).encode()
_payload = len(_header).to_bytes(4, 'big') + _header
_trailer = b"1\\n\\n0\\n\\n\\n0"
FRAME = len(_payload).to_bytes(4, 'big') + _payload + len(_trailer).to_bytes(4, 'big') + _trailer
""",
    "writes-garbage": "FRAME = bytes(range(256)) * 64\n",
}
CRASHES = {
    "raises-an-exception-whose-str-raises": """
class Unprintable(Exception):
    def __str__(self):
        raise KeyboardInterrupt
def layer_norm(x, weight, bias, eps=1e-5):
    raise Unprintable()
""",
    "returns-a-tensor-that-interrupts-when-read": """
class Trap(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, '__name__', '') in ('detach', 'to', 'contiguous', 'clone'):
            raise KeyboardInterrupt
        return super().__torch_function__(func, types, args, kwargs or {})
def layer_norm(x, weight, bias, eps=1e-5):
    return torch.zeros_like(x).as_subclass(Trap)
""",
    "ends-its-process-when-tested": """
import os
def layer_norm(x, weight, bias, eps=1e-5):
    os._exit(3)
""",
    "overflows-the-c-stack": """
import sys
def layer_norm(x, weight, bias, eps=1e-5):
    sys.setrecursionlimit(10**7)
    def down(n):
        return down(n + 1) + 1
    return down(0)
""",
}
# Task 2 (LayerNorm) raising: never a pass, whatever Task 1 does.
RAISING = {
    "module-and-function-raise-the-same-error": {
        "layer_norm": "def layer_norm(x, weight, bias, eps=1e-5):\n    raise RuntimeError('not today')\n",
        "LayerNorm": """
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
    def forward(self, x):
        raise RuntimeError('not today')
"""},
    "task-1-has-a-syntax-error-and-the-module-raises-a-name-error-too": {
        "layer_norm": "def layer_norm(x, weight, bias, eps=1e-5)\n    return x\n",
        "LayerNorm": """
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
    def forward(self, x):
        return layer_norm_v2(x, self.weight, self.bias, self.eps)
"""},
}
CORRECT_MODULE = """
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
"""
FORWARD_TESTS_POINTS = 0.5  # test_forward_normalizes_with_its_parameters + test_forward_uses_the_eps_it_was_built_with


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults")
    notebooks = {"honest": reference(ASSIGNMENT)}
    notebooks |= {name: with_cell(ASSIGNMENT, "layer_norm", prelude + WRITER) for name, prelude in HOSTILE_FRAMES.items()}
    notebooks |= {name: with_cell(ASSIGNMENT, "layer_norm", source) for name, source in CRASHES.items()}
    notebooks |= {name: with_cells(ASSIGNMENT, cells) for name, cells in RAISING.items()}
    write_class(folder / "class", notebooks)
    done = run_grader("grade", ASSIGNMENT, folder / "class", "--results", folder / "results", "--jobs", 2,
                      "--timeout", 60)
    return done, results_of(folder / "results")


def test_the_run_ends_with_status_0_and_a_result_for_everyone(graded):
    done, results = graded
    assert done.returncode == 0, done.stderr
    assert set(results) == {"honest", *HOSTILE_FRAMES, *CRASHES, *RAISING}


@pytest.mark.parametrize("name", list(HOSTILE_FRAMES))
def test_a_hostile_frame_is_the_submissions_fault(graded, name):
    _, results = graded
    extra = results[name]["extra_data"]
    # Garbage that announces a frame longer than what follows leaves the grader waiting: a timeout, also the
    # submission's.
    assert extra["status"] in ({"protocol_violation", "timeout"} if name == "writes-garbage" else {"protocol_violation"})
    if extra["status"] == "protocol_violation":
        assert any("wrote to the grader's socket" in problem for problem in extra["problems"])


@pytest.mark.parametrize("name", list(HOSTILE_FRAMES))
def test_a_hostile_frame_earns_nothing_on_its_task(graded, name):
    _, results = graded
    assert part_scores(results[name])["layer_norm"] == 0


def test_no_grading_process_grows_past_300_mb_whatever_the_frames(graded):
    _, results = graded
    peaks = {name: r["extra_data"]["grader_peak_rss_mb"] for name, r in results.items()}
    assert 0 < max(peaks.values()) < 300, peaks


def test_nothing_here_is_reported_as_a_grader_error(graded):
    _, results = graded
    assert {name for name, r in results.items() if r["extra_data"]["status"] == "grader_error"} == set()


@pytest.mark.parametrize("name", list(CRASHES))
def test_a_crash_costs_only_the_task_it_happened_in(graded, name):
    _, results = graded
    scores, full = part_scores(results[name]), max_scores(ASSIGNMENT)
    assert scores["layer_norm"] < full["layer_norm"] / 2
    assert {part: score for part, score in scores.items() if part != "layer_norm"} == \
        {part: score for part, score in full.items() if part != "layer_norm"}


def test_an_unprintable_exception_is_described_not_fatal(graded):
    _, results = graded
    outputs = " ".join(t["output"] for t in results["raises-an-exception-whose-str-raises"]["tests"])
    assert "Unprintable" in outputs and "could not be read" in outputs


def test_a_worker_that_ended_is_named_with_its_task(graded):
    _, results = graded
    notes = " ".join(results["ends-its-process-when-tested"]["extra_data"]["problems"])
    assert "a worker ended in Task 1" in notes and "exit status 3" in notes


@pytest.mark.parametrize("name", list(RAISING))
def test_a_raising_forward_never_passes(graded, name):
    _, results = graded
    forward = [t for t in results[name]["tests"] if t["name"].startswith("Task 2") and "forward" in t["name"]]
    assert len(forward) == 2 and all(t["status"] == "failed" for t in forward)
    assert part_scores(results[name])["LayerNorm"] <= max_scores(ASSIGNMENT)["LayerNorm"] - FORWARD_TESTS_POINTS


def test_a_correct_module_over_a_broken_function_keeps_its_task(tmp_path):
    """The grader's reference stands in for a broken layer_norm, so the module is judged on its own work."""
    notebook = with_cells(ASSIGNMENT, {"layer_norm": "def layer_norm(x, weight, bias, eps=1e-5)\n    return x\n",
                                       "LayerNorm": CORRECT_MODULE})
    write_class(tmp_path / "class", {"broken-function": notebook})
    run_grader("grade", ASSIGNMENT, tmp_path / "class", "--results", tmp_path / "results")
    scores = part_scores(results_of(tmp_path / "results")["broken-function"])
    assert scores["LayerNorm"] == max_scores(ASSIGNMENT)["LayerNorm"] and scores["layer_norm"] == 0
