"""``python -m autograder handback`` writes what an instructor returns to each learner, and keeps it current.

The results are written by the grader's own writer (``report.save``): a real wrong ex2 notebook
graded in this process, and chosen scores (``scored`` of ``tests/test_held_results.py``,
``save`` of ``tests/test_lms_export.py``). The gradebook is nbgrader's, in a course folder in
tmp_path, recorded as ``grade --gradebook`` records it; a manual grade and a comment are typed
into it as the formgrader saves them. Each command is run as the instructor runs it
(``cli.main``) and the pages are read back as a browser would parse them.
"""

import csv
import json
import shutil
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from nbgrader.api import Gradebook

from autograder import cli, gradebook, report
from tests.grading import REPO, grade_in_process, reference, with_cell
from tests.mistakes import MISTAKES
from tests.test_held_results import HELD, gradebook_of, held_result, nbgrader, scored
from tests.test_lms_export import save

EX2, EX3 = "ex2_layernorm", "ex3_batchnorm"
SCRIPT = "<script>alert('owned')</script><img src=x onerror=alert(1)>"


# --- fixtures: a course folder with a gradebook, results in it ---------------------------------------------------


@pytest.fixture(scope="module")
def released_gradebook(tmp_path_factory) -> Path:
    """A gradebook that knows the releases of ex2 and ex3 (made once: a new gradebook runs nbgrader's migrations)."""
    return gradebook_of(tmp_path_factory.mktemp("gradebook"), EX2, EX3)


@pytest.fixture
def course(tmp_path, released_gradebook) -> Path:
    """A course folder: the gradebook and an empty results/ (results are saved by each test)."""
    shutil.copy(released_gradebook, tmp_path / "gradebook.db")
    (tmp_path / "results").mkdir()
    return tmp_path


def url_of(course: Path) -> str:
    return f"sqlite:///{course / 'gradebook.db'}"


def record(course: Path, assignment: str, *students: str) -> None:
    """What `grade --gradebook` does once the results exist: record them, and remember the gradebook."""
    with Gradebook(url_of(course)) as opened:
        gradebook.record(opened, assignment, course / "results" / assignment, list(students))
    report.remember_gradebook(course / "results" / assignment, url_of(course))


def type_grade(course: Path, student: str, points: float | None, comment: str | None = None,
               cell: str = "written_answer", assignment: str = EX3) -> None:
    """A score (and a comment) typed into the formgrader's boxes for one cell."""
    with Gradebook(url_of(course)) as opened:
        grade = opened.find_grade(cell, assignment, assignment, student)
        grade.manual_score, grade.needs_manual_grade = points, points is None
        if comment is not None:
            opened.find_comment(cell, assignment, assignment, student).manual_comment = comment
        opened.db.commit()


def handback(course: Path, assignment: str, *args: str) -> int:
    return cli.main(["handback", assignment, "--results", str(course / "results" / assignment), *args])


def page(course: Path, assignment: str, student: str, ext: str = "html") -> str:
    return (course / "results" / assignment / "handback" / f"{student}.{ext}").read_text(encoding="utf-8")


def text_of(html: str) -> str:
    """The page's text as a reader sees it (tags gone, entities decoded, whitespace collapsed)."""
    parser = Tags()
    parser.feed(html)
    return " ".join(parser.text.split())


class Tags(HTMLParser):
    """Every element and attribute name of a page, and the text of its body."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.attributes, self.text, self.open = [], [], "", []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]
        self.open.append(tag)

    def handle_endtag(self, tag):
        if tag in self.open:
            del self.open[self.open.index(tag):]

    def handle_data(self, data):
        if "body" in self.open:
            self.text += data


def exported(course: Path, assignment: str, student: str, *args: str) -> str:
    """The student's cell of the Moodle CSV that `export` writes."""
    out = course / "lms.csv"
    assert cli.main(["export", assignment, "--format", "moodle", "-o", str(out), "--results",
                     str(course / "results"), *args]) == 0
    return {row[0]: row[1] for row in csv.reader(out.open())}[student]


# --- ex2: every lost point has its reason -------------------------------------------------------------------


@pytest.fixture(scope="module")
def wrong_ex2() -> dict:
    """A real wrong ex2 notebook (the unbiased variance), graded in this process: its result."""
    mistake = next(m for m in MISTAKES if m.assignment == EX2 and m.what == "unbiased-variance")
    parts = grade_in_process(EX2, with_cell(EX2, mistake.task, mistake.source))
    return report.result(EX2, "ada", "digest", "ok", parts, [], 1.0, "namespaces")


