"""One suite, two ways to run it: plain ``nbgrader autograde`` and ``python -m autograder grade``.

Each part's grade cell calls the part's hidden suite inside the student's kernel, so an
instructor can keep using nbgrader. For the reference solution, the blank release and
every wrong implementation of the catalogue, both ways must give every part the same
score. (nbgrader's way shares the kernel with the student's code; ours does not, and holds for review the
submissions that reach for something by a computed name: their measured scores are compared.)

nbgrader needs a few seconds per notebook, so the catalogue is packed: student k gets the
k-th wrong implementation of every task at once. Tasks are scored separately, so each
entry is still compared, part by part, in both ways.
"""

import json
import shutil
import subprocess
import sys

import pytest
from nbgrader.api import Gradebook

from tests.catalogue import ASSIGNMENTS, catalogue
from tests.conftest import say
from tests.grading import REPO, blank, measured_scores, reference, results_of, run_grader, with_cells
from tools.release_exercises import run_nbgrader

pytestmark = [pytest.mark.slow, pytest.mark.nbgrader]


def nbgrader_env():
    import os
    import sys

    return {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"}

WRONG = catalogue()


def students(assignment):
    """The reference, the blank release, and the catalogue packed k-th entry per task into student k."""
    found = {"reference": reference(assignment), "blank": blank(assignment)}
    by_cell = {}
    for wrong in WRONG:
        if wrong.assignment == assignment:
            by_cell.setdefault(wrong.cell, []).append(wrong.source)
    for k in range(max(map(len, by_cell.values()))):
        found[f"wrong-{k:02d}"] = with_cells(assignment, {cell: sources[k] for cell, sources in by_cell.items()
                                                          if k < len(sources)})
    return found


def make_course(folder, assignment):
    """An nbgrader course folder with the assignment released and every student's submission."""
    shutil.copy(REPO / "nbgrader_config.py", folder)
    shutil.copytree(REPO / "solutions" / assignment, folder / "solutions" / assignment)
    shutil.copytree(REPO / "autograder", folder / "autograder", ignore=shutil.ignore_patterns("__pycache__"))
    for student, notebook in students(assignment).items():
        target = folder / "submitted" / student / assignment
        target.mkdir(parents=True)
        (target / f"{assignment}.ipynb").write_text(json.dumps(notebook))


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory, request):
    """assignment -> (nbgrader's scores, our scores), each {student: {part: score}}."""
    courses = {a: tmp_path_factory.mktemp(a) for a in ASSIGNMENTS}
    say(request.config, f"\n[nbgrader] autograding {sum(len(students(a)) for a in ASSIGNMENTS)} notebooks of "
                        f"{len(ASSIGNMENTS)} assignments in their kernels (about 7 min on 2 cores)")
    for assignment, course in courses.items():
        make_course(course, assignment)
        done = run_nbgrader(["generate_assignment", assignment], course)
        assert done.returncode == 0, done.stdout + done.stderr
    running = []
    for assignment, course in courses.items():  # two at a time: one per core
        command = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--create"]
        log = (course / "autograde.log").open("w")  # a file, not a pipe: nobody reads a pipe while it fills
        running.append(subprocess.Popen(command, cwd=course, env=nbgrader_env(), stdout=log, stderr=log))
        if len(running) == 2:
            running.pop(0).wait(timeout=1800)
        say(request.config, f"[nbgrader] started {assignment}")
    for process in running:
        process.wait(timeout=1800)
    say(request.config, "[nbgrader] done; the sandboxed grader now grades the same notebooks")
    # Two graders starting kernels at once can race for the same TCP port, and nbgrader then
    # drops that submission; a second, sequential pass autogrades exactly the ones it dropped
    # (an assignment with none dropped is passed over: starting nbgrader costs seconds).
    for assignment, course in courses.items():
        if any(not (course / "autograded" / student.name / assignment / f"{assignment}.ipynb").is_file()
               for student in (course / "submitted").iterdir()):
            assert run_nbgrader(["autograde", assignment], course).returncode in (0, 1)
    found = {}
    for assignment, course in courses.items():
        theirs = {}
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
            for student in students(assignment):
                notebook = gradebook.find_submission_notebook(assignment, assignment, student)
                theirs[student] = {g.name[len("check_"):]: g.auto_score for g in notebook.grades
                                   if g.name.startswith("check_")}
        done = run_grader("grade", assignment, course, "--results", course / "ours")
        assert done.returncode == 0, done.stderr
        ours = {s: measured_scores(r) for s, r in results_of(course / "ours").items()}
        found[assignment] = (theirs, ours)
    return found


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_nbgrader_and_the_sandboxed_grader_give_every_part_the_same_score(both_ways, assignment):
    theirs, ours = both_ways[assignment]
    assert set(theirs) == set(ours)
    disagreements = {student: (theirs[student], ours[student]) for student in theirs
                     if theirs[student] != ours[student]}
    assert disagreements == {}
