"""The course's own settings: each assignment's due date and the late-submission policy, from ``course.toml``.

    course.load(root) -> Course

``root`` is the course folder (where ``course.toml`` and ``nbgrader_config.py`` are). A course without
the file, or without a ``[due]`` date for an assignment, has no lateness for it: nothing is flagged and
nothing is taken off. Every value is checked when the file is read; anything the grader would have to
guess at (an unknown key, a date without a UTC offset, an unknown time zone, a negative penalty) raises
``CourseError`` naming the key, the value and the fix, and nothing is graded with half a policy.

The penalty is a percentage of the assignment's maximum (automatic plus hand-graded points) per started
hour or day after the grace period, at most ``cap`` percent, and never more than the points the
submission earned. Standard library only: the grading command reads it before anything heavy is imported.
"""

from __future__ import annotations

import datetime as dt
import math
import tomllib
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path

FILE = "course.toml"
POLICIES = {"none": None, "per_hour": 3600, "per_day": 86400}
SUITES = Path(__file__).resolve().parent / "suites"
LATENESS_KEYS = ("policy", "penalty", "cap", "grace_minutes", "timezone")


class CourseError(Exception):
    """``course.toml`` holds something the grader will not guess at: the message names the key and the fix."""


@dataclass(frozen=True)
class Lateness:
    policy: str = "none"
    penalty: float = 0.0  # percent of the maximum per started period
    cap: float = 100.0  # percent of the maximum, at most
    grace_minutes: float = 0.0
    timezone: str = "UTC"  # for zip times that carry no UTC offset

    @property
    def zone(self) -> dt.tzinfo:
        return zoneinfo.ZoneInfo(self.timezone)

    def describe(self) -> str:
        """The policy in one line, as a learner reads it."""
        grace = f" after a grace period of {self.grace_minutes:g} minutes" if self.grace_minutes else ""
        if self.policy == "none":
            return "late submissions are flagged but lose no points"
        unit = "hour" if self.policy == "per_hour" else "day"
        return (f"{self.penalty:g} % of the maximum per started {unit} late{grace}, at most {self.cap:g} %")

    def percent(self, seconds_late: float) -> float:
        """The share of the maximum taken off for a submission ``seconds_late`` after the due date."""
        period = POLICIES[self.policy]
        after_grace = seconds_late - self.grace_minutes * 60
        if period is None or after_grace <= 0:
            return 0.0
        return min(self.cap, math.ceil(after_grace / period) * self.penalty)

    def late(self, seconds_late: float) -> bool:
        """Late at all: past the due date and past the grace period."""
        return seconds_late > self.grace_minutes * 60


@dataclass(frozen=True)
class Course:
    due: dict[str, dt.datetime] = field(default_factory=dict)  # assignment -> due date, with a UTC offset
    lateness: Lateness = Lateness()
    path: Path | None = None  # the file read, or None when the course has none


def assignments() -> list[str]:
    return sorted(p.name for p in SUITES.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def load(root: Path) -> Course:
    """The settings in ``root/course.toml``; the defaults (no due dates, policy "none") if there is no such file."""
    path = Path(root) / FILE
    if not path.is_file():
        return Course()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise CourseError(f"{path} cannot be read ({error}): fix its permissions or save it as UTF-8") from None
    except tomllib.TOMLDecodeError as error:
        raise CourseError(f"{path} is not valid TOML ({error}): fix that line") from None
    unknown = sorted(set(data) - {"due", "lateness"})
    if unknown:
        raise CourseError(f"{path}: unknown section or key {unknown[0]!r}; the file has only [due] and [lateness]")
    due = _due(path, data.get("due", {}))
    return Course(due, _lateness(path, data.get("lateness", {})), path)


def _due(path: Path, table) -> dict[str, dt.datetime]:
    if type(table) is not dict:
        raise CourseError(f"{path}: due must be a section, [due], with one line per assignment")
    known = assignments()
    due = {}
    for assignment, value in table.items():
        where = f"{path}: [due] {assignment} = {value!r}"
        if assignment not in known:
            raise CourseError(f"{where}: unknown assignment; the assignments are {', '.join(known)}")
        if type(value) is str:
            try:
                value = dt.datetime.fromisoformat(value)
            except ValueError:
                raise CourseError(f"{where} is not a date and time: write it as 2026-11-20T23:59:00+01:00") from None
        if type(value) is dt.date:
            raise CourseError(f"{where} has no time of day: write the time and the UTC offset too, "
                              f"e.g. {value.isoformat()}T23:59:00+01:00")
        if type(value) is not dt.datetime:
            raise CourseError(f"{where} is not a date and time: write it as 2026-11-20T23:59:00+01:00")
        if value.tzinfo is None or value.utcoffset() is None:
            raise CourseError(f"{where} has no UTC offset, so the instant is ambiguous: add one, e.g. "
                              f"{value.isoformat()}+01:00 (or Z for UTC)")
        due[assignment] = value
    return due


def _lateness(path: Path, table) -> Lateness:
    if type(table) is not dict:
        raise CourseError(f"{path}: lateness must be a section, [lateness]")
    unknown = sorted(set(table) - set(LATENESS_KEYS))
    if unknown:
        raise CourseError(f"{path}: [lateness] has an unknown key {unknown[0]!r}; the keys are "
                          f"{', '.join(LATENESS_KEYS)}")
    values = {}
    policy = table.get("policy", "none")
    if policy not in POLICIES:
        raise CourseError(f"{path}: [lateness] policy = {policy!r} is not a policy: write \"none\", \"per_hour\" or "
                          "\"per_day\"")
    values["policy"] = policy
    for key, low, high, unit in (("penalty", 0, 100, "percent"), ("cap", 0, 100, "percent"),
                                 ("grace_minutes", 0, None, "minutes")):
        if key not in table:
            continue
        value = table[key]
        where = f"{path}: [lateness] {key} = {value!r}"
        if type(value) not in (int, float) or not math.isfinite(value):
            raise CourseError(f"{where} is not a number: write the {unit} as a number, e.g. {key} = 10")
        if value < low:
            raise CourseError(f"{where} is negative: write 0 or more {unit}")
        if high is not None and value > high:
            raise CourseError(f"{where} is over {high}: write a percentage from 0 to 100")
        values[key] = float(value)
    if "timezone" in table:
        name = table["timezone"]
        where = f"{path}: [lateness] timezone = {name!r}"
        if type(name) is not str or not name:
            raise CourseError(f"{where} is not a time zone name: write an IANA name such as \"Europe/Berlin\"")
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise CourseError(f"{where} is not a time zone this machine knows: write an IANA name such as "
                              "\"Europe/Berlin\" or \"America/New_York\"") from None
        values["timezone"] = name
    return Lateness(**values)
