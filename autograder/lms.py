"""Export the grades of one or more assignments as a CSV that Canvas's or Moodle's gradebook imports.

    python -m autograder export [ASSIGNMENT...] --format canvas|moodle -o FILE.csv [--results DIR] [--gradebook URL]

The scores come from ``DIR/<assignment>/<student_id>.json``, what ``grade`` and ``release``
write; a file there that the grader did not write stops the export rather than leave a
student out. One row per student, one column per assignment, in points.

- ``canvas`` (Grades > Import): ``Student, ID, SIS Login ID, Section``, then the assignments,
  and a ``Points Possible`` row with each maximum, as Canvas's own export has. Canvas finds a
  student by SIS Login ID, which holds the student id, or by ID, which holds the Canvas user id
  when ``nbgrader zip_collect`` kept it from Canvas's file names (``extra_data.lms``); the section
  stays empty. An empty cell is no score.
- ``moodle`` (Grades > Import > CSV file): ``student_id``, then one column per assignment
  named ``<assignment> (out of <maximum>)``. Moodle stops an import at any row that is not a
  student, so the maximum is in the header; ``-`` is Moodle's "no grade", what its own
  export writes and what its import reads, for new and existing grade items alike.

Each score is the result's points less its late penalty (``extra_data.late``, from ``course.toml``).
A missing submission gets no score, never a zero. So does a submission that has no grade yet:
held for review (``review``) or not graded (``grader_error``); each is named on stderr with
what to do, and gets its points from the next export after ``release`` or a regrade.

The results hold the automatic points only. An assignment with cells graded by hand in the
formgrader (ex3's written answer) gets, without ``--gradebook``, a line on stderr saying that
those points are missing. With ``--gradebook URL`` each score is nbgrader's total from the
gradebook instead (automatic plus manual points, less any late penalty: what ``nbgrader
export`` reports) and the maximum is the assignment's there. The results still decide
whether a grade exists, except that a held submission whose held tasks all have a score typed
in the formgrader gets nbgrader's total. Besides that, a submission gets no score, named on stderr,
when a cell waits for a manual grade, when its result is not in the gradebook, or when the
gradebook's automatic points are not its result's (recorded before a ``release`` or a
regrade), or when its late penalty is not the result's (``course.toml`` changed since). A submission
only the gradebook has (graded by ``nbgrader autograde``) gets its total.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from autograder import report

FORMATS = ("canvas", "moodle")
# Statuses whose score is not a grade yet: the cell stays empty, with what to do about it.
NOT_YET = {
    "review": "held for review: read {folder}/feedback/{student}.md, then "
              "`python -m autograder release {assignment} {student}{where}` and export again (or give each held "
              "task a score in the formgrader and export with --gradebook)",
    "grader_error": "not graded (a grader error): grade that notebook again with `python -m autograder grade "
                    "{assignment} NOTEBOOK --force{where}` and export again",
    # with --gradebook
    "manual": "not graded by hand yet: grade {ungraded} of {student} in the formgrader first (`jupyter server`, "
              "then /formgrader, Manual Grading > {assignment}) and export again",
    "unrecorded": "graded, but not in the gradebook: record it with `python -m autograder grade {assignment} "
                  "PATH... --gradebook {url}{where}` (a current result is recorded, not graded again) and export "
                  "again",
    "stale_penalty": "the gradebook has a late penalty of {recorded}, its result {measured} (course.toml changed "
                     "since): record it with `python -m autograder grade {assignment} PATH... --gradebook "
                     "{url}{where}` and export again",
    "stale": "the gradebook has {recorded} automatic points, its result {measured} (a release or a regrade since): "
             "record them with `python -m autograder grade {assignment} PATH... --gradebook {url}{where}` and "
             "export again",
}


class BadResults(Exception):
    """Results or a gradebook the export cannot use: printed as the reason, exit status 2."""


@dataclass
class Column:
    """One assignment's grades: student id -> points, or None when the grade is not decided yet."""

    assignment: str
    max_score: float
    scores: dict[str, float | None] = field(default_factory=dict)
    pending: dict[str, str] = field(default_factory=dict)  # student id -> status of an undecided grade
    details: dict[str, dict] = field(default_factory=dict)  # student id -> what its line on stderr names
    canvas_ids: dict[str, str] = field(default_factory=dict)  # student id -> Canvas user id, when zip_collect kept it
    penalties: dict[str, float] = field(default_factory=dict)  # student id -> the result's late penalty


