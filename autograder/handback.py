"""One hand-back per student: what to return to a learner, as an HTML page and the same text in Markdown.

    python -m autograder handback ASSIGNMENT [--results DIR] [--gradebook URL]

writes ``DIR/handback/<student_id>.html`` and ``.md`` for every student with a result in ``DIR``
(default ``results/ASSIGNMENT/``). A hand-back shows:

- the total, exactly what ``python -m autograder export`` puts in the LMS CSV for that student
  (with the same gradebook, or without one): the export's own reading (``lms.read``, and
  ``lms.read_gradebook`` for nbgrader's totals) decides it, nothing here adds points up. Where
  the export has no grade yet (a task held for review, a written answer not graded by hand), the
  page shows the points counted so far as a provisional total and says what it waits for;
- the automatic points per task, with every lost point's reason: each failed test's message and
  the one "What to check" hint the result carries; a task held for review with what its tests
  measured and that it waits for the instructor, or the score the instructor typed in the
  formgrader, or that it was released;
- with a gradebook, the points of every cell graded by hand and the grader's comments on every
  cell that has one ("not graded yet" where a score is missing); without one, which points are
  missing from the total;
- the late penalty and its policy (``extra_data.late``), which notebook counted when a folder held
  several (``extra_data.notebooks``), and the result's notes.

Everything that came from a result or the gradebook is text: escaped in the HTML, and escaped in
the Markdown so that a Markdown renderer shows it as written.

``refresh`` is what ``grade``, ``release``, ``export`` and ``handback`` call: ``grade`` for the
students it graded or recorded, ``release`` for those it released, ``export`` for every student
it exports, with the export's own gradebook (or none), so that the CSV and the hand-backs never
disagree; ``grade``, ``release`` and ``handback`` use the gradebook given or the one ``grade
--gradebook`` remembered. A manual grade typed in the formgrader reaches the hand-backs at the
next ``export --gradebook`` or ``handback``. A hand-back whose
inputs have not changed is left as it is: the digest of its inputs is in the HTML page
(``<meta name="handback-digest">``), and a page is written again only when the digest differs or
a file is missing.

nbgrader's own feedback page (``feedback/<student>/<assignment>/`` in the course folder of a
``sqlite:///`` gradebook) stays consistent with the gradebook: when a student's scores or
comments there changed since the page was written (a score typed in the formgrader after
``nbgrader generate_feedback``), ``refresh`` removes the page and names the student, and
``nbgrader generate_feedback ASSIGNMENT`` writes it again (it passes over a student whose folder
exists). Removing rather than regenerating it through ``NbGraderAPI.generate_feedback`` because
removing is what ``gradebook.record`` already does when ``grade`` or ``release`` change scores
(one rule for every change); because it cannot half-fail or be slow (regenerating needs the
course's nbgrader configuration and runs nbconvert for each student, seconds apiece, inside
``export``); and because then no page the instructor could hand back is ever the stale one.

Whether a page is stale: ``DIR/handback/.state/<student_id>.json`` keeps the digest of the
student's gradebook scores and comments and of nbgrader's page as last seen together. A page
seen before is stale once the gradebook's scores differ from those seen with it. A page not seen
before is current when it is newer than the gradebook file, or when the gradebook's scores are
those of the last run; otherwise nobody can tell which came first, and it is removed.
"""

from __future__ import annotations

import datetime as dt

import hashlib
import html
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from autograder import lms, report

FOLDER = "handback"
STATE = ".state"
MAX_RESULT_BYTES = 64 * 2**20  # a result the grader wrote is far smaller (its outputs are bounded)
MAX_TEXT = 4000  # characters of one message or comment shown (results and comments are not trusted)
MAX_ITEMS = 200  # tests, notes, notebooks shown per hand-back
VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]  # a new layout rewrites every page
DIGEST_META = re.compile(rb'<meta name="handback-digest" content="([0-9a-f]{64})">')


class Problem(Exception):
    """The hand-backs cannot be written at all (an unreadable gradebook, an unknown assignment there)."""


@dataclass
class Refreshed:
    """What ``refresh`` did: the students whose hand-back was written, how many were current, what went wrong."""

    folder: Path
    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    problems: list[str] = field(default_factory=list)  # one line per result that could not be read
    stale_feedback: list[str] = field(default_factory=list)  # students whose nbgrader feedback was removed

    def summary(self) -> str:
        count = len(self.written)
        return (f"wrote {count} hand-back{'s' * (count != 1)} in {self.folder}/"
                + (f" ({self.unchanged} unchanged)" if self.unchanged else ""))


