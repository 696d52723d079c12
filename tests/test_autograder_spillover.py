"""One submission never costs another: nothing it leaves behind, and no failure of the sandbox's channel.

Two classes, each graded with ``--jobs 1`` and ``--jobs 2`` (one run per value, honest reference notebooks
placed between the attacks):

1. What a worker leaves in its folder for the zygote to clean up: nesting deeper than any recursion, folders
   its owner locked, FIFOs and symbolic-link loops, a full ``/tmp``, tens of thousands of files, a worker that
   hangs up and keeps running, and a folder too deep to remove in time (the sandbox is then started afresh).
   Graded by ``python -m autograder grade``, as an instructor runs it.
2. Failures of the zygote's control channel (a dead zygote, a reset, an answer that is not JSON), injected
   into the trusted process while a marked submission is graded: the sandbox is restarted, an innocent
   submission is graded again, and the one that breaks it twice gets its own status and keeps what it
   earned before. Graded by ``run.grade_all`` in this process (the grading processes are forked from it, so
   they inherit the injection).
"""

import os
import signal
import socket

import pytest

from autograder import load, run
from autograder.sandbox import Limits
from tests.grading import max_scores, part_scores, reference, results_of, run_grader, with_cell, write_class

pytestmark = pytest.mark.slow

ASSIGNMENT = "ex2_layernorm"
LAYER_NORM = """
import os
def layer_norm(x, weight, bias, eps=1e-5):
    m = x.mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + eps) * weight + bias
"""

# name -> code run in the layer_norm cell after a correct layer_norm; the worker's folder is the current one.
LEFT_BEHIND = {
    "nests-folders-20000-deep": """
for _ in range(20_000):
    os.mkdir('d')
    os.chdir('d')
""",
    "locks-its-folders": """
os.makedirs('locked/inner')
for name in ('locked/inner/a', 'locked/b'):
    with open(name, 'w') as out:
        out.write('x')
    os.chmod(name, 0)
os.chmod('locked/inner', 0)
os.chmod('locked', 0o100)
os.chmod('.', 0)
""",
    "leaves-fifos-and-symlink-loops": """
os.mkfifo('pipe')
os.symlink('loop', 'loop')
os.symlink('.', 'self')
os.symlink('..', 'up')
os.symlink('/', 'root')
os.symlink('missing', 'dangling')
os.mkdir('deeper')
os.symlink('../deeper', 'deeper/back')
with open('file', 'w') as out:
    out.write('x')
os.link('file', 'deeper/hard-link')
""",
    "fills-the-tmp-filesystem": """
for number in range(64):
    try:
        with open(f'fill-{number}', 'wb') as out:
            out.write(bytes(16 * 2**20 - 1))
    except OSError:
        break
""",
    "leaves-50000-files": """
for folder in range(50):
    os.mkdir(f'f{folder}')
    for number in range(1000):
        open(f'f{folder}/{number}', 'w').close()
""",
    # Removing a folder takes several system calls where making it took two, but how many more varies by
    # machine (one CI machine removed three seconds' nesting within the grader's five): nest for eight, within
    # the request's ten seconds of CPU time.
    "nests-deeper-than-can-be-removed-in-time": """
import time
start = time.process_time()
while time.process_time() - start < 8.0:
    for _ in range(1000):
        os.mkdir('d')
        os.chdir('d')
""",
}
# Hangs up on the grader during a test and keeps running: the zygote must end it before cleaning up.
HANGS_UP = """
import os, stat
def layer_norm(x, weight, bias, eps=1e-5):
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.close(fd)
        except OSError:
            pass
    while True:
        pass
"""
TOO_DEEP = "nests-deeper-than-can-be-removed-in-time"


def spill_class() -> dict:
    """Honest reference notebooks with an attack after each, in the order ``--jobs 1`` grades them."""
    attacks = {name: with_cell(ASSIGNMENT, "layer_norm", LAYER_NORM + source) for name, source in LEFT_BEHIND.items()}
    attacks["hangs-up-and-keeps-running"] = with_cell(ASSIGNMENT, "layer_norm", HANGS_UP)
    notebooks = {}
    for number, (name, notebook) in enumerate(attacks.items()):
        notebooks[f"{2 * number:02d}-honest"] = reference(ASSIGNMENT)
        notebooks[f"{2 * number + 1:02d}-{name}"] = notebook
    notebooks[f"{2 * len(attacks):02d}-honest"] = reference(ASSIGNMENT)
    return notebooks


def by_kind(results: dict) -> dict:
    """{"honest": [results], attack name: result}."""
    found = {"honest": []}
    for name, result in results.items():
        kind = name.split("-", 1)[1]
        if kind == "honest":
            found["honest"].append(result)
        else:
            found[kind] = result
    return found


@pytest.fixture(scope="module", params=[1, 2], ids=["jobs-1", "jobs-2"])
def spilled(request, tmp_path_factory, bubblewrap):
    """One grading run of the class per --jobs value: (the completed process, results by kind)."""
    folder = tmp_path_factory.mktemp(f"spill-{request.param}")
    write_class(folder / "class", spill_class())
    done = run_grader("grade", ASSIGNMENT, folder / "class", "--results", folder / "results", "--jobs", request.param,
                      "--quiet")
    return done, by_kind(results_of(folder / "results"))


def test_every_honest_submission_keeps_full_marks_and_status_ok(spilled):
    _, results = spilled
    assert [(part_scores(r), r["extra_data"]["status"]) for r in results["honest"]] == \
        [(max_scores(ASSIGNMENT), "ok")] * len(results["honest"])


