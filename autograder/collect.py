"""``nbgrader zip_collect`` plugins that keep what an LMS's download says about each submission.

nbgrader's own extractor unzips the LMS's download and drops each file's time; its collector reads a
student id out of the file name and drops the rest. These two keep both (``nbgrader_config.py``
names them):

- ``ZipTimesExtractor`` unzips as nbgrader does, then gives every extracted file its time in the zip
  (the Info-ZIP extended timestamp when the zip has one, which is UTC; otherwise the entry's plain
  date and time, read in ``[lateness] timezone`` of ``course.toml``) and lists the times in
  ``downloaded/<assignment>/zip_times.json``.
- ``LmsCollector`` reads Canvas's and Moodle's file names, hands nbgrader the student id, the file
  and the file's time (so that ``zip_collect`` writes ``submitted/<student>/<assignment>/timestamp.txt``,
  and keeps the newer of two files with one name), and writes what nbgrader has no place for to
  ``downloaded/<assignment>/lms.json``: per student, the Canvas user id, whether Canvas marked the
  submission ``LATE``, and each file's time. ``python -m autograder grade`` reads it back.

Canvas: ``<student>_<LATE_>?<user id>_<submission id>_<uploaded name>``, with ``-1``, ``-2``... before
``.ipynb`` for a resubmission. Moodle: ``<Full Name>_<participant id>_assignsubmission_file_<uploaded
name>`` (in a folder of that name, ending in ``_``, when downloaded "in folders"); the student id is the
full name, lower case, letters and digits only ("Ada Lovelace" -> ``adalovelace``). Any other name goes
to nbgrader's own ``FileNameCollectorPlugin.named_regexp``, when one is set.

Two students can share a name (Canvas's first part is the sortable name, Moodle's the full name): where
one name comes with two different LMS ids in the download, each of those students is filed under the name
and their id (``smithjo_201``, ``smithjo_202``), never under one folder where one's work would replace or
outrank the other's; ``zip_collect`` says so in its log.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import zipfile
from pathlib import Path

from nbgrader.plugins import ExtractorPlugin, FileNameCollectorPlugin

from autograder import course

TIMES_FILE = "zip_times.json"
LMS_FILE = "lms.json"
CANVAS = re.compile(r"(?P<student_id>[A-Za-z0-9]+)_(?P<late>LATE_)?(?P<user_id>[0-9]+)_(?P<submission_id>[0-9]+)_"
                    r"(?P<file_id>[^/]+?)(?:-[0-9]+)?(?P<ext>\.[A-Za-z0-9]+)$")
MOODLE = re.compile(r"(?P<name>[^/_]+)_(?P<participant_id>[0-9]+)_assignsubmission_(?:file|onlinetext)_/?"
                    r"(?P<file_id>[^/]+?)(?P<ext>\.[A-Za-z0-9]+)$")
EXTENDED_TIMESTAMP = 0x5455  # Info-ZIP's "UT" extra field: modification time in seconds since the epoch, UTC


def zip_time(info: zipfile.ZipInfo, zone: dt.tzinfo) -> dt.datetime:
    """When a zip entry was last modified, as an aware datetime."""
    extra, at = info.extra, 0
    while at + 4 <= len(extra):
        kind, size = int.from_bytes(extra[at:at + 2], "little"), int.from_bytes(extra[at + 2:at + 4], "little")
        data = extra[at + 4:at + 4 + size]
        if kind == EXTENDED_TIMESTAMP and len(data) >= 5 and data[0] & 1:
            return dt.datetime.fromtimestamp(int.from_bytes(data[1:5], "little", signed=True), dt.timezone.utc)
        at += 4 + size
    return dt.datetime(*info.date_time, tzinfo=zone)


def read_name(relative: str) -> tuple[str, str, str, dict] | None:
    """(student id, the LMS's id of that student, the file's name, what lms.json keeps) from a download's file
    name (its path below the extracted folder), or None when it is neither Canvas's nor Moodle's."""
    tail = "/".join(relative.split("/")[-2:])
    canvas, moodle = CANVAS.search(Path(relative).name), MOODLE.search(tail)
    if canvas:
        return (canvas["student_id"], canvas["user_id"], canvas["file_id"] + canvas["ext"],
                {"lms": "canvas", "canvas_user_id": canvas["user_id"], "late_mark": bool(canvas["late"])})
    if moodle:
        student = "".join(ch for ch in moodle["name"].lower() if ch.isalnum()) or moodle["participant_id"]
        return (student, moodle["participant_id"], moodle["file_id"] + moodle["ext"],
                {"lms": "moodle", "moodle_participant_id": moodle["participant_id"]})
    return None


def course_of(plugin) -> course.Course:
    """The course settings of the zip_collect run (``course.toml`` in its course folder); a bad file ends it."""
    root = getattr(getattr(plugin.parent, "coursedir", None), "root", None) or os.getcwd()
    try:
        return course.load(Path(root))
    except course.CourseError as problem:
        plugin.parent.fail(str(problem))


class ZipTimesExtractor(ExtractorPlugin):
    """nbgrader's extractor, plus each extracted file's time in the zip (its mtime and ``zip_times.json``)."""

    def extract(self, archive_path: str, extracted_path: str) -> None:
        super().extract(archive_path, extracted_path)
        zone = course_of(self).lateness.zone
        times = {}
        for root, _, names in os.walk(archive_path):
            for name in sorted(names):
                if not name.endswith(".zip"):
                    continue
                # where nbgrader's extract put this zip's files: a folder named after it, as deep as the zip is
                folder = Path(extracted_path) / Path(root).relative_to(archive_path) / name[:-len(".zip")]
                try:
                    with zipfile.ZipFile(Path(root) / name) as archive:
                        infos = archive.infolist()
                except (OSError, zipfile.BadZipFile) as error:
                    self.log.warning("Cannot read the times in %s (%s)", name, error)
                    continue
                inside = Path(extracted_path).resolve()
                for info in infos:
                    target = folder / info.filename
                    if info.is_dir() or not target.is_file() or target.is_symlink() \
                            or not target.resolve().is_relative_to(inside):  # "../" in a name: not ours to touch
                        continue
                    when = zip_time(info, zone)
                    os.utime(target, (when.timestamp(), when.timestamp()))
                    times[target.resolve().relative_to(inside).as_posix()] = when.isoformat()
        (Path(extracted_path).parent / TIMES_FILE).write_text(json.dumps(times, indent=1, sort_keys=True))
        self.log.info("Kept the time of %d files from the zips: %s", len(times),
                      Path(extracted_path).parent / TIMES_FILE)


class LmsCollector(FileNameCollectorPlugin):
    """Canvas's and Moodle's file names read, each file's zip time handed to nbgrader, the rest in ``lms.json``."""

    def collect(self, submitted_file: str):
        if not hasattr(self, "_students"):
            self._students: dict[str, dict] = {}
        if os.path.splitext(submitted_file)[1] not in self.valid_ext:
            return None
        extracted = Path(self.parent._format_collect_path(self.parent.extracted_directory))
        try:
            relative = Path(submitted_file).relative_to(extracted).as_posix()
        except ValueError:
            relative = Path(submitted_file).name
        found = read_name(relative)
        if found is None:
            return super().collect(submitted_file) if self.named_regexp else self._unknown(relative)
        student, lms_id, file_id, record = found
        if student in self._namesakes(extracted):
            student = f"{student}_{lms_id}"
        info = {"student_id": student, "file_id": file_id}
        when = self._time(extracted.parent, relative)
        if when:
            info["timestamp"] = when
        entry = self._students.setdefault(info["student_id"], {**record, "files": []})
        entry["late_mark"] = entry.get("late_mark", False) or record.get("late_mark", False)
        entry["files"].append({"name": relative, "file_id": info["file_id"], "submitted_at": when})
        self._write(extracted.parent / LMS_FILE)
        return info

    def _namesakes(self, extracted: Path) -> set[str]:
        """The student ids that the download gives to more than one LMS id (two students of one name)."""
        if not hasattr(self, "_shared"):
            ids: dict[str, set[str]] = {}
            for path in extracted.rglob("*"):
                found = read_name(path.relative_to(extracted).as_posix()) if path.is_file() else None
                if found is not None:
                    ids.setdefault(found[0], set()).add(found[1])
            self._shared = {student for student, lms_ids in ids.items() if len(lms_ids) > 1}
            for student in sorted(self._shared):
                self.log.warning("%d students are named %s in the download: each is filed as %s_<their LMS id>",
                                 len(ids[student]), student, student)
        return self._shared

    def _unknown(self, relative: str) -> None:
        self.log.warning("Skipped %s: not a Canvas name (<student>_<user id>_<submission id>_<file>) nor a Moodle "
                         "one (<Full Name>_<id>_assignsubmission_file_<file>); for another LMS, set "
                         "c.FileNameCollectorPlugin.named_regexp in nbgrader_config.py", relative)
        return None

    def _time(self, folder: Path, relative: str) -> str | None:
        if not hasattr(self, "_times"):
            try:
                self._times = json.loads((folder / TIMES_FILE).read_text())
            except (OSError, ValueError):
                self._times = {}
        when = self._times.get(relative) if type(self._times) is dict else None
        return when if type(when) is str else None

    def _write(self, path: Path) -> None:
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(json.dumps(self._students, indent=1, sort_keys=True))
        os.replace(temporary, path)