def number(value) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def load_result(path: Path, assignment: str) -> dict:
    """One result file, checked to be one the grader wrote for ``assignment``, or ``BadResults`` saying what is
    wrong."""
    fix = (f"grade that submission again (python -m autograder grade {assignment} NOTEBOOK --force), or move the "
           f"file out of {path.parent}/")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise BadResults(f"{path} cannot be read as a result ({type(error).__name__}: {error}); {fix}") from None
    extra = data.get("extra_data") if type(data) is dict else None
    if type(extra) is not dict:
        raise BadResults(f"{path} is not a result the grader wrote (it has no extra_data); {fix}")
    wrong = [name for name, ok in (("score", number(data.get("score"))), ("max_score", number(extra.get("max_score"))),
                                   ("status", type(extra.get("status")) is str),
                                   ("student_id", extra.get("student_id") == path.stem),
                                   ("assignment", extra.get("assignment") == assignment)) if not ok]
    if wrong:
        raise BadResults(f"{path} is not a result the grader wrote for {assignment} (wrong or missing: "
                         f"{', '.join(wrong)}); {fix}")
    return data


def row_of(student: str, data: dict) -> tuple[str, float, float, str, frozenset[str]]:
    """(student id, score, maximum, status, the grade cells of its parts held for review) of a checked result."""
    extra = data["extra_data"]
    parts = extra.get("parts")
    held = frozenset(f"check_{name}" for name, part in parts.items() if type(part) is dict and "held" in part) \
        if type(parts) is dict else frozenset()
    return student, float(data["score"]), float(extra["max_score"]), extra["status"], held


def read(results: Path, assignment: str, totals: dict | None = None, url: str = "") -> Column:
    """The grades of one assignment, from ``results/<assignment>/``, or, given ``totals``, from the gradebook."""
    folder = results / assignment
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not paths and totals is None:
        raise BadResults(f"no results for {assignment} in {folder}/: grade it first "
                         f"(python -m autograder grade {assignment} PATH...), or point --results at the folder "
                         "that holds one folder per assignment")
    return column_of(folder, {path.stem: load_result(path, assignment) for path in paths}, assignment, totals, url)


def column_of(folder: Path, loaded: dict[str, dict], assignment: str, totals: dict | None = None,
              url: str = "") -> Column:
    """The grades of the checked results ``loaded`` (student id -> result, from ``folder``), as ``read`` gives them."""
    rows = [row_of(student, data) for student, data in loaded.items()]
    penalties, canvas_ids = {}, {}
    for student, data in loaded.items():
        penalties[student] = report.late_penalty(data)
        lms_ids = data["extra_data"].get("lms")
        user = lms_ids.get("canvas_user_id") if type(lms_ids) is dict else None
        if type(user) is str and user.isdigit() and len(user) <= 20:
            canvas_ids[student] = user
    maxima = sorted({row[2] for row in rows})
    if len(maxima) > 1:
        raise BadResults(f"the results in {folder}/ disagree on the maximum ({' and '.join(map(text, maxima))} "
                         f"points): some were graded by another version of the suite; grade {assignment} again "
                         "(results from another version are redone)")
    if totals is not None:
        column = from_gradebook(assignment, rows, totals, url, penalties)
        column.canvas_ids = canvas_ids
        return column
    column = Column(assignment, maxima[0], canvas_ids=canvas_ids, penalties=penalties)
    for student, score, _, status, _ in rows:
        column.scores[student] = None if status in NOT_YET else round(score - penalties[student], 4)
        if status in NOT_YET:
            column.pending[student] = status
    return column