# ---- reading: results, the export's totals, the gradebook's cells -------------------------------------------


def refresh(assignment: str, results: Path, url: str | None = None, students=None, totals: dict | None = None) \
        -> Refreshed:
    """Write the hand-back of each student in ``students`` (default: every one with a result in ``results``).

    ``url``: nbgrader's gradebook (None: the automatic points only, as the export without
    ``--gradebook``); ``totals``: what ``lms.read_gradebook(url)`` returned, if already read.
    A result that cannot be read is named in ``problems``; the other hand-backs are still written.
    """
    done = Refreshed(results / FOLDER)
    wanted = None if students is None else set(students)
    good = {}  # student id -> their checked result
    for path in sorted(results.glob("*.json")):
        if wanted is not None and path.stem not in wanted:
            continue
        try:
            if path.stat().st_size > MAX_RESULT_BYTES:
                raise lms.BadResults(f"{path} is {path.stat().st_size / 2**20:.0f} MiB, more than any result the "
                                     f"grader writes; grade that submission again (python -m autograder grade "
                                     f"{assignment} NOTEBOOK --force), or move the file out of {path.parent}/")
            good[path.stem] = lms.load_result(path, assignment)
        except lms.BadResults as problem:
            done.problems.append(f"no hand-back for {path.stem}: {problem}")
    if not good:
        return done
    try:
        if url and totals is None:
            totals = lms.read_gradebook(url)
        # the export's own reading of these results decides each total (the unreadable ones left out)
        column = lms.column_of(results, good, assignment, totals if url else None, url or "")
        marks = read_marks(url, assignment) if url else {}
    except lms.BadResults as problem:
        raise Problem(str(problem)) from None
    database = gradebook_file(url)
    for student, data in good.items():
        mark = marks.get(student)
        total = (totals or {}).get(assignment)
        page = build(assignment, data, column, mark, total.students.get(student) if total and url else None,
                     bool(url))
        if write(results / FOLDER, student, page):
            done.written.append(student)
        else:
            done.unchanged += 1
        if database is not None and check_feedback(database, results / FOLDER, assignment, student, mark):
            done.stale_feedback.append(student)
    return done


@dataclass
class Cell:
    """One graded cell of a submission in nbgrader's gradebook."""

    name: str
    cell_type: str
    max_score: float
    auto_score: float | None
    manual_score: float | None
    extra_credit: float | None
    needs_manual_grade: bool
    comment: str | None = None

    @property
    def score(self) -> float | None:  # nbgrader's Grade.score, None where nothing is recorded
        value = self.manual_score if self.manual_score is not None else self.auto_score
        return None if value is None else value + (self.extra_credit or 0.0)


@dataclass
class Marks:
    """One student's submission in the gradebook: every graded cell, comments on cells, nbgrader's late penalty."""

    cells: dict[str, Cell]
    comments: dict[str, str]  # cell name -> the grader's comment (only cells that have one)
    penalty: float

    def digest(self) -> str:
        state = [[c.name, c.auto_score, c.manual_score, c.extra_credit, c.needs_manual_grade]
                 for c in self.cells.values()] + [sorted(self.comments.items()), self.penalty]
        return hashlib.sha256(json.dumps(state).encode()).hexdigest()


def read_marks(url: str, assignment: str) -> dict[str, Marks]:
    """Every submission of ``assignment`` in the gradebook at ``url``, read-only (as ``gradebook.read_totals``)."""
    from autograder import gradebook as gradebook_module  # nbgrader: imported only when a gradebook is read

    found = {}
    with gradebook_module.read_only(url, lms.BadResults) as opened:
        for assigned in opened.assignments:
            if assigned.name != assignment:
                continue
            for submission in assigned.submissions:
                cells, comments = {}, {}
                for notebook in submission.notebooks:
                    for grade in notebook.grades:
                        cells[grade.name] = Cell(grade.name, grade.cell_type or "", float(grade.max_score or 0.0),
                                                 grade.auto_score, grade.manual_score, grade.extra_credit,
                                                 bool(grade.needs_manual_grade))
                    for comment in notebook.comments:
                        if comment.comment and comment.comment.strip():
                            comments[comment.name] = comment.comment
                found[submission.student_id] = Marks(cells, comments,
                                                     float(submission.late_submission_penalty or 0.0))
    return found


