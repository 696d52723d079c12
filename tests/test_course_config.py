"""``course.toml``: every value the grader would have to guess at is an error that names it, and the penalty
arithmetic of each policy (no grading here: ``grade`` stops before it grades anything)."""

import json

import pytest

from autograder import cli, course

EX2 = "ex2_layernorm"
DUE = "[due]\nex2_layernorm = 2026-11-20T23:59:00+01:00\n"

BAD = {
    # name -> (course.toml, words the error must contain: the key, the value, the fix)
    "an unknown section": ("[deadlines]\nex2_layernorm = 2026-11-20T23:59:00Z\n", ["'deadlines'", "[due]"]),
    "an unknown lateness key": ("[lateness]\npenalty_percent = 10\n", ["'penalty_percent'", "penalty, cap"]),
    "an unknown assignment": ("[due]\nex9_nothing = 2026-11-20T23:59:00Z\n", ["ex9_nothing", "ex2_layernorm"]),
    "a date without an offset": ("[due]\nex2_layernorm = 2026-11-20T23:59:00\n",
                                 ["ex2_layernorm", "2026-11-20", "no UTC offset", "+01:00"]),
    "a date without a time": ("[due]\nex2_layernorm = 2026-11-20\n", ["ex2_layernorm", "no time of day"]),
    "a date that is not one": ('[due]\nex2_layernorm = "next Friday"\n', ["'next Friday'", "2026-11-20T23:59:00"]),
    "an unknown time zone": ('[lateness]\ntimezone = "Mars/Olympus"\n', ["timezone", "'Mars/Olympus'",
                                                                        "Europe/Berlin"]),
    "an unknown policy": ('[lateness]\npolicy = "per_week"\n', ["policy", "'per_week'", '"per_day"']),
    "a negative penalty": ("[lateness]\npenalty = -5\n", ["penalty", "-5", "negative"]),
    "a cap over 100": ("[lateness]\ncap = 150\n", ["cap", "150", "from 0 to 100"]),
    "a penalty that is text": ('[lateness]\npenalty = "10%"\n', ["penalty", "'10%'", "not a number"]),
    "a negative grace": ("[lateness]\ngrace_minutes = -1\n", ["grace_minutes", "-1", "negative"]),
    "not TOML": ("[due\n", ["not valid TOML"]),
}


@pytest.fixture
def course_folder(tmp_path, monkeypatch):
    """An empty course folder, the current directory (where ``grade`` reads course.toml), with one notebook."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ada.ipynb").write_text(json.dumps({"cells": [], "nbformat": 4, "nbformat_minor": 5, "metadata": {}}))
    return tmp_path


@pytest.mark.parametrize("case", BAD)
def test_a_malformed_course_toml_stops_grade_with_an_error_naming_the_key_and_the_fix(course_folder, capsys, case):
    text, words = BAD[case]
    (course_folder / "course.toml").write_text(text)
    assert cli.main(["grade", EX2, "ada.ipynb", "--jobs", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and "course.toml" in err
    assert all(word in err for word in words), err
    assert not (course_folder / "results").exists()  # nothing graded with half a policy


def test_no_course_toml_means_no_due_dates_and_no_penalty(tmp_path):
    settings = course.load(tmp_path)
    assert settings.due == {} and settings.lateness.policy == "none" and settings.lateness.percent(10 ** 7) == 0


def test_the_shipped_course_toml_sets_no_due_date_and_policy_none(repo):
    settings = course.load(repo)
    assert settings.path is not None and settings.due == {} and settings.lateness == course.Lateness()


def test_a_due_date_keeps_its_offset(tmp_path):
    (tmp_path / "course.toml").write_text(DUE)
    assert course.load(tmp_path).due[EX2].isoformat() == "2026-11-20T23:59:00+01:00"


@pytest.mark.parametrize("policy, hours_late, percent", [
    ("per_day", 25, 20),  # two started days
    ("per_day", 24, 10),  # exactly one day
    ("per_day", 0.1, 10),  # a started day
    ("per_day", 24 * 9, 30),  # capped
    ("per_hour", 2.5, 30),  # three started hours, capped at 30
    ("per_hour", 0.5, 10),
    ("none", 100, 0),
])
def test_the_penalty_is_the_percentage_per_started_period_up_to_the_cap(policy, hours_late, percent):
    policy = course.Lateness(policy=policy, penalty=10, cap=30)
    assert policy.percent(hours_late * 3600) == percent


def test_the_grace_period_costs_nothing_and_the_periods_start_after_it():
    policy = course.Lateness(policy="per_hour", penalty=10, cap=100, grace_minutes=15)
    assert (policy.percent(14 * 60), policy.late(14 * 60)) == (0, False)
    assert (policy.percent(16 * 60), policy.late(16 * 60)) == (10, True)
    assert policy.percent(75 * 60) == 10 and policy.percent(76 * 60) == 20  # an hour after the grace: one period