def failed_tests(data: dict) -> list[dict]:
    return [test for test in data["tests"] if test["status"] != "passed"]


def test_a_wrong_submission_shows_each_failed_test_with_its_message_and_lost_points(course, wrong_ex2):
    report.save(course / "results" / EX2, wrong_ex2)
    assert handback(course, EX2) == 0
    shown = text_of(page(course, EX2, "ada"))
    assert failed_tests(wrong_ex2)
    for test in failed_tests(wrong_ex2):
        name = test["name"].split(" > ", 1)[1]
        message = test["output"].splitlines()[0]
        assert f"{name} (0 / {test['max_score']:g}): {message}" in shown


def test_the_total_of_a_wrong_submission_is_the_exports_and_says_no_points_are_graded_by_hand(course, wrong_ex2):
    report.save(course / "results" / EX2, wrong_ex2)
    handback(course, EX2)
    assert f"Total: {exported(course, EX2, 'ada')} / 10" in text_of(page(course, EX2, "ada"))
    assert "graded by hand" not in text_of(page(course, EX2, "ada"))


def test_a_failed_task_shows_the_one_hint_its_result_carries(course):
    data = report.result(EX2, "ada", "digest", "ok", scored(held=(), failed=("LayerNorm.stores_eps_as_an_attribute",
                                                                             "LayerNorm.forward_uses_the_eps_it_was_"
                                                                             "built_with")), [], 1.0, "namespaces")
    report.save(course / "results" / EX2, data)
    handback(course, EX2)
    hints = [line for test in data["tests"] for line in test["output"].splitlines() if line.startswith("What to check")]
    assert len(hints) == 1
    assert text_of(page(course, EX2, "ada")).count("What to check: ") == 1
    assert " ".join(hints[0].split()) in text_of(page(course, EX2, "ada"))


# --- ex3: the written answer, graded by hand ------------------------------------------------------------------


@pytest.fixture
def ex3_class(course) -> Path:
    """ada's and ben's ex3 (7 / 7 and 3.5 / 7 automatic) recorded; ada's written answer got 2.5 and a comment."""
    save(course / "results", EX3, "ada", 1.0)
    save(course / "results", EX3, "ben", 0.5)
    record(course, EX3, "ada", "ben")
    type_grade(course, "ada", 2.5, "Good intuition; say why the batch statistics differ at test time.")
    return course


def test_a_manual_score_and_the_graders_comment_are_shown_and_the_total_is_the_exports(ex3_class):
    handback(ex3_class, EX3)  # the gradebook that grading remembered
    shown = text_of(page(ex3_class, EX3, "ada"))
    assert "Graded by hand, the written answer written_answer: 2.5 / 3" in shown
    assert "say why the batch statistics differ at test time." in shown
    total = exported(ex3_class, EX3, "ada", "--gradebook", url_of(ex3_class))
    assert total == "9.5" and "Total: 9.5 / 10" in shown and "provisional" not in shown


def test_a_written_answer_not_graded_yet_says_so_and_the_total_is_provisional(ex3_class):
    handback(ex3_class, EX3)
    shown = text_of(page(ex3_class, EX3, "ben"))
    assert "the written answer written_answer: not graded yet (out of 3)" in shown
    assert "Total so far: 3.5 / 10 (provisional, no grade yet: a part is not graded by hand yet)" in shown
    assert exported(ex3_class, EX3, "ben", "--gradebook", url_of(ex3_class)) == "-"  # the export has no grade


def test_without_a_gradebook_the_total_is_the_exports_and_the_manual_points_are_named_missing(course):
    save(course / "results", EX3, "ada", 1.0)
    handback(course, EX3)
    shown = text_of(page(course, EX3, "ada"))
    assert f"Total: {exported(course, EX3, 'ada')} / 7 (automatic points only: the points graded by hand are " \
           "missing)" in shown
    assert "missing from this total (written_answer: 3 points)" in shown


def test_the_learners_feedback_file_no_longer_claims_a_full_score_where_a_person_grades_a_part(course):
    save(course / "results", EX3, "ada", 1.0)
    save(course / "results", EX2, "ada", 1.0)
    ex3 = (course / "results" / EX3 / "feedback" / "ada.md").read_text()
    assert "**Automatic points: 7 / 7** (graded); the written answer (3 points) is graded by your instructor: see " \
           "your hand-back" in ex3 and "Score: 7 / 7" not in ex3
    assert "**Score: 10 / 10** (graded)" in (course / "results" / EX2 / "feedback" / "ada.md").read_text()