def gradebook_file(url: str | None) -> Path | None:
    """The file of a ``sqlite:///`` gradebook (its folder is the course folder, where nbgrader's feedback is)."""
    if not url or not url.startswith("sqlite:///") or url == "sqlite:///":
        return None
    path = Path(url[len("sqlite:///"):]).resolve()
    return path if path.is_file() else None


# ---- the page, as blocks both renderers share -----------------------------------------------------------------
# A block: ("h", level, text) | ("p", spans) | ("ul", [spans, ...]) | ("pre", text) | ("table", caption, head, rows)
# where spans is a list of (text, strong) pairs; every text is plain text, escaped by the renderer.


number = lms.number  # a finite int or float


def pts(value: float) -> str:
    return lms.text(value)


def bounded(value, limit: int = MAX_TEXT) -> str:
    text = value if type(value) is str else ""
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more characters]"


def build(assignment: str, data: dict, column: lms.Column, marks: Marks | None, total, with_gradebook: bool) -> list:
    """The hand-back's blocks for one student's result ``data``; ``column`` is the export's, ``marks`` and
    ``total`` (``gradebook.Total``) the gradebook's record of the submission."""
    extra = data["extra_data"]
    student = extra["student_id"]
    parts = {name: part for name, part in extra.get("parts", {}).items() if type(part) is dict} \
        if type(extra.get("parts")) is dict else {}
    tests = [t for t in data.get("tests", []) if type(t) is dict][:MAX_ITEMS * 5] \
        if type(data.get("tests")) is list else []
    cells = marks.cells if marks else {}
    late = late_of(extra.get("late"))
    blocks: list = [("h", 1, f"Your hand-back: {assignment}"),
                    ("p", [("Student: ", False), (student, True)])]

    # -- the total
    grade = column.scores.get(student)
    pending = column.pending.get(student)
    decided = {name: task_points(name, part, cells) for name, part in parts.items()}
    tops = {name: float(part["max_score"]) if number(part.get("max_score")) else 0.0 for name, part in parts.items()}
    by_tests = [name for name, (_, how) in decided.items() if how in ("automatic", "released")]
    manual = [cell for cell in cells.values() if not cell.name.startswith("check_")
              or cell.name[len("check_"):] not in parts]
    waiting = [c for c in manual if c.needs_manual_grade or c.score is None]
    blocks.append(("h", 2, "Your total"))
    if grade is not None:
        blocks.append(("p", [("Total: ", False), (f"{pts(grade)} / {pts(column.max_score)}", True)]
                       + ([(" (automatic points only: the points graded by hand are missing)", False)]
                          if not with_gradebook and lms.manual_cells(assignment) else [])))
    else:
        so_far = total.score if total is not None else float(data["score"]) - (late["penalty"] if late else 0.0)
        reason = {"review": "a task is held for your instructor's review",
                  "manual": "a part is not graded by hand yet",
                  "grader_error": "the grader failed on this submission; your instructor grades it again",
                  "unrecorded": "your instructor has not recorded this result in the gradebook yet",
                  "stale": "the gradebook has not caught up with this result yet"}.get(pending or "", "it is not final")
        blocks.append(("p", [("Total so far: ", False), (f"{pts(so_far)} / {pts(column.max_score)}", True),
                             (f" (provisional, no grade yet: {reason})", False)]))
    lines = [[("Automatic points: ", False),
              (f"{pts(sum(decided[n][0] for n in by_tests))} / {pts(sum(tops[n] for n in by_tests))}", True)]]
    for name, (points, how) in decided.items():
        title = bounded(parts[name].get("title"), 200) or name
        if how == "held":
            lines.append([(f"Held for review, {title}: ", False), (f"waits for your instructor (out of "
                                                                   f"{pts(tops[name])})", True)])
        elif how == "typed":
            lines.append([(f"Scored by your instructor, {title}: ", False), (f"{pts(points)} / {pts(tops[name])}",
                                                                            True)])
    if with_gradebook and marks is None and lms.manual_cells(assignment):
        lines.append([("Graded by hand: ", False), ("not in the gradebook yet", True)])
    if with_gradebook:
        for cell in manual:
            lines.append([(f"Graded by hand, {describe(cell)}: ", False),
                          (f"{pts(cell.score)} / {pts(cell.max_score)}" if cell not in waiting else
                           f"not graded yet (out of {pts(cell.max_score)})", True)])
    else:
        by_hand = lms.manual_cells(assignment)
        if by_hand:
            lines.append([("Graded by hand: ", False),
                          (f"missing from this total ({', '.join(by_hand)}: {pts(sum(by_hand.values()))} points)",
                           True), ("; your instructor grades them in nbgrader", False)])
    if late and late["penalty"] > 0:
        counted = not with_gradebook or abs((marks.penalty if marks else 0.0) - late["penalty"]) < 1e-6
        lines.append([("Late penalty: ", False), (f"-{pts(late['penalty'])}", True),
                      (" (see Lateness below; the total is after it)" if counted else
                       " (see Lateness below; not in the gradebook yet, so not in this total)", False)])
    elif marks and marks.penalty > 0:
        lines.append([("Late penalty in the gradebook: ", False), (f"-{pts(marks.penalty)}", True)])
    blocks.append(("ul", lines))

    # -- the table of tasks
    rows = []
    for name, part in parts.items():
        points, how = task_points(name, part, cells)
        rows.append([bounded(part.get("title"), 200) or name,
                     "held" if how == "held" else pts(points),
                     pts(float(part["max_score"])) if number(part.get("max_score")) else "",
                     HOW[how]])
    if with_gradebook:
        for cell in manual:
            rows.append([describe(cell).capitalize(), "not graded yet" if cell in waiting else pts(cell.score),
                         pts(cell.max_score), "graded by hand"])
    blocks.append(("table", f"Points per task of {assignment}", ["Task", "Points", "Out of", "Decided by"], rows))

    # -- each task: what lost points, and why
    for name, part in parts.items():
        title = bounded(part.get("title"), 200) or name
        points, how = task_points(name, part, cells)
        top = float(part["max_score"]) if number(part.get("max_score")) else 0.0
        blocks.append(("h", 2, title))
        if how == "held":
            measured = part.get("held") if number(part.get("held")) else 0.0
            blocks.append(("p", [("Held for your instructor's review: ", True),
                                 (f"its tests measured {pts(measured)} / {pts(top)}. These points wait for your "
                                  "instructor and are not in the total yet.", False)]))
        elif how == "typed":
            blocks.append(("p", [("Scored by your instructor: ", True), (f"{pts(points)} / {pts(top)}", False)]
                           + ([(f" (the tests measured {pts(part['held'])})", False)] if number(part.get("held"))
                              else [])))
        else:
            blocks.append(("p", [("Points: ", False), (f"{pts(points)} / {pts(top)}", True)]
                           + ([(" (released after your instructor's review)", False)] if how == "released" else [])))
        if type(part.get("note")) is str and part["note"] and how != "released":
            blocks.append(("p", [("Note: ", True), (bounded(part["note"]), False)]))
        lost, hint = reasons(title, tests)
        if lost:
            blocks.append(("ul", lost))
        if hint:
            blocks.append(("p", [("What to check: ", True), (hint, False)]))
        if not lost and how in ("automatic", "released") and points >= top:
            blocks.append(("p", [("Every test passed.", False)]))
        comment = marks.comments.get(name) if marks else None
        if comment:
            blocks += [("p", [("Your instructor's comment:", True)]), ("pre", bounded(comment))]

    # -- graded by hand
    if with_gradebook and (manual or (marks and marks.comments)):
        blocks.append(("h", 2, "Graded by your instructor"))
        for cell in manual:
            blocks.append(("p", [(f"{describe(cell).capitalize()}: ", True),
                                 ("not graded yet" if cell in waiting else f"{pts(cell.score)} / "
                                  f"{pts(cell.max_score)}", False)]))
            if marks.comments.get(cell.name):
                blocks += [("p", [("Comment:", True)]), ("pre", bounded(marks.comments[cell.name]))]
        others = {n: c for n, c in marks.comments.items() if n not in parts and n not in {c.name for c in manual}}
        for name, comment in sorted(others.items()):
            blocks += [("p", [(f"Comment on the cell {name}:", True)]), ("pre", bounded(comment))]
    elif not with_gradebook and lms.manual_cells(assignment):
        blocks.append(("h", 2, "Graded by your instructor"))
        blocks.append(("p", [("Not in this hand-back: the points and comments of the parts graded by hand are in "
                              "your instructor's gradebook.", False)]))

    # -- lateness, notebooks, notes
    if late:
        blocks.append(("h", 2, "Lateness"))
        submitted, due = moment(late["submitted_at"], late["due"]), moment(late["due"], late["due"])
        items = [[("Submitted: ", False), (submitted or "unknown", True)],
                 [("Due: ", False), (due or "no due date", True)],
                 [("Late by: ", False), (duration(late["seconds_late"]) if late["seconds_late"] > 0 else "on time",
                                         True)]]
        items.append([("Penalty: ", False), (f"{pts(late['penalty'])} point{'s' * (late['penalty'] != 1)}", True)]
                     + ([(f" ({late['policy']})", False)] if late["policy"] else []))
        blocks.append(("ul", items))
    notebooks = notebooks_of(extra.get("notebooks"))
    if notebooks:
        blocks.append(("h", 2, "Which notebook counted"))
        blocks.append(("ul", [[(nb["name"], nb["counted"]), (f": {pts(nb['score'])} points, {nb['status']}"
                                                              + (" (counted)" if nb["counted"] else ""), False)]
                              for nb in notebooks]))
    notes = [bounded(p) for p in extra.get("problems", [])[:MAX_ITEMS] if type(p) is str] \
        if type(extra.get("problems")) is list else []
    if notes:
        blocks.append(("h", 2, "Notes on your submission"))
        blocks.append(("ul", [[(note, False)] for note in notes]))
    return blocks


