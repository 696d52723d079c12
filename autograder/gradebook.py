"""Record scores in nbgrader's gradebook through nbgrader's own API.

Each graded part is one grade cell (``check_<part>``); its score becomes that cell's
``auto_score``, exactly where ``nbgrader autograde`` would put it, so ``nbgrader export``
and the formgrader work on top. Manually graded cells (ex3's written answer) are left
for the formgrader: a copy of the submission goes to ``autograded/<student>/<assignment>/``
in the course folder, which is where the formgrader reads it from.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry


def open_checked(url: str, assignment: str, usage_error):
    """The gradebook at ``url`` if it knows ``assignment`` (else a usage error naming the fix)."""
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists():
        raise usage_error(f"no gradebook at {url[len('sqlite:///'):]}: run `nbgrader generate_assignment "
                          f"{assignment}` in the course folder first")
    gradebook = Gradebook(url)
    try:
        gradebook.find_assignment(assignment)
    except MissingEntry:
        gradebook.close()
        raise usage_error(f"the gradebook has no assignment {assignment}: run `nbgrader generate_assignment "
                          f"{assignment}` in the course folder first") from None
    return gradebook


def record(gradebook: Gradebook, assignment: str, results: Path, student_ids: list[str]) -> int:
    """Write every student's per-part scores into the gradebook; returns how many were recorded."""
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
            gradebook.add_submission(assignment, student_id)
        for part, scored in data["extra_data"]["parts"].items():
            grade = gradebook.find_grade(f"check_{part}", notebook, assignment, student_id)
            grade.auto_score = float(scored["score"])
            grade.needs_manual_grade = False
        for grade in gradebook.find_submission_notebook(notebook, assignment, student_id).grades:
            if grade.auto_score is None and grade.manual_score is None and grade.cell.cell_type == "markdown":
                grade.needs_manual_grade = True
        gradebook.db.commit()
        copy_for_formgrader(gradebook, assignment, student_id)
        recorded += 1
    return recorded


def copy_for_formgrader(gradebook: Gradebook, assignment: str, student_id: str) -> None:
    """Put the submitted notebook where the formgrader looks for it, when this is a course folder."""
    url = str(gradebook.db.bind.url)
    if not url.startswith("sqlite:///"):
        return
    course = Path(url[len("sqlite:///"):]).resolve().parent
    source = course / "submitted" / student_id / assignment / f"{assignment}.ipynb"
    if source.is_file() and not source.is_symlink():
        target = course / "autograded" / student_id / assignment
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target / source.name)