# --- held for review, then released ---------------------------------------------------------------------------


@pytest.fixture
def held(course) -> Path:
    """ada's ex2 with LayerNorm held (measured 2 / 2), recorded in the gradebook, hand-backs written."""
    report.save(course / "results" / EX2, held_result())
    record(course, EX2, "ada")
    handback(course, EX2)
    return course


def test_a_held_task_shows_what_its_tests_measured_and_that_it_waits_for_the_instructor(held):
    shown = text_of(page(held, EX2, "ada"))
    assert "Held for your instructor's review: its tests measured 2 / 2. These points wait for your instructor" \
           in shown
    assert "Total so far: 8 / 10 (provisional, no grade yet: a task is held for your instructor's review)" in shown
    assert "Automatic points: 8 / 8 Held for review, Task 2: LayerNorm: waits for your instructor (out of 2)" in shown


def test_release_rewrites_the_hand_back_with_the_released_score_and_says_so(held, capsys):
    capsys.readouterr()
    assert cli.main(["release", EX2, "ada", "--results", str(held / "results" / EX2)]) == 0
    assert f"wrote 1 hand-back in {held / 'results' / EX2 / 'handback'}/" in capsys.readouterr().out
    shown = text_of(page(held, EX2, "ada"))
    assert "Total: 10 / 10" in shown and "released after your instructor's review" in shown
    assert "held for your instructor's review: its tests" not in shown.lower()


def test_a_score_typed_for_a_held_task_is_shown_as_the_instructors(held):
    type_grade(held, "ada", 1.0, cell=f"check_{HELD}", assignment=EX2)
    handback(held, EX2)
    shown = text_of(page(held, EX2, "ada"))
    assert "Scored by your instructor: 1 / 2" in shown
    assert "Automatic points: 8 / 8 Scored by your instructor, Task 2: LayerNorm: 1 / 2" in shown
    assert exported(held, EX2, "ada", "--gradebook", url_of(held)) == "9" and "Total: 9 / 10" in shown


# --- written again only when an input changed; nbgrader's own feedback ----------------------------------------


def nbgrader_page(course: Path, student: str) -> Path:
    """A feedback page as `nbgrader generate_feedback` leaves it, written now."""
    target = course / "feedback" / student / EX3 / f"{EX3}.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"<h4>{EX3} (Score: as of now)</h4>")
    return target


def test_a_hand_back_whose_inputs_did_not_change_is_not_written_again(ex3_class, capsys):
    handback(ex3_class, EX3)
    before = {p.name: p.stat().st_mtime_ns for p in (ex3_class / "results" / EX3 / "handback").glob("*.??*")}
    capsys.readouterr()
    assert handback(ex3_class, EX3) == 0
    out = capsys.readouterr().out
    assert "wrote 0 hand-backs in" in out and "(2 unchanged)" in out
    assert {p.name: p.stat().st_mtime_ns for p in (ex3_class / "results" / EX3 / "handback").glob("*.??*")} == before


def test_export_after_a_changed_manual_score_rewrites_that_hand_back_only_and_removes_the_stale_page(ex3_class,
                                                                                                   capsys):
    handback(ex3_class, EX3)
    pages = {student: nbgrader_page(ex3_class, student) for student in ("ada", "ben")}  # generate_feedback
    handback(ex3_class, EX3)  # sees both pages, newer than every change
    ben = page(ex3_class, EX3, "ben")
    type_grade(ex3_class, "ada", 1.5)  # in the formgrader, after the feedback was generated
    capsys.readouterr()
    exported(ex3_class, EX3, "ada", "--gradebook", url_of(ex3_class))
    out = capsys.readouterr().out
    assert "wrote 1 hand-back in" in out and "(1 unchanged)" in out
    assert "Graded by hand, the written answer written_answer: 1.5 / 3" in text_of(page(ex3_class, EX3, "ada"))
    assert page(ex3_class, EX3, "ben") == ben
    assert not pages["ada"].exists() and pages["ben"].exists()
    assert f"removed nbgrader's feedback of ada (it showed other scores): `nbgrader generate_feedback {EX3}`" in out