@pytest.mark.parametrize("attack", [name for name in LEFT_BEHIND if name != TOO_DEEP])
def test_what_the_grader_removes_costs_the_attacker_nothing_either(spilled, attack):
    """Its own work is graded as usual: leaving files is no fault once they are gone."""
    _, results = spilled
    assert part_scores(results[attack]) == max_scores(ASSIGNMENT)
    assert results[attack]["extra_data"]["status"] == "ok", results[attack]["extra_data"]["problems"]


def test_a_folder_too_deep_to_remove_in_time_is_blamed_on_its_submission(spilled):
    _, results = spilled
    extra = results[TOO_DEEP]["extra_data"]
    assert extra["status"] == "sandbox_violation"
    assert any("could not remove" in problem for problem in extra["problems"]), extra["problems"]
    assert part_scores(results[TOO_DEEP]) == max_scores(ASSIGNMENT)  # what it computed is its own


def test_a_worker_that_hangs_up_and_runs_on_is_ended_and_costs_only_its_task(spilled):
    _, results = spilled
    result = results["hangs-up-and-keeps-running"]
    assert result["extra_data"]["status"] == "crashed"
    assert part_scores(result)["layer_norm"] == 0
    assert {part: score for part, score in part_scores(result).items() if part != "layer_norm"} == \
        {part: score for part, score in max_scores(ASSIGNMENT).items() if part != "layer_norm"}


def test_the_run_ends_with_status_0_and_no_result_is_a_grader_error(spilled):
    done, results = spilled
    assert done.returncode == 0, done.stderr
    assert len(results["honest"]) == len(LEFT_BEHIND) + 2
    statuses = [r["extra_data"]["status"] for r in results["honest"]]
    statuses += [r["extra_data"]["status"] for kind, r in results.items() if kind != "honest"]
    assert "grader_error" not in statuses


# --- 2. Failures of the control channel ----------------------------------------------------------------------

def kill_the_zygote(sandbox):
    os.killpg(sandbox.process.pid, signal.SIGKILL)  # bubblewrap and all it started (its own session)


def reset_the_channel(sandbox):
    sandbox.control.shutdown(socket.SHUT_RDWR)


def garble_the_channel(sandbox):
    sandbox.buffer += b"{this is not json\n"


FAULTS = {"kills-the-zygote": kill_the_zygote, "resets-the-channel": reset_the_channel,
          "garbles-the-channel": garble_the_channel}
ONCE = "kills-the-zygote-once"  # an innocent submission graded when the sandbox broke for no fault of its own
BROKEN_ONCE: set[str] = set()  # per grading process: the marks whose one failure happened


def marked(name: str) -> dict:
    """The reference notebook with ``name`` in a comment of its layer_norm cell: the injection's trigger."""
    notebook = reference(ASSIGNMENT)
    cell = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "layer_norm")
    cell["source"] = f"# FAULT {name}\n" + "".join(cell["source"])
    return notebook


def injecting(carry):
    """``Session.carry`` that, when Task 2 is first called, breaks the channel the way a marked submission asks."""
    def carry_with_faults(session, request):
        mark = next((line.split()[-1] for cell in session.cells for line in cell.source.splitlines()
                     if line.startswith("# FAULT ")), None)
        if mark and request.get("op") == "call" and request.get("target") == "LayerNorm" and not session.sandbox.broken:
            if mark in FAULTS:
                FAULTS[mark](session.sandbox)
            elif mark == ONCE and mark not in BROKEN_ONCE:
                BROKEN_ONCE.add(mark)
                kill_the_zygote(session.sandbox)
        return carry(session, request)
    return carry_with_faults


@pytest.fixture(scope="module", params=[1, 2], ids=["jobs-1", "jobs-2"])
def channel_failures(request, tmp_path_factory, bubblewrap):
    """One grading run per --jobs value, the channel broken while marked submissions are graded: results by id."""
    folder = tmp_path_factory.mktemp(f"channel-{request.param}")
    names = [*FAULTS, ONCE]
    notebooks = {}
    for number, name in enumerate(names):
        notebooks[f"{2 * number:02d}-honest"] = reference(ASSIGNMENT)
        notebooks[f"{2 * number + 1:02d}-{name}"] = marked(name)
    notebooks[f"{2 * len(names):02d}-honest"] = reference(ASSIGNMENT)
    write_class(folder / "class", notebooks)
    entries = [load.read(ASSIGNMENT, entry) for entry in load.find(ASSIGNMENT, [folder / "class"])]
    BROKEN_ONCE.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run.Session, "carry", injecting(run.Session.carry))
        run.grade_all(ASSIGNMENT, entries, folder / "results", Limits(), request.param, "auto")
    return by_kind(results_of(folder / "results"))


def test_honest_submissions_around_a_broken_sandbox_keep_full_marks_and_status_ok(channel_failures):
    graded = channel_failures["honest"] + [channel_failures[ONCE]]
    assert [(part_scores(r), r["extra_data"]["status"]) for r in graded] == \
        [(max_scores(ASSIGNMENT), "ok")] * len(graded)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_submission_that_breaks_the_sandbox_twice_gets_its_own_status_and_keeps_what_it_earned(channel_failures,
                                                                                                fault):
    """Task 1 was graded before the break. (A reset or a garbled answer shows at the next command, when the
    worker is settled: the tasks in between keep their points too.)"""
    result = channel_failures[fault]
    assert result["extra_data"]["status"] == "sandbox_violation"
    assert any("stopped the grader's sandbox" in problem for problem in result["extra_data"]["problems"])
    assert part_scores(result)["layer_norm"] == max_scores(ASSIGNMENT)["layer_norm"]
