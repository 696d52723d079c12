"""Time limits count the worker's CPU time: a class graded on a busy machine gets the scores it gets on an idle one.

The class: the reference solutions of ex2 and ex4 (ex4's cells train small models: the slowest honest work in
the course) and two ex2 submissions whose layer_norm never returns, one computing, one asleep. It is graded
twice, as it is and beside two CPU-burning processes per core, with a small CPU budget (``--timeout``) so that
the endless loop ends soon; the two assignments are graded side by side (as ``--jobs 2`` would), to keep the
test short. Each burner runs in a session of its own, as other users' work does: Linux shares the CPU fairly
between sessions first (autogroups), so burners in the test's own session would hardly slow the sandbox, which
has a session of its own."""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest

from tests.grading import max_scores, part_scores, reference, results_of, run_grader, with_cell, write_class

pytestmark = pytest.mark.slow

CPU_SECONDS = 4  # per submission: ex4's reference needs under 2 s of CPU time (and 6 s of wall time beside the
# burners, which ran out of time when limits counted wall time)
ENDLESS = "def layer_norm(x, weight, bias, eps=1e-5):\n    while True:\n        pass\n"
# Sleeps when given float64: the notebook's own cells call it in float32, the grader's tests find it asleep.
ASLEEP = """
import time
def layer_norm(x, weight, bias, eps=1e-5):
    if x.dtype == torch.float64:
        time.sleep(3600)
    m = x.mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + eps) * weight + bias
"""
CLASS = {
    "ex2_layernorm": {"reference": lambda: reference("ex2_layernorm"),
                      "endless-loop": lambda: with_cell("ex2_layernorm", "layer_norm", ENDLESS),
                      "asleep": lambda: with_cell("ex2_layernorm", "layer_norm", ASLEEP)},
    "ex4_prepost": {"reference": lambda: reference("ex4_prepost")},
}


@contextmanager
def busy_cores(per_core: int = 2):
    """Processes that burn CPU, ``per_core`` for each core this process may run on, each in a session of its own,
    until the block ends."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
               for _ in range(per_core * len(os.sched_getaffinity(0)))]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def grade_the_class(folder) -> dict:
    """{(assignment, student): (part scores, status, the result as text)}: one grading run per assignment, the
    two side by side."""
    def grade(assignment):
        write_class(folder / assignment, {name: make() for name, make in CLASS[assignment].items()})
        done = run_grader("grade", assignment, folder / assignment, "--results", folder / f"{assignment}-results",
                          "--jobs", 1, "--timeout", CPU_SECONDS, "--quiet")
        assert done.returncode == 0, done.stderr
        return {(assignment, name): (part_scores(result), result["extra_data"]["status"], json.dumps(result))
                for name, result in results_of(folder / f"{assignment}-results").items()}

    with ThreadPoolExecutor(len(CLASS)) as pool:
        return {key: value for graded in pool.map(grade, CLASS) for key, value in graded.items()}


@pytest.fixture(scope="module")
def unloaded(tmp_path_factory):
    return grade_the_class(tmp_path_factory.mktemp("unloaded"))


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    with busy_cores():
        return grade_the_class(tmp_path_factory.mktemp("loaded"))


def test_a_busy_machine_changes_no_score_and_no_status(unloaded, loaded):
    assert {key: graded[:2] for key, graded in loaded.items()} == {key: graded[:2] for key, graded in unloaded.items()}
    scores, status, _ = loaded["ex2_layernorm", "endless-loop"]  # the same, and still out of time
    assert status in ("timeout", "cpu_limit") and scores["layer_norm"] == 0


def test_the_references_keep_full_marks_and_status_ok_on_a_busy_machine(loaded):
    assert {assignment: loaded[assignment, "reference"][:2] for assignment in CLASS} == \
        {assignment: (max_scores(assignment), "ok") for assignment in CLASS}


def test_code_that_sleeps_is_stopped_once_it_has_neither_answered_nor_computed_for_a_while(loaded):
    """A call's CPU budget never runs out while it sleeps: the grader stops it for idling, and says so."""
    scores, status, text = loaded["ex2_layernorm", "asleep"]
    assert status == "timeout" and scores["layer_norm"] == 0
    assert "neither answered nor computed" in text
