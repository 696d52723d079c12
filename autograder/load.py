"""Stage 1: find submissions and read each notebook into the code cells to run.

Nothing here executes student code: a notebook is parsed as JSON (with nbformat's
upgrade of old versions), its outputs and attachments are dropped (they are never
graded), its structure is checked with nbformat's own validator (a cell that breaks
the format is skipped and named), its code cells are kept in order as the Python IPython would run (``scan.
python_source``), and the cells the course owns (grade cells holding hidden tests,
locked self-checks, known by their nbgrader ``grade_id``) are left out. Every problem
(not JSON, not a notebook, too big to read, a symlink, non-UTF-8 bytes, deleted or
duplicated cells) becomes a message in the student's result; a notebook with any
readable code is still graded.

Each kept cell is also scanned, without running it (``scan.scan``). A finding costs nothing by
itself: ``evidence`` holds a part for review only when the part's graded calls ran the line it is
on, and only for constructs with no honest use there; every other finding is reported to the
instructor with its line quoted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from autograder import scan
from autograder.report import safe_text

REPO = Path(__file__).resolve().parent.parent
MAX_NOTEBOOK_BYTES = 256 * 2**20  # what the grader reads at all, outputs included: a bound on its memory
MAX_CODE_CHARS = 2 * 2**20  # code run and scanned per notebook
MAX_FINDINGS = 50  # of each kind per submission
MAX_CELLS = 10_000  # a course notebook has about 30; checking each against the format costs time
HIDDEN_MARK = "### BEGIN HIDDEN TESTS"


@dataclass
class Cell:
    label: str
    source: str  # Python, as IPython would run the cell (magics become get_ipython() calls): what was scanned


@dataclass
class Entry:
    """One student's submission, as the grader sees it before running anything."""

    student_id: str
    path: Path
    digest: str = ""
    cells: list[Cell] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    readable: bool = True
    findings: list[scan.Finding] = field(default_factory=list)  # their ``what`` starts with "cell N, line L: "
    others: list[Path] = field(default_factory=list)  # the folder's other notebooks: each is graded (``several``)


@cache
def course_cells(assignment: str) -> tuple[frozenset[str], frozenset[str]]:
    """(grade_ids of the cells the grader skips, grade_ids of answer cells) from the released notebook.

    Skipped: grade cells (they hold the hidden-test calls) and the locked self-checks
    (``selfcheck_*``), which the learner already ran and the hidden suite supersedes.
    """
    notebook = json.loads((REPO / "exercises" / assignment / f"{assignment}.ipynb").read_text())
    owned, solutions = set(), set()
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if "grade_id" not in meta:
            continue
        if meta.get("solution"):
            solutions.add(meta["grade_id"])
        elif meta.get("grade") or meta["grade_id"].startswith("selfcheck_"):
            owned.add(meta["grade_id"])
    return frozenset(owned), frozenset(solutions)


@cache
def course_sources(assignment: str) -> dict[str, str]:
    """Source (whitespace-normalized) -> grade_id of the cells the grader skips, to know a copy without metadata.

    From the released notebook and, where the course ships it, the solution notebook (its
    graded cells hold the hidden-test call, as an nbgrader-autograded notebook does).
    """
    owned, found = course_cells(assignment)[0], {}
    for folder in ("solutions", "exercises"):
        path = REPO / folder / assignment / f"{assignment}.ipynb"
        for cell in json.loads(path.read_text())["cells"] if path.is_file() else []:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id in owned:
                found[_normalized(cell.get("source", ""))] = grade_id
    return found


def _normalized(source) -> str:
    text = "".join(source) if type(source) is list else source
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def find(assignment: str, paths: list[Path], passed_over: list[str] | None = None) -> list[Entry]:
    """Every submission under ``paths``: .ipynb files, or nbgrader course directories.

    A folder that yields no submission is named, with what was looked for, in ``passed_over``.
    """
    entries: list[Entry] = []
    for path in paths:
        before = len(entries)
        if path.is_dir() and (path / "submitted").is_dir():
            for student in sorted(p for p in (path / "submitted").iterdir() if p.is_dir()):
                folder = student / assignment
                if not folder.is_dir():
                    continue
                notebooks = sorted(folder.glob("*.ipynb"))
                preferred = [p for p in notebooks if p.name == f"{assignment}.ipynb"] or notebooks
                entry = Entry(student.name, preferred[0] if preferred else folder / f"{assignment}.ipynb")
                entry.others = [p for p in notebooks if p != entry.path]  # the best one counts (``several``)
                entries.append(entry)
            where = f"no student folder under {path / 'submitted'}/ has an {assignment}/ folder"
        elif path.is_dir():
            entries += [Entry(p.stem, p) for p in sorted(path.glob("*.ipynb"))]
            where = ("it holds no .ipynb file (the grader reads the notebooks directly in a folder, or an nbgrader "
                     "course folder's submitted/<student>/<assignment>/)")
        else:
            entries.append(Entry(path.stem, path))
        if len(entries) == before and passed_over is not None:
            passed_over.append(f"{path}: {where}")
    seen: dict[str, int] = {}
    for entry in entries:
        entry.student_id = safe_text(entry.student_id, name=True)  # a file name's undecodable bytes, a newline
        seen[entry.student_id] = seen.get(entry.student_id, 0) + 1
        if seen[entry.student_id] > 1:
            entry.problems.append(f"another submission is also named {entry.student_id}; "
                                  f"this one is reported as {entry.student_id}~{seen[entry.student_id]}")
            entry.student_id = f"{entry.student_id}~{seen[entry.student_id]}"
    return entries