def from_gradebook(assignment: str, rows: list[tuple], totals: dict, url: str, penalties: dict | None = None) -> Column:
    """nbgrader's totals of one assignment, each kept only where the results agree that it is a grade.

    A submission held for review is a grade once the instructor has typed a score in the formgrader
    for every held task (nbgrader's manual score, which nbgrader counts), or after ``release``.
    """
    fix = (f"run `nbgrader generate_assignment {assignment} --force` in the course folder, then grade with "
           f"`python -m autograder grade {assignment} PATH... --gradebook {url}`")
    if assignment not in totals:
        raise BadResults(f"the gradebook {url} has no assignment {assignment}: {fix}")
    recorded = totals[assignment]
    if not rows and not recorded.students:
        raise BadResults(f"no grades for {assignment} in the results or the gradebook {url}: {fix}")
    column = Column(assignment, recorded.max_score)
    results = {student: (score, status, held) for student, score, _, status, held in rows}
    for student in sorted(set(results) | set(recorded.students)):
        total = recorded.students.get(student)
        measured, status, held = results.get(student, (None, None, frozenset()))
        if status == "review" and total is not None and held and held <= total.by_hand and not total.ungraded:
            status = "ok"  # decided in the formgrader: nbgrader's total is the grade
        if status not in NOT_YET:
            if total is None:
                status = "unrecorded"
            elif measured is not None and abs(measured - total.automatic) > 1e-3:
                status = "stale"
                column.details[student] = {"recorded": text(total.automatic), "measured": text(measured)}
            elif measured is not None and abs((penalties or {}).get(student, 0.0) - total.penalty) > 1e-3:
                status = "stale_penalty"  # course.toml changed since the gradebook was recorded
                column.details[student] = {"recorded": text(total.penalty),
                                           "measured": text((penalties or {}).get(student, 0.0))}
            elif total.ungraded:
                status = "manual"
                column.details[student] = {"ungraded": " and ".join(total.ungraded)}
        column.scores[student] = None if status in NOT_YET else total.score
        if status in NOT_YET:
            column.pending[student] = status
    return column


manual_cells = report.manual_cells  # grade_id -> points of the release's cells graded by hand


def text(points: float) -> str:
    """Points as both importers read them: a plain decimal, at most four places, no trailing zeros."""
    return f"{points:.4f}".rstrip("0").rstrip(".")


def table(columns: list[Column], fmt: str) -> list[list[str]]:
    """The CSV's rows for ``fmt`` (``canvas`` or ``moodle``)."""
    students = sorted({student for column in columns for student in column.scores})
    empty = "" if fmt == "canvas" else "-"

    def cells(student: str) -> list[str]:
        points = [column.scores.get(student) for column in columns]
        return [empty if value is None else text(value) for value in points]

    if fmt == "canvas":
        return ([["Student", "ID", "SIS Login ID", "Section", *(c.assignment for c in columns)],
                 ["Points Possible", "", "", "", *(text(c.max_score) for c in columns)]]
                + [[student, canvas_id(columns, student), student, "", *cells(student)] for student in students])
    return ([["student_id", *(f"{c.assignment} (out of {text(c.max_score)})" for c in columns)]]
            + [[student, *cells(student)] for student in students])


def canvas_id(columns: list[Column], student: str) -> str:
    """The student's Canvas user id, as Canvas's own export has it in the ID column (empty when not known)."""
    return next((column.canvas_ids[student] for column in columns if student in column.canvas_ids), "")


def export(results: Path, assignments: list[str], fmt: str, output: Path, gradebook: str | None = None,
           totals: dict | None = None) -> tuple[list[Column], list[str]]:
    """Write the CSV; returns the columns and what to tell the instructor: every grade left empty because it is
    undecided, with what to do, and, without ``gradebook`` (a URL; ``totals``, what it holds, if already read),
    every assignment whose manual points are left out."""
    totals = (totals or read_gradebook(gradebook)) if gradebook else None
    columns = [read(results, assignment, totals, gradebook or "") for assignment in assignments]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(table(columns, fmt))
    report.write_atomic(output, out.getvalue())
    todo = [f"{column.assignment}, {student}: no score yet, " + NOT_YET[status].format(
                assignment=column.assignment, student=student, folder=results / column.assignment, url=gradebook,
                where="" if results == Path("results") else f" --results {results / column.assignment}",
                **column.details.get(student, {}))
            for column in columns for student, status in sorted(column.pending.items())]
    for column in columns if gradebook is None else []:
        manual = manual_cells(column.assignment)
        if manual:
            todo.append(f"{column.assignment}: the points graded by hand ({', '.join(manual)}: "
                        f"{text(sum(manual.values()))} points) are not in {output}, only the automatic ones (out of "
                        f"{text(column.max_score)}); they are in nbgrader's gradebook: export with --gradebook "
                        "sqlite:///gradebook.db (from the course folder) to include them")
    return columns, todo


def read_gradebook(url: str) -> dict:
    """Every assignment's totals in the gradebook at ``url`` (``gradebook.read_totals``), read-only."""
    from autograder import gradebook  # nbgrader: imported only when the export reads a gradebook

    return gradebook.read_totals(url, BadResults)
