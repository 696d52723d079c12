"""When each submission came in, whether it was late, and the penalty the course's policy gives it.

``apply`` runs after grading, on every submission of the run, graded now or kept from an earlier run:
it writes ``extra_data.late`` (and ``extra_data.lms``) into the result and rewrites the feedback. So
editing ``course.toml`` and grading again changes the lateness and the penalty without grading any code
again. The score stays the automatic points; the grade is ``score - late.penalty`` (``grade_of``).

Where the time comes from, for a notebook in ``<course>/submitted/<student>/<assignment>/``:

- ``timestamp.txt`` beside it, in nbgrader's formats: what ``nbgrader collect`` writes (``2026-11-20
  23:59:00.000000 UTC``, a zone name at the end) and what ``nbgrader zip_collect`` writes (``2026-11-20
  22:59:00``, no zone: UTC, as nbgrader reads it). Its source is ``zip`` when the course's collector
  took that time from the LMS's zip (``<course>/downloaded/<assignment>/lms.json`` says so), else
  ``timestamp.txt``.
- none: a Canvas ``LATE_`` mark (kept in ``lms.json``) still flags the submission late (source
  ``canvas-name``), with no penalty, since nothing says how late.

``late`` is written when the course gives the assignment a due date, or when Canvas marked it late;
a course that sets nothing gets none, and nothing changes.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

from autograder import course as course_module
from autograder import lms, report

MAX_SIDECAR_BYTES = 8 * 2**20
MAX_TIMESTAMP_BYTES = 200
SOURCES = ("timestamp.txt", "zip", "canvas-name", "none")


def parse_timestamp(text: str) -> dt.datetime | None:
    """An instant from nbgrader's ``timestamp.txt``, read as nbgrader reads it (no zone: UTC); None if unreadable."""
    from dateutil import parser, tz  # nbgrader's own parser

    parts = text.strip().split(" ")
    try:
        if len(parts) == 3:
            zone = parts[2]
            if zone.lstrip("+-").isdigit() and len(zone.lstrip("+-")) == 4:  # +0100
                sign = -1 if zone.startswith("-") else 1
                zone = dt.timezone(sign * dt.timedelta(hours=int(zone[-4:-2]), minutes=int(zone[-2:])))
            else:
                zone = tz.gettz(zone)
                if zone is None:
                    return None
            when = parser.parse(" ".join(parts[:2])).replace(tzinfo=zone)
        else:
            when = parser.parse(text.strip())
    except (ValueError, OverflowError):
        return None
    return when.replace(tzinfo=dt.timezone.utc) if when.tzinfo is None else when.astimezone(dt.timezone.utc)


def read_timestamp(folder: Path) -> dt.datetime | None:
    path = folder / "timestamp.txt"
    if path.is_symlink() or not path.is_file():
        return None
    try:
        with path.open("rb") as file:
            return parse_timestamp(file.read(MAX_TIMESTAMP_BYTES).decode("utf-8", errors="replace"))
    except OSError:
        return None


def lms_records(course_folder: Path, assignment: str) -> dict:
    """student id -> what the course's collector kept (``lms.json``), each record checked; {} if none."""
    path = course_folder / "downloaded" / assignment / "lms.json"
    try:
        if path.is_symlink() or path.stat().st_size > MAX_SIDECAR_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {student: record for student, record in data.items() if type(record) is dict} \
        if type(data) is dict else {}


def sources(entry, assignment: str, cache: dict) -> tuple[dt.datetime | None, str, dict]:
    """(the submission's time, where it came from, its LMS record) for one grading entry."""
    folder = entry.path.parent
    in_course = folder.name == assignment and folder.parent.parent.name == "submitted"
    if not in_course:
        return None, "none", {}
    course_folder = folder.parent.parent.parent
    if course_folder not in cache:
        cache[course_folder] = lms_records(course_folder, assignment)
    record = cache[course_folder].get(folder.parent.name, {})
    when = read_timestamp(folder)
    if when is None:
        return None, "none", record
    files = record.get("files") if type(record.get("files")) is list else []
    zipped = any(type(f) is dict and _instant(f.get("submitted_at")) == when for f in files)
    return when, "zip" if zipped else "timestamp.txt", record


def _instant(text) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(text) if type(text) is str else None
    except ValueError:
        return None
    return when.astimezone(dt.timezone.utc) if when is not None and when.tzinfo is not None else None


def maximum(assignment: str, automatic_max: float) -> float:
    """The assignment's maximum: its automatic points and the points graded by hand (nbgrader's maximum)."""
    return automatic_max + sum(lms.manual_cells(assignment).values())


def late_of(assignment: str, score: float, automatic_max: float, when: dt.datetime | None, source: str,
            canvas_late: bool, settings: course_module.Course) -> dict | None:
    """``extra_data.late`` of one submission, or None when the course sets no due date and Canvas saw nothing."""
    due = settings.due.get(assignment)
    policy = settings.lateness
    if due is None and not canvas_late:
        return None
    late = {"submitted_at": when.isoformat() if when else None, "source": source if when else "none",
            "due": due.isoformat() if due else None, "seconds_late": 0.0, "penalty": 0.0,
            "policy": policy.describe(), "flagged": False}
    if when is not None and due is not None:
        seconds = max(0.0, (when - due).total_seconds())
        percent = policy.percent(seconds)
        late["seconds_late"] = round(seconds, 1)
        late["flagged"] = policy.late(seconds)
        late["penalty"] = round(min(max(score, 0.0), percent / 100 * maximum(assignment, automatic_max)), 4)
        late["percent"] = percent
    elif canvas_late:
        late.update(source="canvas-name", flagged=True,
                    note="Canvas marked this submission late, but the download gives no time for it: "
                         "no penalty was computed" + ("" if due else " (the course sets no due date)"))
    else:
        late["note"] = "no submission time is known (no timestamp.txt): not checked for lateness"
    return late


def apply(assignment: str, entries: list, results: Path, settings: course_module.Course) -> None:
    """Write each entry's lateness and LMS ids into its result (and feedback) when they changed."""
    cache: dict = {}
    for entry in entries:
        path = results / f"{entry.student_id}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            extra = data["extra_data"]
            score, automatic_max = float(data["score"]), float(extra["max_score"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        when, source, record = sources(entry, assignment, cache)
        late = late_of(assignment, score, automatic_max, when, source, record.get("late_mark") is True, settings)
        user = record.get("canvas_user_id")
        lms_ids = {"canvas_user_id": user} if type(user) is str and user.isdigit() and len(user) <= 20 else None
        before = (extra.get("late"), extra.get("lms"))
        for key, value in (("late", late), ("lms", lms_ids)):
            if value is None:
                extra.pop(key, None)
            else:
                extra[key] = value
        if (extra.get("late"), extra.get("lms")) != before:
            report.save(results, data)


def refresh(assignment: str, results: Path, student_id: str) -> None:
    """The penalty again after ``release`` raised the score it is capped at (the policy's share is kept)."""
    path = results / f"{student_id}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        late, score, top = data["extra_data"]["late"], float(data["score"]), float(data["extra_data"]["max_score"])
        percent = late["percent"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if type(percent) not in (int, float) or not math.isfinite(percent):
        return
    penalty = round(min(max(score, 0.0), percent / 100 * maximum(assignment, top)), 4)
    if penalty != late.get("penalty"):
        late["penalty"] = penalty
        report.save(results, data, durable=True)