def test_a_page_generated_before_a_manual_score_and_never_seen_is_removed(ex3_class):
    handback(ex3_class, EX3)
    stale = nbgrader_page(ex3_class, "ada")
    time.sleep(0.01)
    type_grade(ex3_class, "ada", 1.5)
    handback(ex3_class, EX3)
    assert not stale.exists()


def test_a_page_generated_after_the_last_change_is_kept(ex3_class):
    handback(ex3_class, EX3)
    time.sleep(0.01)
    kept = nbgrader_page(ex3_class, "ada")
    handback(ex3_class, EX3)
    assert kept.exists()


@pytest.mark.slow
@pytest.mark.nbgrader
def test_after_a_manual_score_changes_nbgrader_hands_back_the_new_score_never_the_stale_page(ex3_class):
    shutil.copy(REPO / "nbgrader_config.py", ex3_class)
    notebook = ex3_class / "submitted" / "ada" / EX3 / f"{EX3}.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text(json.dumps(reference(EX3)))
    record(ex3_class, EX3, "ada")  # the formgrader's copy of the notebook, which nbgrader's feedback renders
    nbgrader(["generate_feedback", EX3], ex3_class)
    feedback = ex3_class / "feedback" / "ada" / EX3 / f"{EX3}.html"
    assert f"{EX3} (Score: 9.5 / 10.0)" in feedback.read_text()
    type_grade(ex3_class, "ada", 1.0)  # in the formgrader
    exported(ex3_class, EX3, "ada", "--gradebook", url_of(ex3_class))
    nbgrader(["generate_feedback", EX3], ex3_class)  # as the README says, without --force
    assert f"{EX3} (Score: 8.0 / 10.0)" in feedback.read_text()


# --- lateness, notebooks ----------------------------------------------------------------------------------------


LATE = {"submitted_at": "2026-11-20T10:30:00+01:00", "source": "timestamp.txt", "due": "2026-11-19T23:59:00+01:00",
        "seconds_late": 37860, "penalty": 2.0, "policy": "10 % of the maximum per started day, at most 50 %"}


def test_a_late_result_shows_the_penalty_its_policy_and_the_exported_total_after_it(course):
    save(course / "results", EX2, "ada", 1.0)
    path = course / "results" / EX2 / "ada.json"
    data = json.loads(path.read_text())
    data["extra_data"]["late"] = LATE
    path.write_text(json.dumps(data))
    handback(course, EX2)
    shown = text_of(page(course, EX2, "ada"))
    assert "Late penalty: -2 (see Lateness below; the total is after it)" in shown
    assert f"Penalty: 2 points ({LATE['policy']})" in shown and "Late by: 10 hours, 31 minutes" in shown
    assert exported(course, EX2, "ada") == "8" and "Total: 8 / 10" in shown


def test_the_submission_time_is_shown_in_the_due_dates_time_zone(course):
    save(course / "results", EX2, "ada", 1.0)
    path = course / "results" / EX2 / "ada.json"
    data = json.loads(path.read_text())
    data["extra_data"]["late"] = {**LATE, "submitted_at": "2026-11-20T09:30:00+00:00"}  # as grading writes it: UTC
    path.write_text(json.dumps(data))
    assert handback(course, EX2) == 0
    shown = text_of(page(course, EX2, "ada"))
    assert "Submitted: 2026-11-20 10:30 (UTC+01:00) Due: 2026-11-19 23:59 (UTC+01:00)" in shown


def test_an_on_time_submission_says_so_and_loses_nothing(course):
    save(course / "results", EX2, "ada", 1.0)
    path = course / "results" / EX2 / "ada.json"
    data = json.loads(path.read_text())
    data["extra_data"]["late"] = {**LATE, "submitted_at": "2026-11-19T20:00:00+01:00", "seconds_late": 0,
                                  "penalty": 0}
    path.write_text(json.dumps(data))
    assert handback(course, EX2) == 0
    shown = text_of(page(course, EX2, "ada"))
    assert "Late by: on time Penalty: 0 points" in shown and "Total: 10 / 10" in shown


@pytest.mark.parametrize("late", ["yesterday", {**LATE, "penalty": "2"}, {**LATE, "penalty": -1}, {"due": LATE["due"]}])
def test_a_late_record_without_a_valid_penalty_is_left_out_of_the_hand_back_and_the_export(course, late):
    save(course / "results", EX2, "ada", 1.0)
    path = course / "results" / EX2 / "ada.json"
    data = json.loads(path.read_text())
    data["extra_data"]["late"] = late
    path.write_text(json.dumps(data))
    assert handback(course, EX2) == 0
    shown = text_of(page(course, EX2, "ada"))
    assert "Late" not in shown and "Total: 10 / 10" in shown and exported(course, EX2, "ada") == "10"