HOW = {"automatic": "hidden tests", "held": "waits for your instructor", "typed": "your instructor",
       "released": "hidden tests, after review"}


def task_points(name: str, part: dict, cells: dict[str, Cell]) -> tuple[float, str]:
    """A task's points and who decided them: the gradebook's score where it has one (nbgrader counts a score
    typed in the formgrader over the automatic one), else the result's."""
    cell = cells.get(f"check_{name}")
    if cell is not None and cell.manual_score is not None:
        return cell.score, "typed"
    if "held" in part:
        return 0.0, "held"
    score = part.get("score") if number(part.get("score")) else 0.0
    if cell is not None and cell.score is not None:
        score = cell.score
    return float(score), "released" if part.get("note") == "released after your instructor's review" else "automatic"


def describe(cell: Cell) -> str:
    return f"the written answer {cell.name}" if cell.cell_type == "markdown" else f"the cell {cell.name}"


def reasons(title: str, tests: list[dict]) -> tuple[list, str]:
    """The lost points of a task (each failed test: its name, points and message) and its one hint."""
    lost, hint = [], ""
    for test in tests:
        name = test.get("name") if type(test.get("name")) is str else ""
        if name.removesuffix(report.HELD_SUFFIX).split(" > ", 1)[0] != title or test.get("status") == "passed":
            continue
        output = test.get("output") if type(test.get("output")) is str else ""
        message = []
        for line in output.splitlines()[:50]:
            if line.startswith("What to check: "):
                hint = hint or bounded(line[len("What to check: "):])
            elif not line.startswith(report.HELD_LINE):
                message.append(line)
        top = test.get("max_score") if number(test.get("max_score")) else 0.0
        score = test.get("score") if number(test.get("score")) else 0.0
        what = bounded(name.removesuffix(report.HELD_SUFFIX).split(" > ", 1)[-1], 300)
        lost.append([(f"{what} ", True), (f"({pts(score)} / {pts(top)})", False),
                     (": " + bounded("\n".join(message)) if message else "", False)])
        if len(lost) >= MAX_ITEMS:
            break
    return lost, hint


