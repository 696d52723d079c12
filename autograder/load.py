"""Stage 1: find submissions and read each notebook into the code cells to run.

Nothing here executes student code: a notebook is parsed as JSON (with nbformat's
upgrade of old versions), its code cells are kept in order, and the cells the course
owns (grade cells holding hidden tests, locked self-checks) are left out. Every problem
(not JSON, not a notebook, too big, a symlink, non-UTF-8 bytes, deleted or duplicated
cells) becomes a message in the student's result; a notebook with any readable code is
still graded.

The source is also scanned, without running it, for ways to switch off the worker's
monitor of built-ins (``TAMPER``): a submission that reaches for them gets 0.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent
MAX_NOTEBOOK_BYTES = 20 * 2**20
MAX_CODE_CHARS = 2 * 2**20
HIDDEN_MARK = "### BEGIN HIDDEN TESTS"

# Names that reach into torch's dispatch machinery, the interpreter's hooks or raw
# memory: a graded exercise has no use for them, and they could blind the monitor.
TAMPER = {
    "_C", "_disable_torch_function", "_disable_current_modes", "_pop_mode", "_push_mode", "_set_torch_function_mode",
    "_python_dispatch", "overrides", "TorchFunctionMode", "TorchDispatchMode", "_get_current_dispatch_mode_stack",
    "_get_current_function_mode_stack", "library", "ctypes", "cffi", "get_objects", "get_referrers",
    "setprofile", "settrace", "__subclasses__", "autograder", "Monitor", "__builtins__", "builtins",
}


@dataclass
class Cell:
    label: str
    source: str


@dataclass
class Entry:
    """One student's submission, as the grader sees it before running anything."""

    student_id: str
    path: Path
    digest: str = ""
    cells: list[Cell] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    readable: bool = True
    tampering: list[str] = field(default_factory=list)


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


def find(assignment: str, paths: list[Path]) -> list[Entry]:
    """Every submission under ``paths``: .ipynb files, or nbgrader course directories."""
    entries: list[Entry] = []
    for path in paths:
        if path.is_dir() and (path / "submitted").is_dir():
            for student in sorted(p for p in (path / "submitted").iterdir() if p.is_dir()):
                folder = student / assignment
                if not folder.is_dir():
                    continue
                notebooks = sorted(folder.glob("*.ipynb"))
                preferred = [p for p in notebooks if p.name == f"{assignment}.ipynb"] or notebooks
                entry = Entry(student.name, preferred[0] if preferred else folder / f"{assignment}.ipynb")
                if len(notebooks) > 1:
                    entry.problems.append(f"{len(notebooks)} notebooks submitted; graded {entry.path.name}")
                entries.append(entry)
        elif path.is_dir():
            entries += [Entry(p.stem, p) for p in sorted(path.glob("*.ipynb"))]
        else:
            entries.append(Entry(path.stem, path))
    seen: dict[str, int] = {}
    for entry in entries:
        seen[entry.student_id] = seen.get(entry.student_id, 0) + 1
        if seen[entry.student_id] > 1:
            entry.problems.append(f"another submission is also named {entry.student_id}; "
                                  f"this one is reported as {entry.student_id}~{seen[entry.student_id]}")
            entry.student_id = f"{entry.student_id}~{seen[entry.student_id]}"
    return entries


def read(assignment: str, entry: Entry) -> Entry:
    """Fill ``entry`` with its code cells and problems; never raises for a bad file."""
    path = entry.path
    if path.is_symlink():
        return invalid(entry, "the submission is a symbolic link: submit the notebook file itself")
    if not path.is_file():
        return invalid(entry, "no notebook file was found")
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        return invalid(entry, f"the notebook is {size / 2**20:.0f} MB, over the {MAX_NOTEBOOK_BYTES // 2**20} MB limit: "
                              "clear its outputs (Edit > Clear Outputs of All Cells) and submit again")
    raw = path.read_bytes()
    entry.digest = hashlib.sha256(raw).hexdigest()
    if not raw.strip():
        return invalid(entry, "the notebook file is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        text = raw.decode("utf-8", errors="replace")
        entry.problems.append(f"the file is not valid UTF-8 (byte {error.start}); unreadable bytes were replaced")
    try:
        data = json.loads(text)
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
    cells(assignment, entry, data.get("cells", []))
    return entry


def cells(assignment: str, entry: Entry, raw_cells: list) -> None:
    owned, solutions = course_cells(assignment)
    present: dict[str, int] = {}
    total = 0
    for index, cell in enumerate(raw_cells):
        if type(cell) is not dict or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if type(source) is list and all(type(s) is str for s in source):
            source = "".join(source)
        if type(source) is not str:
            entry.problems.append(f"cell {index + 1} has a malformed source and was skipped")
            continue
        meta = cell.get("metadata") if type(cell.get("metadata")) is dict else {}
        nbgrader = meta.get("nbgrader") if type(meta.get("nbgrader")) is dict else {}
        grade_id = nbgrader.get("grade_id")
        if type(grade_id) is str:
            present[grade_id] = present.get(grade_id, 0) + 1
        if grade_id in owned or HIDDEN_MARK in source:
            continue
        total += len(source)
        if total > MAX_CODE_CHARS:
            entry.problems.append("the notebook holds more code than the grader reads; later cells were skipped")
            break
        entry.cells.append(Cell(str(index + 1), source))
        entry.tampering += scan(source, str(index + 1))
    for grade_id in sorted(solutions):
        if grade_id not in present:
            entry.problems.append(f"the answer cell '{grade_id}' is missing (deleted or replaced?); "
                                  "its task is graded from whatever the other cells define")
        elif present[grade_id] > 1:
            entry.problems.append(f"the answer cell '{grade_id}' appears {present[grade_id]} times; "
                                  "all copies run in order, so the last definition counts")
    if not entry.cells:
        entry.problems.append("the notebook has no code cells to run")


def scan(source: str, label: str) -> list[str]:
    """Names from TAMPER that the cell's code mentions (attributes, names, imports, strings)."""
    try:
        tree = ast.parse(source.replace("\r\n", "\n"))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # the worker reports the syntax error; nothing here runs it
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [part for alias in node.names for part in alias.name.split(".")]
            names += (node.module or "").split(".") if isinstance(node, ast.ImportFrom) else []
        elif isinstance(node, ast.Constant) and type(node.value) is str and len(node.value) < 100:
            names = [node.value]
        found.update(name for name in names if name in TAMPER)
    return [f"cell {label} uses {name}" for name in sorted(found)]


def invalid(entry: Entry, message: str) -> Entry:
    entry.readable = False
    entry.problems.append(message)
    if not entry.digest and entry.path.is_file() and not entry.path.is_symlink():
        entry.digest = hashlib.sha256(entry.path.read_bytes()[:MAX_NOTEBOOK_BYTES]).hexdigest()
    return entry