def describe_empty(paths: list[Path]) -> str:
    """Why ``find`` found nothing under ``paths``, and what it looks for."""
    names = ", ".join(str(path) for path in paths) or "the given paths"
    return (f"no notebooks were found under {names}: the grader looks for .ipynb files (a file, or the .ipynb files "
            "directly in a folder), or an nbgrader course folder holding "
            "submitted/<student>/<assignment>/<assignment>.ipynb")


def read(assignment: str, entry: Entry) -> Entry:
    """Fill ``entry`` with its code cells and problems; never raises for a bad file."""
    path = entry.path
    if path.is_symlink():
        return invalid(entry, "the submission is a symbolic link: submit the notebook file itself")
    if not path.is_file():
        return invalid(entry, "no notebook file was found")
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        return too_big(entry, size)
    with path.open("rb") as file:
        raw = file.read(MAX_NOTEBOOK_BYTES + 1)
    if len(raw) > MAX_NOTEBOOK_BYTES:  # it grew since stat
        return too_big(entry, len(raw))
    entry.digest = hashlib.sha256(raw).hexdigest()
    if not raw.strip():
        return invalid(entry, "the notebook file is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        text = raw.decode("utf-8", errors="replace")
        entry.problems.append(f"the file is not valid UTF-8 (byte {error.start}); unreadable bytes were replaced")
    del raw
    try:
        data = json.loads(text, object_hook=without_outputs)
    except (ValueError, RecursionError) as error:
        where = f" (line {error.lineno}, column {error.colno})" if hasattr(error, "lineno") else ""
        return invalid(entry, f"the file is not a notebook: it is not valid JSON{where}. "
                              "Download it again from Jupyter with File > Download")
    if type(data) is not dict or not isinstance(data.get("cells", data.get("worksheets")), list):
        return invalid(entry, "the file is JSON but not a Jupyter notebook (it has no cells)")
    major = data.get("nbformat")
    if major == 3:
        try:
            import nbformat  # only for old notebooks: it is slow to import

            data = json.loads(json.dumps(nbformat.convert(nbformat.from_dict(data), 4)))
            entry.problems.append("the notebook uses the old format 3; it was converted to format 4")
        except Exception:
            return invalid(entry, "the notebook uses the old format 3 and could not be converted")
    elif major != 4:
        return invalid(entry, f"unsupported notebook format {major!r}: save it with a current Jupyter")
    raw_cells = data.get("cells", [])
    if len(raw_cells) > MAX_CELLS:
        return invalid(entry, f"the notebook has {len(raw_cells):,} cells; the grader reads notebooks of at most "
                              f"{MAX_CELLS:,}. Submit the exercise notebook itself")
    for index, message in format_problems(data):
        if index is None:
            entry.problems.append(f"the notebook does not follow Jupyter's notebook format ({message}); "
                                  "its cells were read anyway")
        else:
            raw_cells[index] = None  # cells() passes over it
            entry.problems.append(f"cell {index + 1} does not follow Jupyter's notebook format ({message}) and was "
                                  "skipped: open the notebook in Jupyter, re-type the cell, save and submit again")
    cells(assignment, entry, raw_cells)
    return entry


def format_problems(data: dict) -> list[tuple[int | None, str]]:
    """What nbformat's own validator finds: (cell index, or None for the notebook, message), one per cell.

    A missing cell id is no problem (Jupyter adds one when it opens the notebook); outputs are gone already.
    """
    if "jsonschema" not in sys.modules:
        # jsonschema loads every optional format checker it finds; one (rfc3987_syntax, an IRI grammar)
        # takes over a second to import, and a notebook's schema has no IRI to check.
        sys.modules.setdefault("rfc3987_syntax", None)
    import nbformat.validator  # imported here: only grading processes that read notebooks pay for it

    found: dict[int | None, str] = {}
    try:
        for error in nbformat.validator.iter_validate(data, version=4):
            if error.message == "'id' is a required property":
                continue
            path = list(error.absolute_path)
            index = path[1] if len(path) > 1 and path[0] == "cells" and type(path[1]) is int else None
            found.setdefault(index, described(error, path[2:] if index is not None else path))
    except RecursionError:
        found[None] = "it is nested too deeply to check"
    return sorted(found.items(), key=lambda item: -1 if item[0] is None else item[0])


def described(error, where: list) -> str:
    """nbformat's finding in a few words, without echoing what the student wrote at length."""
    place = "/".join(map(str, where))
    if error.validator in ("oneOf", "anyOf"):
        return f"{place} has the wrong type" if place else "it is not a code, Markdown or raw cell as the format defines them"
    if error.validator == "type":
        expected = error.validator_value if type(error.validator_value) is str else " or ".join(error.validator_value)
        return f"{place or 'the cell'} should be of type {expected}, not {type(error.instance).__name__}"
    return f"{place + ': ' if place else ''}{error.message[:160]}"


def without_outputs(obj: dict) -> dict:
    """``json.loads`` hook: a cell's outputs and attachments are dropped as soon as the cell is read."""
    if "cell_type" in obj:
        if "outputs" in obj:
            obj["outputs"] = []
        obj.pop("attachments", None)
    return obj


def too_big(entry: Entry, size: int) -> Entry:
    return invalid(entry, f"the notebook file is {size / 2**20:,.0f} MB, too big to read (the grader reads at most "
                          f"{MAX_NOTEBOOK_BYTES // 2**20} MB): its stored outputs make it this big. Clear them "
                          "(Edit > Clear Outputs of All Cells), save, and submit again")


def cells(assignment: str, entry: Entry, raw_cells: list) -> None:
    owned, solutions = course_cells(assignment)
    copies = course_sources(assignment)
    present: dict[str, int] = {}
    total = 0
    for index, cell in enumerate(raw_cells):
        if type(cell) is not dict:
            continue
        meta = cell.get("metadata") if type(cell.get("metadata")) is dict else {}
        nbgrader = meta.get("nbgrader") if type(meta.get("nbgrader")) is dict else {}
        grade_id = nbgrader.get("grade_id") if type(nbgrader.get("grade_id")) is str else None  # a list: unhashable
        if grade_id is not None:  # answer cells of any type (ex3's written answer is markdown)
            present[grade_id] = present.get(grade_id, 0) + 1
        if cell.get("cell_type") != "code" or grade_id in owned:
            continue
        label = str(index + 1)
        source = cell.get("source", "")
        if type(source) is list and all(type(s) is str for s in source):
            source = "".join(source)
        if type(source) is not str:
            entry.problems.append(f"cell {label} has a malformed source and was skipped")
            continue
        if HIDDEN_MARK in source:
            if _normalized(source) in copies:  # the course's own cell, pasted without its metadata
                entry.problems.append(f"cell {label} is a copy of the course's graded cell "
                                      f"'{copies[_normalized(source)]}' without its nbgrader metadata: skipped")
                continue
            entry.problems.append(f"cell {label} contains '{HIDDEN_MARK}' but is not one of the course's graded "
                                  "cells: it was run like any other cell")
        python, magic = scan.python_source(source), scan.cell_magic(source)
        if magic and magic not in scan.PYTHON_CELL_MAGICS and not python.strip():
            entry.problems.append(f"cell {label} is a %%{magic} cell, not Python: skipped")
            continue
        total += len(python)
        if total > MAX_CODE_CHARS:
            entry.problems.append("the notebook holds more code than the grader reads; later cells were skipped")
            break
        entry.cells.append(Cell(label, python))
        lines = python.splitlines()
        for finding in scan.scan(python):
            if sum(f.kind == finding.kind for f in entry.findings) < MAX_FINDINGS:  # per kind: see scan._Findings
                where = f"cell {label}, line {finding.line}" if finding.line else f"cell {label}"
                quote = lines[finding.line - 1].strip()[:120] if finding.line and finding.line <= len(lines) else ""
                entry.findings.append(dataclasses.replace(finding, what=f"{where}: {finding.what}", cell=label,
                                                          quote=quote))
    for grade_id in sorted(solutions):
        if grade_id not in present:
            entry.problems.append(f"the answer cell '{grade_id}' is missing (deleted or replaced?); "
                                  "its task is graded from whatever the other cells define")
        elif present[grade_id] > 1:
            entry.problems.append(f"the answer cell '{grade_id}' appears {present[grade_id]} times; "
                                  "all copies run in order, so the last definition counts")
    if not entry.cells:
        entry.problems.append("the notebook has no code cells to run")


def invalid(entry: Entry, message: str) -> Entry:
    entry.readable = False
    entry.problems.append(message)
    if not entry.digest and entry.path.is_file() and not entry.path.is_symlink():
        digest = hashlib.sha256(str(entry.path.stat().st_size).encode())  # a file too big to read: its size and start
        with entry.path.open("rb") as file:
            digest.update(file.read(16 * 2**20))
        entry.digest = digest.hexdigest()
    return entry