def test_which_notebook_counted_is_shown(course):
    save(course / "results", EX2, "ada", 1.0)
    path = course / "results" / EX2 / "ada.json"
    data = json.loads(path.read_text())
    data["extra_data"]["notebooks"] = [{"name": f"{EX2}.ipynb", "score": 0.0, "status": "ok", "counted": False},
                                       {"name": "mine.ipynb", "score": 10.0, "status": "ok", "counted": True},
                                       {"name": 7}]
    path.write_text(json.dumps(data))
    handback(course, EX2)
    shown = text_of(page(course, EX2, "ada"))
    assert f"{EX2}.ipynb: 0 points, ok mine.ipynb: 10 points, ok (counted)" in shown


# --- hostile text, the page itself, damaged results -----------------------------------------------------------


def test_markup_in_a_test_message_and_in_a_comment_is_shown_as_text(course):
    data = report.result(EX3, "ada", "digest", "ok", scored(EX3, held=(), failed=("batch_norm.uses_the_eps_argument",)),
                           [], 1.0, "namespaces")
    test = next(t for t in data["tests"] if t["status"] == "failed")
    test["output"] = f"failed: {SCRIPT}"
    report.save(course / "results" / EX3, data)
    record(course, EX3, "ada")
    type_grade(course, "ada", 3.0, f"Nice {SCRIPT}")
    handback(course, EX3)
    parsed = Tags()
    parsed.feed(page(course, EX3, "ada"))
    assert "script" not in parsed.tags and "img" not in parsed.tags
    assert not [name for name in parsed.attributes if name.startswith("on")]
    assert parsed.text.count(SCRIPT) == 2
    rendered = Tags()  # the Markdown hand-back, as a Markdown renderer shows it
    rendered.feed(f"<body>{markdown2html_mistune(page(course, EX3, 'ada', 'md'))}</body>")
    assert not {"script", "img"} & set(rendered.tags) and rendered.text.count(SCRIPT) == 2


def test_the_page_is_self_contained_in_english_with_a_captioned_table_for_a_phone(course):
    save(course / "results", EX2, "ada", 1.0)
    handback(course, EX2)
    html = page(course, EX2, "ada")
    parsed = Tags()
    parsed.feed(html)
    assert '<html lang="en">' in html and 'name="viewport"' in html and "@media print" in html
    assert {"h1", "h2", "table", "caption", "th", "style"} <= set(parsed.tags)
    assert not {"script", "link", "img", "iframe"} & set(parsed.tags)
    assert not {"src", "href"} & set(parsed.attributes)


def test_the_markdown_hand_back_says_what_the_page_says(course, wrong_ex2):
    report.save(course / "results" / EX2, wrong_ex2)
    handback(course, EX2)
    markdown = page(course, EX2, "ada", "md")
    assert "Total: **7.25 / 10**" in markdown and "## Task 1: layer\\_norm" in markdown


def test_a_damaged_result_is_named_and_the_other_hand_backs_are_still_written(course, capsys):
    save(course / "results", EX2, "ada", 1.0)
    save(course / "results", EX2, "ben", 0.5)
    (course / "results" / EX2 / "cy.json").write_text('{"score": 4, "tests": [')
    assert handback(course, EX2) == 2
    captured = capsys.readouterr()
    assert "error: no hand-back for cy: " in captured.err and str(course / "results" / EX2 / "cy.json") in captured.err
    assert "Traceback" not in captured.err and "wrote 2 hand-backs" in captured.out
    assert {p.name for p in (course / "results" / EX2 / "handback").glob("*.html")} == {"ada.html", "ben.html"}


def test_grade_writes_the_hand_back_of_what_it_graded(tmp_path, capsys):
    (tmp_path / "fay.ipynb").write_text("{not a notebook")  # graded as invalid, with no sandbox to start
    assert cli.main(["grade", EX2, str(tmp_path / "fay.ipynb"), "--results", str(tmp_path / "out"), "--quiet"]) == 0
    assert f"wrote 1 hand-back in {tmp_path / 'out' / 'handback'}/" in capsys.readouterr().out
    assert "Total: 0 / 10" in text_of((tmp_path / "out" / "handback" / "fay.html").read_text())
