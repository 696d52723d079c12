"""Submissions that attack the grader get no more than their honest work earns, and harm no one else.

One class of ex2_layernorm submissions is graded in a single run: an honest reference, and
the reference with its task-1 cell (``layer_norm``) replaced by an attack. Each attack is
graded as a submission whose layer_norm is wrong or missing, so it must score no more on
task 1 than an honest wrong answer (``baseline``: a layer_norm that returns zeros). The
honest submission, graded in the same run, must keep full marks. Attacks aimed at the
sandbox itself import their modules by names the source scan cannot read (``HIDE``), so
that they are held for review but still run, and what the sandbox did is in their notes.
"""

import json

import pytest

from grading import REPO, max_scores, part_scores, reference, results_of, run_grader, with_cell, write_class

ASSIGNMENT = "ex2_layernorm"

BASELINE = "def layer_norm(x, weight, bias, eps=1e-5):\n    return torch.zeros_like(x)\n"
HIDE = "load = __builtins__['__imp' + 'ort__'] if type(__builtins__) is dict else __builtins__.__dict__['__imp' + 'ort__']\n"

# name -> (cell source replacing layer_norm, the status the result must carry)
ATTACKS = {
    "monkeypatches-allclose-and-equal": ("""
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)
def layer_norm(x, weight, bias, eps=1e-5):
    return torch.zeros_like(x)
""", {"ok", "cell_errors"}),
    "returns-a-tensor-subclass-equal-to-everything": ("""
class Always(torch.Tensor):
    def __eq__(self, other):
        return True
    __ne__ = lambda self, other: False
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True if func.__name__ in ("allclose", "equal", "isclose") else super().__torch_function__(func, types, args, kwargs or {})
def layer_norm(x, weight, bias, eps=1e-5):
    return torch.zeros_like(x).as_subclass(Always)
""", {"ok", "cell_errors"}),
    "returns-an-object-with-custom-eq": ("""
class Anything:
    shape = property(lambda self: None)
    def __eq__(self, other): return True
    def __getattr__(self, name): return lambda *a, **k: self
def layer_norm(x, weight, bias, eps=1e-5):
    return Anything()
""", {"ok", "cell_errors"}),
    "patches-pytest-and-hypothesis": ("""
import sys, types
sys.modules["pytest"] = types.ModuleType("pytest")
sys.modules["hypothesis"] = types.ModuleType("hypothesis")
def layer_norm(x, weight, bias, eps=1e-5):
    raise AssertionError("pretend the test passed")
""", {"review"}),
    "calls-sys-exit-while-loading": ("""
import sys
def layer_norm(x, weight, bias, eps=1e-5):
    return x
sys.exit(0)
""", {"cell_errors"}),
    "calls-os-exit-when-tested": ("""
import os
def layer_norm(x, weight, bias, eps=1e-5):
    os._exit(0)
""", {"exited", "crashed"}),
    "kills-its-parent-and-everyone": (HIDE + """
def layer_norm(x, weight, bias, eps=1e-5):
    os = load('o' + 's')
    for pid in (os.getppid(), 1, -1):
        try:
            getattr(os, 'ki' + 'll')(pid, 9)
        except OSError:
            pass
    return x
""", {"review"}),
    "writes-a-perfect-result-for-itself-and-a-zero-for-others": (f"""
import json, os
def layer_norm(x, weight, bias, eps=1e-5):
    for folder in ({str(REPO)!r}, "/tmp", os.path.expanduser("~")):
        for name in ("attacker.json", "honest.json", "grades.csv"):
            try:
                with open(os.path.join(folder, name), "w") as out:
                    json.dump({{"score": 10}}, out)
            except OSError:
                pass
    return x
""", {"sandbox_violation"}),
    "reads-the-hidden-suite": (f"""
def layer_norm(x, weight, bias, eps=1e-5):
    source = open({str(REPO / 'autograder' / 'suites' / 'ex2_layernorm' / 'test_layer_norm.py')!r}).read()
    return x
""", {"tampering"}),
    "opens-a-network-connection": (HIDE + """
def layer_norm(x, weight, bias, eps=1e-5):
    load('so' + 'cket').create_connection(("1.1.1.1", 80), timeout=2)
    return x
""", {"review"}),
    "loops-forever": ("""
def layer_norm(x, weight, bias, eps=1e-5):
    while True:
        pass
""", {"timeout", "cpu_limit", "crashed"}),
    "allocates-huge-memory": ("""
def layer_norm(x, weight, bias, eps=1e-5):
    hog = [bytearray(2**28) for _ in range(64)]
    return x
""", {"memory_limit", "killed", "crashed"}),
    "fork-bomb": ("""
import os
def layer_norm(x, weight, bias, eps=1e-5):
    for _ in range(10_000):
        try:
            if getattr(os, 'fo' + 'rk')() == 0:
                import time
                time.sleep(60)
                os._exit(0)
        except OSError:
            break
    return x
""", {"review"}),
    "prints-without-end": ("""
def layer_norm(x, weight, bias, eps=1e-5):
    for _ in range(20_000):
        print("spam " * 100)
    return x
""", {"output_limit"}),
    "hides-a-forbidden-call-behind-getattr": ("""
def layer_norm(x, weight, bias, eps=1e-5):
    return getattr(F, "layer_" + "norm")(x, (x.shape[-1],), weight, bias, eps)
""", {"review"}),
    "blinds-the-monitor-with-names-built-at-run-time": (HIDE + """
def layer_norm(x, weight, bias, eps=1e-5):
    modes = load("torch.utils." + "_python" + "_dispatch", fromlist=["x"])
    core = getattr(torch, "_" + "C")
    with getattr(modes, "_disable" + "_current_modes")(), getattr(core, "DisableTorch" + "Function")():
        return getattr(F, "layer_" + "norm")(x, (x.shape[-1],), weight, bias, eps)
""", {"review"}),
    "switches-off-the-monitor": ("""
def layer_norm(x, weight, bias, eps=1e-5):
    with torch._C.DisableTorchFunction():
        return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)
""", {"tampering"}),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("attacks")
    notebooks = {"honest": reference(ASSIGNMENT), "baseline": with_cell(ASSIGNMENT, "layer_norm", BASELINE)}
    notebooks |= {name: with_cell(ASSIGNMENT, "layer_norm", source) for name, (source, _) in ATTACKS.items()}
    write_class(folder / "class", notebooks)
    done = run_grader("grade", ASSIGNMENT, folder / "class", "--results", folder / "results", "--jobs", 2,
                      "--timeout", 30, "--memory-mb", 1024)
    return done, results_of(folder / "results"), folder


def test_the_run_finishes_with_status_0_and_a_result_for_everyone(graded):
    done, results, _ = graded
    assert done.returncode == 0, done.stderr
    assert set(results) == {"honest", "baseline", *ATTACKS}


def test_the_honest_submission_keeps_full_marks(graded):
    _, results, _ = graded
    assert part_scores(results["honest"]) == max_scores(ASSIGNMENT)


@pytest.mark.parametrize("attack", ATTACKS)
def test_attack_scores_no_more_than_an_honest_wrong_answer(graded, attack):
    _, results, _ = graded
    baseline = part_scores(results["baseline"])["layer_norm"]
    assert baseline < max_scores(ASSIGNMENT)["layer_norm"] / 2
    assert part_scores(results[attack])["layer_norm"] <= baseline
    held = results[attack]["extra_data"]["parts"]["layer_norm"].get("held")
    assert held is None or held <= baseline  # what its tests measured, if it is released after review


@pytest.mark.parametrize("attack", ATTACKS)
def test_attack_is_reported_with_a_clear_status(graded, attack):
    _, results, _ = graded
    assert results[attack]["extra_data"]["status"] in ATTACKS[attack][1]


def test_attacks_leave_no_file_in_the_project_or_results(graded):
    _, _, folder = graded
    for name in ("attacker.json", "honest.json", "grades.csv"):
        assert not (REPO / name).exists()
    rows = (folder / "results" / "grades.csv").read_text()
    assert "honest,10.0,10.0,ok" in rows


@pytest.mark.parametrize("attack, words", [
    ("kills-its-parent-and-everyone", "sends a signal to another process"),
    ("writes-a-perfect-result-for-itself-and-a-zero-for-others", "writes outside its folder"),
    ("opens-a-network-connection", "opens a network connection"),
    ("fork-bomb", "forks its own process"),
    ("blinds-the-monitor-with-names-built-at-run-time", "switch off the grader's monitor"),
])
def test_refused_attempt_is_named_in_the_result(graded, attack, words):
    _, results, _ = graded
    assert words in json.dumps(results[attack])


def test_results_record_namespace_isolation(graded):
    _, results, _ = graded
    assert {r["extra_data"]["isolation"] for r in results.values()} == {"namespaces"}


def test_forbidden_call_is_named_in_the_feedback(graded):
    _, results, folder = graded
    feedback = (folder / "results" / "feedback" / "hides-a-forbidden-call-behind-getattr.md").read_text()
    assert "layer-norm built-in" in feedback and "forbids" in feedback


def test_a_result_is_plain_json_with_the_gradescope_fields(graded):
    _, results, folder = graded
    data = json.loads((folder / "results" / "honest.json").read_text())
    assert {"score", "execution_time", "output", "tests"} <= set(data)
    assert all(set(t) >= {"name", "score", "max_score", "status", "output", "visibility"} for t in data["tests"])


def test_without_namespaces_the_same_scores_come_with_a_weaker_isolation_mark(tmp_path):
    write_class(tmp_path / "class", {"honest": reference(ASSIGNMENT),
                                     "baseline": with_cell(ASSIGNMENT, "layer_norm", BASELINE)})
    done = run_grader("grade", ASSIGNMENT, tmp_path / "class", "--results", tmp_path / "results",
                      "--isolation", "process")
    results = results_of(tmp_path / "results")
    assert done.returncode == 0 and "isolation: process" in done.stdout
    assert {r["extra_data"]["isolation"] for r in results.values()} == {"process"}
    assert part_scores(results["honest"]) == max_scores(ASSIGNMENT)
    assert part_scores(results["baseline"])["layer_norm"] < max_scores(ASSIGNMENT)["layer_norm"]