def moment(when: str | None, zone_of: str | None) -> str | None:
    """An ISO date-time from a result as a learner reads it, in the time zone of ``zone_of`` (the due date's) so
    that the two times shown side by side compare at a glance: ``2026-11-21 23:44 (UTC+01:00)``. Text that is not
    a date-time is shown as it is."""
    try:
        instant = dt.datetime.fromisoformat(when)
    except (TypeError, ValueError):
        return when
    try:
        zone = dt.datetime.fromisoformat(zone_of).tzinfo
    except (TypeError, ValueError):
        zone = None
    if instant.tzinfo is not None and zone is not None:
        instant = instant.astimezone(zone)
    offset = instant.strftime("%z")
    where = f" (UTC{offset[:3]}:{offset[3:]})" if offset else ""
    return instant.strftime("%Y-%m-%d %H:%M") + where


def late_of(value) -> dict | None:
    """``extra_data.late`` with the common schema's types, or None when it has no valid penalty (an old or damaged
    result: the export then subtracts nothing either, ``report.late_penalty``). A field of the wrong type is unknown."""
    if type(value) is not dict or not number(value.get("penalty")) or value["penalty"] < 0:
        return None
    seconds = value.get("seconds_late")
    return {"submitted_at": bounded(value.get("submitted_at"), 64) or None,
            "due": bounded(value.get("due"), 64) or None,
            "seconds_late": float(seconds) if number(seconds) and seconds >= 0 else 0.0,
            "penalty": float(value["penalty"]), "policy": bounded(value.get("policy"), 300)}


