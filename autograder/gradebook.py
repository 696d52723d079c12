"""Record scores in nbgrader's gradebook through nbgrader's own API.

Each graded part is one grade cell (``check_<part>``); its score becomes that cell's
``auto_score``, exactly where ``nbgrader autograde`` would put it, so ``nbgrader export``
and the formgrader work on top. A part held for review gets no automatic score and needs a
manual grade (see ``record``). Manually graded cells (ex3's written answer) are left
for the formgrader: a copy of the submission goes to ``autograded/<student>/<assignment>/``
in the course folder, which is where the formgrader and ``nbgrader generate_feedback`` read it.

That copy is made for an instructor to read, so it carries nothing the student could forge:
no outputs (the grader never ran the notebook in a kernel, so any output in it was saved by
the student), no cell metadata but nbgrader's, and nbgrader's metadata only on the cells the
release has, rebuilt from the gradebook (nbgrader's record of the release) as ``nbgrader
autograde`` rebuilds it. See ``formgrader_copy``.

``read_totals`` reads it back, read-only, for the LMS export: nbgrader's total per
submission (what ``nbgrader export`` reports) and what still waits for a manual grade.
``CsvExport`` is ``nbgrader export`` with a column that names what waits.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import nbformat
import sqlalchemy.exc
from nbgrader.api import Gradebook, InvalidEntry, MissingEntry
from nbgrader.plugins import CsvExportPlugin
from nbgrader.preprocessors import ClearHiddenTests

# The releases are committed, so nbgrader skips them unless forced; forced, it writes a release again, byte
# for byte (`python -m tools.release_exercises --check` keeps them current), and records it in the gradebook.
RECORD_COMMAND = "nbgrader generate_assignment {assignment} --force"
MAX_NOTEBOOK_BYTES = 256 * 2**20  # as the grader reads at most (load.MAX_NOTEBOOK_BYTES)


def open_checked(url: str, assignment: str, usage_error):
    """The gradebook at ``url`` if it knows ``assignment`` and its graded cells (else a usage error naming the fix)."""
    fix = (f"run `{RECORD_COMMAND.format(assignment=assignment)}` in the course folder first (it records the "
           f"assignment and its graded cells in the gradebook, and rewrites exercises/{assignment}/ exactly as "
           "committed)")
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists():
        raise usage_error(f"no gradebook at {url[len('sqlite:///'):]}: {fix}")
    gradebook = Gradebook(url)
    try:
        gradebook.find_assignment(assignment)
    except MissingEntry:
        gradebook.close()
        raise usage_error(f"the gradebook has no assignment {assignment}: {fix}") from None
    try:
        graded = gradebook.find_notebook(assignment, assignment).grade_cells
    except MissingEntry:
        graded = []
    if not graded:  # e.g. added with `nbgrader db assignment add`, which records no notebook
        gradebook.close()
        raise usage_error(f"the gradebook knows the assignment {assignment} but not its notebook's graded cells: "
                          f"{fix}")
    return gradebook


def record(gradebook: Gradebook, assignment: str, results: Path, student_ids: list[str],
           stale: list[str] | None = None) -> int:
    """Write every student's per-part scores into the gradebook; returns how many were recorded.

    A part held for review gets no automatic score and needs a manual grade, nbgrader's own
    state for a cell a person must grade: the formgrader flags it, nbgrader counts nothing for it
    until someone types a score there or ``release`` records the measured one. A student whose
    grades changed and who has feedback of nbgrader's is named in ``stale``, that feedback
    removed: ``nbgrader generate_feedback`` passes over a student whose feedback exists.
    """
    notebook = assignment  # one notebook per assignment, named like it (the exercise contract)
    recorded = 0
    for student_id in student_ids:
        try:
            data = json.loads((results / f"{student_id}.json").read_text())
        except (OSError, ValueError):
            continue
        gradebook.update_or_create_student(student_id)
        try:
            gradebook.find_submission(assignment, student_id)
        except MissingEntry:
            # nbgrader builds the submission's rows through relationships before it adds them to the
            # session; with autoflush on, SQLAlchemy 2 warns three times that it cannot flush them yet
            with gradebook.db.no_autoflush:
                gradebook.add_submission(assignment, student_id)
        grades = gradebook.find_submission_notebook(notebook, assignment, student_id).grades
        before = [(grade.name, grade.auto_score, grade.needs_manual_grade) for grade in grades]
        parts = data["extra_data"]["parts"]
        for part, scored in parts.items():
            grade = gradebook.find_grade(f"check_{part}", notebook, assignment, student_id)
            if "held" in scored:
                grade.auto_score = None
                grade.needs_manual_grade = grade.manual_score is None  # a score typed in the formgrader decides
            else:
                grade.auto_score = float(scored["score"])
                grade.needs_manual_grade = False
        for grade in grades:
            if grade.auto_score is None and grade.manual_score is None and grade.cell.cell_type == "markdown":
                grade.needs_manual_grade = True
        record_lateness(gradebook, assignment, student_id, data)
        gradebook.db.commit()
        held = {f"check_{part}": scored for part, scored in parts.items() if "held" in scored}
        course = copy_for_formgrader(gradebook, assignment, student_id, held, counted_notebook(data))
        changed = before != [(grade.name, grade.auto_score, grade.needs_manual_grade) for grade in grades]
        if course is not None and changed and remove_feedback(course, student_id, assignment) and stale is not None:
            stale.append(student_id)
        recorded += 1
    return recorded


def record_lateness(gradebook: Gradebook, assignment: str, student_id: str, data: dict) -> None:
    """The result's submission time, due date and late penalty where nbgrader keeps them, so that ``nbgrader export``
    and the formgrader subtract the same penalty as the results: the submission's ``timestamp``, the assignment's
    ``duedate`` and the (one) notebook's ``late_submission_penalty``, which nbgrader sums into the submission's."""
    from datetime import datetime, timezone

    late = data["extra_data"].get("late")
    late = late if type(late) is dict else {}
    score, penalty = data.get("score"), late.get("penalty")
    numbers = all(type(x) in (int, float) and x == x and abs(x) != float("inf") for x in (score, penalty))
    penalty = min(max(penalty, 0.0), max(score, 0.0)) if numbers else 0.0  # as report.late_penalty reads it

    def utc(text):  # nbgrader keeps naive UTC datetimes
        try:
            when = datetime.fromisoformat(text) if type(text) is str else None
        except ValueError:
            return None
        return when.astimezone(timezone.utc).replace(tzinfo=None) if when and when.tzinfo else None

    submission = gradebook.find_submission(assignment, student_id)
    if utc(late.get("submitted_at")) is not None:
        submission.timestamp = utc(late["submitted_at"])
    if utc(late.get("due")) is not None:
        submission.assignment.duedate = utc(late["due"])
    notebook = gradebook.find_submission_notebook(assignment, assignment, student_id)
    notebook.late_submission_penalty = penalty or None


def remove_feedback(course: Path, student_id: str, assignment: str) -> bool:
    """Remove nbgrader's feedback folder of one submission (``generate_feedback`` writes it again; it passes over
    a submission whose folder exists, unless forced). True if there was one."""
    feedback = (course / "feedback").resolve()
    folder = feedback / student_id / assignment
    if folder.is_symlink() or not folder.is_dir() or folder.resolve().parent.parent != feedback:
        return False
    shutil.rmtree(folder)
    return True


def copy_for_formgrader(gradebook: Gradebook, assignment: str, student_id: str,
                        held: dict | None = None, counted: str | None = None) -> Path | None:
    """Write the formgrader's copy of the submitted notebook, when the gradebook is a course folder's file.

    ``held``: grade_id -> the result's part held for review, said in a note above its grade cell.
    Returns the course folder, or None when the gradebook is not a file in one.
    """
    url = str(gradebook.db.bind.url)
    if not url.startswith("sqlite:///"):
        return None
    course = Path(url[len("sqlite:///"):]).resolve().parent
    submitted = submitted_notebook(course / "submitted" / student_id / assignment, assignment, counted)
    release = read_cells(course / "exercises" / assignment / f"{assignment}.ipynb") or []
    copy = formgrader_copy(read_cells(submitted), gradebook.find_notebook(assignment, assignment),
                           {_text(cell.get("source")) for cell in release if cell.get("cell_type") == "markdown"},
                           held)
    target = course / "autograded" / student_id / assignment / f"{assignment}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".ipynb")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            nbformat.write(copy, file)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    finally:
        Path(temporary).unlink(missing_ok=True)
    return course


def counted_notebook(data: dict) -> str | None:
    """The file name of the notebook that counted, when the result lists several (``extra_data.notebooks``)."""
    listed = data.get("extra_data", {}).get("notebooks") if type(data.get("extra_data")) is dict else None
    for item in listed if type(listed) is list else []:
        if type(item) is dict and item.get("counted") is True and type(item.get("name")) is str:
            return item["name"]
    return None


def submitted_notebook(folder: Path, assignment: str, counted: str | None = None) -> Path | None:
    """The notebook the grader counted in a student's folder: ``counted`` (the best of several), else
    ``<assignment>.ipynb``, else the first one."""
    notebooks = sorted(folder.glob("*.ipynb")) if folder.is_dir() and not folder.is_symlink() else []
    chosen = [p for p in notebooks if p.name == counted]
    if chosen:
        return chosen[0]
    preferred = [p for p in notebooks if p.name == f"{assignment}.ipynb"] or notebooks
    return preferred[0] if preferred else None


def read_cells(path: Path | None) -> list[dict] | None:
    """The cells of the notebook at ``path``, outputs dropped while parsing; None if it cannot be read."""
    if path is None or path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_NOTEBOOK_BYTES:
        return None
    try:
        data = json.loads(path.read_bytes().decode("utf-8", errors="replace"), object_hook=_without_outputs)
    except (ValueError, RecursionError):
        return None
    if type(data) is dict and data.get("nbformat") == 3:  # the grader converts these too
        try:
            data = json.loads(json.dumps(nbformat.convert(nbformat.from_dict(data), 4)))
        except Exception:
            return None
    cells = data.get("cells") if type(data) is dict else None
    return [cell for cell in cells if type(cell) is dict] if type(cells) is list else None


def _without_outputs(obj: dict) -> dict:
    if "cell_type" in obj and "outputs" in obj:
        obj["outputs"] = []
    return obj


def formgrader_copy(cells: list[dict] | None, master, release_markdown=frozenset(),
                    held: dict | None = None) -> nbformat.NotebookNode:
    """The notebook the formgrader shows for a submission's ``cells`` (None: unreadable).

    ``master`` is the gradebook's ``Notebook``: its source cells are the release's cells with
    nbgrader metadata. Every cell keeps the student's text, and only its text (no outputs, no
    attachments, no metadata: a student's metadata can hide a cell's source from the page,
    ``transient.remove_source``, or turn a raw cell into HTML, ``raw_mimetype``). The last cell
    carrying a release cell's ``grade_id`` (the one the grader's last definition comes from)
    gets that cell's nbgrader metadata rebuilt from the gradebook, so points, type and locking
    are the release's whatever the student wrote; a locked cell also gets its released source
    back. Any other nbgrader metadata is dropped: a self-made grade cell, an earlier duplicate
    of a real one. A graded or answer cell the submission lacks is added at the end, after a
    note saying so, so that it can still be graded.

    The formgrader renders Markdown without sanitizing it, on the instructor's own Jupyter
    server: a student's ``<img onerror=...>`` would run there. So a Markdown cell that is not
    one of the release's (``release_markdown``) and holds raw HTML, an entity or a link is
    shown as text (``_shown_as_text``).

    A grade cell whose task is held for review (``held``: grade_id -> the result's part) has a
    note above it with the measured score and why it is held: the formgrader shows it to the
    instructor beside the score box, and ``nbgrader generate_feedback`` to the learner, where
    nbgrader's table of scores can only say 0. The note's words from the result are shown as text.
    """
    released = {cell.name: cell for cell in master.source_cells}
    points = {cell.name: cell.max_score for cell in master.grade_cells}
    answers = {cell.name for cell in master.solution_cells}
    tasks = {cell.name for cell in master.task_cells}
    cells = cells or []
    last = {_grade_id(cell): index for index, cell in enumerate(cells) if _grade_id(cell) in released}
    copied = []
    if not cells:
        copied.append(nbformat.v4.new_markdown_cell(
            "*The submitted notebook could not be read, or has no cells: the grader's feedback says why.*"))
    for index, cell in enumerate(cells):
        grade_id = _grade_id(cell)
        if last.get(grade_id) == index:
            copied.append(_restored(cell, released[grade_id], points, answers, tasks))
        elif cell.get("cell_type") in ("code", "markdown", "raw"):
            copied.append(_new_cell(cell["cell_type"], _text(cell.get("source"))))
    for name, source in released.items():
        if name not in last and (name in points or name in answers or name in tasks):
            copied.append(nbformat.v4.new_markdown_cell(
                f"*The cell `{name}` was missing from the submission: the released cell follows, so that it can "
                "be graded.*"))
            copied.append(_restored({"source": source.source}, source, points, answers, tasks))
    trusted = set(release_markdown) | {cell.source for cell in master.source_cells}
    for cell in copied:
        if cell.cell_type == "markdown" and cell.source not in trusted and UNSAFE_MARKDOWN.search(cell.source):
            cell.source = _shown_as_text(cell.source)
    for grade_id, part in (held or {}).items():  # after the check above: these notes are built safe
        where = next((i for i, cell in enumerate(copied) if cell.metadata.get("nbgrader", {}).get("grade_id")
                      == grade_id), len(copied))
        copied.insert(where, nbformat.v4.new_markdown_cell(held_note(part)))
    kernelspec = json.loads(master.kernelspec) if master.kernelspec else {}
    notebook = nbformat.v4.new_notebook(cells=copied, metadata={"kernelspec": kernelspec} if kernelspec else {})
    nbformat.validate(notebook)
    return notebook


# Raw HTML (and autolinks), character references, inline links and images, link reference
# definitions, and MathJax's \href: what lets Markdown put markup or a URL on the page.
UNSAFE_MARKDOWN = re.compile(r"<|&|\](?:\(|:)|\\href", re.IGNORECASE)


def held_note(part: dict) -> str:
    """The note above a held task's grade cell: what was measured, what happens next, and the result's reason."""
    return (f"**Held for your instructor's review: {_plain(part.get('title', ''))}.** Its hidden tests measured "
            f"{float(part.get('held', 0)):g} / {float(part.get('max_score', 0)):g} points; they count once your "
            "instructor has reviewed it, and until then nbgrader shows this cell's score as 0. (Instructor: type the "
            "points into this cell's score box, or run `python -m autograder release`.) Why it is held:\n\n"
            + _fenced(str(part.get("note", ""))))


def _plain(text: str) -> str:
    """A title (the course's own) with every character Markdown or HTML could read as markup escaped."""
    return re.sub(r"([\\`*_{}\[\]()#+!<>&|~$-])", r"\\\1", text)


def _fenced(text: str) -> str:
    """``text`` in a fenced code block no line of it can close (CommonMark): rendered as plain text."""
    fence = "~" * max(3, 1 + max((len(run) for run in re.findall(r"~+", text)), default=0))
    return f"{fence}\n{text}\n{fence}"


def _shown_as_text(text: str) -> str:
    return "*Shown as text: this Markdown cell holds HTML, a link or an entity.*\n\n" + _fenced(text)


def _restored(cell: dict, source, points: dict, answers: set, tasks: set) -> nbformat.NotebookNode:
    """``cell`` as the release has it: its type and nbgrader metadata, and, when locked, its source."""
    name = source.name
    meta = {"grade": name in points, "grade_id": name, "locked": bool(source.locked), "schema_version": 3,
            "solution": name in answers, "task": name in tasks, "cell_type": source.cell_type}
    if name in points:
        meta["points"] = float(points[name])
    restored = _new_cell(source.cell_type, source.source if source.locked else _text(cell.get("source")))
    restored.metadata["nbgrader"] = meta
    if source.locked:  # the gradebook keeps the hidden tests; show the cell as the student saw it
        ClearHiddenTests().preprocess_cell(restored, {}, 0)
    return restored


def _new_cell(cell_type: str, text: str) -> nbformat.NotebookNode:
    make = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
            "raw": nbformat.v4.new_raw_cell}[cell_type]
    return make(text)


def _grade_id(cell: dict) -> str | None:
    meta = cell.get("metadata")
    nbgrader = meta.get("nbgrader") if type(meta) is dict else None
    grade_id = nbgrader.get("grade_id") if type(nbgrader) is dict else None
    return grade_id if type(grade_id) is str else None


def _text(source) -> str:
    if type(source) is str:
        return source
    if type(source) is list and all(type(line) is str for line in source):
        return "".join(source)
    return ""


# ---- reading the totals, for the LMS export ----------------------------------------------------------------


@dataclass
class Total:
    """One student's submission of one assignment, as nbgrader totals it."""

    score: float  # what `nbgrader export` reports: automatic plus manual points, less any late penalty, at least 0
    automatic: float  # the automatic points recorded in it (what `record` wrote, or `nbgrader autograde`)
    ungraded: list[str]  # what still waits for a manual grade: "the written answer written_answer", ...
    by_hand: frozenset[str] = frozenset()  # the cells given a score in the formgrader
    penalty: float = 0.0  # nbgrader's late penalty of the submission


@dataclass
class Totals:
    """One assignment in the gradebook: its maximum (automatic plus manual points) and each submission's total."""

    max_score: float
    students: dict[str, Total]


def read_totals(url: str, problem) -> dict[str, Totals]:
    """Every assignment's totals in the gradebook at ``url``, read without writing anything (``read_only``)."""
    with read_only(url, problem, READ_FIX) as gradebook:
        return {assignment.name: Totals(float(assignment.max_score or 0.0),
                                        {s.student_id: _total(s) for s in assignment.submissions})
                for assignment in gradebook.assignments}


READ_FIX = ("pass the gradebook that `python -m autograder grade ... --gradebook` recorded into, e.g. "
            "--gradebook sqlite:///gradebook.db from the course folder")


@contextlib.contextmanager
def read_only(url: str, problem, fix: str | None = None):
    """The gradebook at ``url``, opened so that nothing is written, and closed after the ``with`` block.

    A ``sqlite:///`` gradebook is opened read-only (SQLite's ``mode=ro``), so that a wrong
    path or a file that is not a gradebook is refused rather than turned into an empty
    gradebook, as nbgrader's ``Gradebook`` does when it can write. Any problem, opening or
    reading, raises ``problem`` with what is wrong (and ``fix``, how to fix it, when given).
    """
    how = f": {fix}" if fix else ""
    opened = url
    if url.startswith("sqlite:///") and url != "sqlite:///":
        path = Path(url[len("sqlite:///"):])
        if not path.is_file():
            raise problem(f"no gradebook at {path}{how}")
        quoted = urllib.parse.quote(urllib.parse.quote(str(path.resolve()), safe="/"), safe="/")  # SQLAlchemy
        opened = f"sqlite:///file:{quoted}?mode=ro&uri=true"  # unquotes once, SQLite's URI parser once more
    try:
        gradebook = Gradebook(opened, course_id="")  # "": check no course, which would add one if missing
    except (sqlalchemy.exc.SQLAlchemyError, InvalidEntry, ImportError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise problem(f"cannot read {url} as nbgrader's gradebook ({reason}){how}") from None
    try:
        yield gradebook
    except sqlalchemy.exc.SQLAlchemyError as error:
        raise problem(f"cannot read {url} as nbgrader's gradebook ({str(error).splitlines()[0]}){how}") from None
    finally:
        gradebook.db.rollback()
        gradebook.close()


def _total(submission) -> Total:
    grades = [grade for notebook in submission.notebooks for grade in notebook.grades]
    ungraded = [f"the {'written answer' if grade.cell_type == 'markdown' else 'cell'} {grade.name}"
                for grade in grades if grade.needs_manual_grade]
    penalty = submission.late_submission_penalty or 0.0
    return Total(max(0.0, float(submission.score or 0.0) - penalty),
                 sum(float(grade.auto_score) for grade in grades if grade.auto_score is not None), ungraded,
                 frozenset(grade.name for grade in grades if grade.manual_score is not None), float(penalty))


# ---- nbgrader export, with what waits named ------------------------------------------------------------------


class CsvExport(CsvExportPlugin):
    """``nbgrader export --exporter autograder.gradebook.CsvExport``: nbgrader's grades.csv, and what waits.

    nbgrader's own export counts a cell that needs a manual grade as 0 and says nothing about it,
    so a task held for review would look like a task that earned nothing. This writes nbgrader's
    columns with nbgrader's values (its ``--to``, ``--assignment`` and ``--student`` options
    work as they do there), plus ``needs_manual_grade``: each cell of the submission that waits
    for a person, and why (a graded code cell waits only when its task is held for review), or
    nothing when none waits.
    """

    COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
               "raw_score", "late_submission_penalty", "score", "max_score", "needs_manual_grade"]

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        students = {str(s) for s in self.student}
        assignments = {str(a) for a in self.assignment}
        self.log.info("Exporting grades to %s, with the cells that need a manual grade named", dest)
        with open(dest, "w", newline="", encoding="utf-8") as file:
            writer = csv.writer(file, lineterminator="\n")
            writer.writerow(self.COLUMNS)
            for assignment in gradebook.assignments:
                if assignments and assignment.name not in assignments:
                    continue
                for student in gradebook.students:
                    if students and student.id not in students:
                        continue
                    writer.writerow(["" if value is None else str(value)
                                     for value in _export_row(gradebook, assignment, student)])


def _export_row(gradebook: Gradebook, assignment, student) -> list:
    """One row of ``CsvExport``: nbgrader's values (a missing submission is 0, as in nbgrader), and what waits."""
    row = [assignment.name, assignment.duedate]
    try:
        submission = gradebook.find_submission(assignment.name, student.id)
    except MissingEntry:
        return row + ["", student.id, student.last_name, student.first_name, student.email, 0.0, 0.0, 0.0,
                      assignment.max_score, ""]
    penalty = submission.late_submission_penalty or 0.0
    waiting = [f"{grade.name} ({'held for review' if grade.cell_type == 'code' else 'written answer to grade'})"
               for notebook in submission.notebooks for grade in notebook.grades if grade.needs_manual_grade]
    return row + [submission.timestamp, student.id, student.last_name, student.first_name, student.email,
                  submission.score, penalty, max(0.0, submission.score - penalty), assignment.max_score,
                  "; ".join(waiting)]