def notebooks_of(value) -> list[dict]:
    """``extra_data.notebooks`` entries with the common schema's types (others left out)."""
    if type(value) is not list:
        return []
    return [{"name": bounded(nb["name"], 255), "score": float(nb["score"]), "status": bounded(nb["status"], 64),
             "counted": nb["counted"]}
            for nb in value[:MAX_ITEMS] if type(nb) is dict and type(nb.get("name")) is str
            and number(nb.get("score")) and type(nb.get("status")) is str and type(nb.get("counted")) is bool]


def duration(seconds: float) -> str:
    minutes = math.ceil(seconds / 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    said = [f"{n} {unit}{'s' * (n != 1)}" for n, unit in ((days, "day"), (hours, "hour"), (minutes, "minute")) if n]
    return ", ".join(said) or "less than a minute"


# ---- rendering ---------------------------------------------------------------------------------------------------


# What Markdown reads as markup anywhere (inline), and what it reads as a block only at the start of a line
# (headings, lists, quotes, setext underlines, ordered items): escaped, so that a renderer shows the text.
MARKDOWN_INLINE = re.compile(r"([\\`*_\[\]<>&|~$])")
MARKDOWN_LINE_START = re.compile(r"^([ \t]*)(#|([-+=])(?=\s|\3|$)|\d+(?=[.)](?:\s|$)))", re.MULTILINE)


def md_text(text: str) -> str:
    text = MARKDOWN_INLINE.sub(r"\\\1", text)
    text = MARKDOWN_LINE_START.sub(lambda m: m[1] + ("\\" + m[2] if not m[2][0].isdigit() else m[2] + "\\"), text)
    return text.replace("\n", "  \n")


def md_spans(spans) -> str:
    out = ""
    for text, strong in spans:
        if strong and text.strip():  # ** must touch the words it makes strong
            core = text.strip()
            out += text[:len(text) - len(text.lstrip())] + f"**{md_text(core)}**" + text[len(text.rstrip()):]
        else:
            out += md_text(text)
    return out


def markdown(blocks: list) -> str:
    out = []
    for block in blocks:
        kind = block[0]
        if kind == "h":
            out.append("#" * block[1] + " " + md_text(block[2]))
        elif kind == "p":
            out.append(md_spans(block[1]))
        elif kind == "ul":
            out.append("\n".join("- " + md_spans(spans).replace("\n", "\n  ") for spans in block[1]))
        elif kind == "pre":
            fence = "~" * max(3, 1 + max((len(run) for run in re.findall(r"~+", block[1])), default=0))
            out.append(f"{fence}text\n{block[1]}\n{fence}")
        elif kind == "table":
            _, caption, head, rows = block
            cells = lambda row: "| " + " | ".join(md_text(c).replace("\n", " ") for c in row) + " |"  # noqa: E731
            out.append("\n".join([f"*{md_text(caption)}*", "", cells(head), "|" + "---|" * len(head)]
                                 + [cells(row) for row in rows]))
    return "\n\n".join(out) + "\n"


def esc(text: str) -> str:
    return html.escape(text, quote=True)


def html_spans(spans) -> str:
    return "".join(f"<strong>{esc(text)}</strong>" if strong and text else esc(text) for text, strong in spans)


STYLE = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; line-height: 1.5; color: #1a1a1a;
       background: #fff; max-width: 46rem; margin: 0 auto; padding: 1rem; overflow-wrap: break-word; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 1.8rem; border-bottom: 1px solid #ccc; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
caption { text-align: left; font-weight: bold; padding: 0.3rem 0; }
th, td { border: 1px solid #bbb; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td { white-space: nowrap; } td:last-child { white-space: normal; }
tbody th { overflow-wrap: anywhere; min-width: 7rem; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f6f6; border-left: 3px solid #777;
      padding: 0.5rem; }
li { margin: 0.3rem 0; white-space: pre-wrap; overflow-wrap: anywhere; }
@media print { body { max-width: none; padding: 0; font-size: 11pt; } h2 { break-after: avoid; }
               tr, pre, li { break-inside: avoid; } .scroll { overflow: visible; } td { white-space: normal; } }
"""


def page_html(blocks: list, digest: str) -> str:
    title = blocks[0][2] if blocks and blocks[0][0] == "h" else "Hand-back"
    body = []
    for block in blocks:
        kind = block[0]
        if kind == "h":
            body.append(f"<h{block[1]}>{esc(block[2])}</h{block[1]}>")
        elif kind == "p":
            body.append(f"<p>{html_spans(block[1])}</p>")
        elif kind == "ul":
            body.append("<ul>\n" + "\n".join(f"<li>{html_spans(spans)}</li>" for spans in block[1]) + "\n</ul>")
        elif kind == "pre":
            body.append(f"<pre>{esc(block[1])}</pre>")
        elif kind == "table":
            _, caption, head, rows = block
            body.append('<div class="scroll"><table>\n'
                        f"<caption>{esc(caption)}</caption>\n"
                        "<thead><tr>" + "".join(f'<th scope="col">{esc(c)}</th>' for c in head) + "</tr></thead>\n"
                        "<tbody>\n" + "\n".join("<tr>" + f'<th scope="row">{esc(row[0])}</th>'
                                                + "".join(f"<td>{esc(c)}</td>" for c in row[1:]) + "</tr>"
                                                for row in rows) + "\n</tbody></table></div>")
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
            f'<meta name="handback-digest" content="{digest}">\n'
            f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(body) + "\n</main>\n</body>\n</html>\n")


def write(folder: Path, student: str, blocks: list) -> bool:
    """Write the student's hand-back unless the one there has the same inputs; True if written."""
    digest = hashlib.sha256(json.dumps([VERSION, blocks], sort_keys=True).encode()).hexdigest()
    target = folder / f"{student}.html"
    try:
        with target.open("rb") as existing:
            found = DIGEST_META.search(existing.read(4096))
        if found and found.group(1).decode() == digest and (folder / f"{student}.md").is_file():
            return False
    except OSError:
        pass
    report.write_atomic(folder / f"{student}.md", markdown(blocks), durable=False)
    report.write_atomic(target, page_html(blocks, digest), durable=False)  # last: its digest says both are done
    return True


# ---- nbgrader's feedback page ------------------------------------------------------------------------------------


def check_feedback(database: Path, folder: Path, assignment: str, student: str, marks: Marks | None) -> bool:
    """Remove nbgrader's feedback page of ``student`` if the gradebook changed since it was written (see the module's
    docstring); True if it was removed."""
    from autograder import gradebook

    state_path = folder / STATE / f"{student}.json"
    try:
        seen = json.loads(state_path.read_text())
        seen = seen if type(seen) is dict else {}
    except (OSError, ValueError):
        seen = {}
    now = marks.digest() if marks else None
    course = database.parent
    pages = course / "feedback" / student / assignment
    page = page_digest(pages)
    stale = False
    if page is not None:
        if seen.get("page") == page:
            stale = seen.get("gradebook") != now
        else:  # written since the last run: after the gradebook's last change, or with the scores seen then
            newest = max((p.stat().st_mtime_ns for p in pages.iterdir() if p.is_file()), default=0)
            changed = max((path.stat().st_mtime_ns for path in (database, *database.parent.glob(f"{database.name}-*"))
                           if path.is_file()), default=newest + 1)  # the file, and SQLite's journal if there is one
            stale = not (newest > changed or ("gradebook" in seen and seen["gradebook"] == now))
    if stale:
        stale = gradebook.remove_feedback(course, student, assignment)
        page = None
    if seen != {"gradebook": now, "page": page}:
        report.write_atomic(state_path, json.dumps({"gradebook": now, "page": page}), durable=False)
    return stale


def page_digest(folder: Path) -> str | None:
    if folder.is_symlink() or not folder.is_dir():
        return None
    digest = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.is_symlink():
            digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
