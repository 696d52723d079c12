"""An instructor's week with nbgrader, played here: release, collect, grade, review, grade by hand, hand back.

The guide's block of the week's commands (``the-week`` in teaching.md) is run line by line as it
is written (``STUDENT_ID`` of its ``release`` line is the student the summary of ``grade`` holds
for review, and ``--allow-root`` is added to ``jupyter server`` when the tests run as root, as the
guide says), in a fresh copy of the repository's files with a ``course.toml`` that sets a due date
and a late policy, the tests' Python environment first on the ``PATH`` as activating it does. The
class comes as a zip laid out like Canvas's *Download Submissions*, with each file's time in the
zip as Canvas stores it (local time, no offset), put where the guide says: an honest learner with
a written answer, a wrong one, a late forged one, a resubmission, a student who uploaded the blank
release beside the work, a task held for review, and a copy of the first learner's work with its
names and comments changed. The formgrader is driven in Debian's Chromium as an instructor would:
open the forged submission and give its written answer 0 and a comment, then give the first
learner's written answer a score and a comment; a screenshot of that page is saved for the guide
(tools/guide_screenshots.py). Then every number and flag is checked in what each person receives:
the hand-backs (the students), the summary, the similarity report and the exports (the instructor),
nbgrader's own feedback pages and grades. The module fixture plays the week once; each test checks
one thing.
"""

import copy
import csv
import datetime
import json
import os
import re
import subprocess
import sys
import tarfile
import threading
import zipfile
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup
from nbgrader.api import Gradebook
from playwright.sync_api import sync_playwright

from tests.conftest import REPO
from tests.honest_corpus import EX3_D2L, EX3_MAKEMORE
from tests.test_handback import text_of
from tools import guide_screenshots
from tools.local_site import CHROMIUM_ARGS
from tests.mistakes import MISTAKES

pytestmark = [pytest.mark.slow, pytest.mark.nbgrader, pytest.mark.browser]

ASSIGNMENT = "ex3_batchnorm"
ASSIGNMENTS = sorted(p.name for p in (REPO / "exercises").iterdir() if p.is_dir())
MANUAL_POINTS = 2.5  # typed into the formgrader for the written answer
COMMENT = "Right about padding and batch dependence; say what happens when generating one token at a time."
FORGED_COMMENT = "This does not answer the question: say how padding and generation affect BatchNorm."
WRITTEN = ("BatchNorm would average each feature over every token of every sequence in the batch, padding "
           "included, so a sequence's output depends on the others; at inference there is no batch.")
COPIED_WRITTEN = ("BatchNorm would average every feature over each token of every sequence in the batch, padding "
                  "included, so one sequence's output depends on the others; at inference there is no batch.")
FORGED_OUTPUT = "All hidden tests passed: 10 / 10"
# course.toml of the course copy: ex3 is due at 23:59 in Berlin (UTC+1 in November); 10 % of the maximum per
# started day after a 15-minute grace, at most 50 %; Canvas's zip times are Berlin wall-clock times.
DUE = "2026-11-20T23:59:00+01:00"
COURSE_TOML = f"""[due]
{ASSIGNMENT} = "{DUE}"

[lateness]
policy = "per_day"
penalty = 10
cap = 50
grace_minutes = 15
timezone = "Europe/Berlin"
"""
ON_TIME = (2026, 11, 20, 21, 4, 0)
# 23 h 45 min after the due date: 23 h 30 min after the grace, one started day, 1 point of 10. Read as UTC (an
# hour later) it would be two days and 2 points: the penalty says which clock the grader read.
LATE = (2026, 11, 21, 23, 44, 0)
PENALTY = 1.0
HELD = "davisdee"  # batch_norm reaches into torch.overrides in its graded calls: held for review, then released


@dataclass(frozen=True)
class Student:
    user_id: int  # Canvas's user id, in the file name
    files: dict  # the name the student uploaded -> how the notebook is made (a name in NOTEBOOKS)
    when: tuple = ON_TIME  # the file's time in the zip
    late_mark: bool = False  # Canvas's LATE_ in the file name
    resubmitted: bool = False  # Canvas's -1 before .ipynb


# Canvas names each file <student>_<LATE_>?<user id>_<submission id>_<uploaded name>.
CLASS = {
    "lovelaceada": Student(101, {f"{ASSIGNMENT}.ipynb": "honest, with a written answer"}),
    "bakerben": Student(102, {f"{ASSIGNMENT}.ipynb": "wrong batch_norm"}),
    "yangcy": Student(103, {f"{ASSIGNMENT}.ipynb": "forged"}, when=LATE, late_mark=True),
    "okaforchi": Student(104, {f"{ASSIGNMENT}.ipynb": "the reference"}, resubmitted=True),
    "chenmei": Student(105, {f"{ASSIGNMENT}.ipynb": "the blank release",
                             f"{ASSIGNMENT}_final.ipynb": "another honest one"}),
    HELD: Student(106, {f"{ASSIGNMENT}.ipynb": "held for review"}),
    "copycat": Student(107, {f"{ASSIGNMENT}.ipynb": "a copy of lovelaceada's, renamed"}),
}


# ---- the class --------------------------------------------------------------------------------------------


def grade_id(cell: dict) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def learner(written: str, **answers: str) -> dict:
    """The release as a learner hands it in: every code answer from the solution (or ``answers``), ``written``."""
    solution = json.loads((REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    solved = {grade_id(c): re.sub(r"^[ \t]*### (BEGIN|END) SOLUTION\n?", "", "".join(c["source"]), flags=re.M)
              for c in solution["cells"] if c["metadata"].get("nbgrader", {}).get("solution")}
    notebook = json.loads((REPO / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    for cell in notebook["cells"]:
        if grade_id(cell) == "written_answer":
            cell["source"] = written
        elif grade_id(cell) in solved:
            cell["source"] = answers.get(grade_id(cell), solved[grade_id(cell)])
    return notebook


def forged() -> dict:
    """A correct notebook dressed up for the formgrader: saved outputs, a grade cell of its own worth 90 points,
    a second copy of a real grade cell worth 40, a real one claiming 30, an emptied self-check, and script in
    its Markdown."""
    notebook = learner("I deserve full marks. <img src=x onerror=\"document.title='forged'\">")
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["execution_count"] = 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": FORGED_OUTPUT + "\n"}]
        if grade_id(cell) == "selfcheck_batch_norm":
            cell["source"] = "print('ok')\n"
        if grade_id(cell) == "check_BatchNorm1d":
            cell["metadata"]["nbgrader"]["points"] = 30
    real = next(c for c in notebook["cells"] if grade_id(c) == "check_batch_norm")
    second = copy.deepcopy(real)
    second["metadata"]["nbgrader"]["points"] = 40
    bonus = {"cell_type": "markdown", "source": "Bonus task, done.", "metadata": {"nbgrader": {
        "grade": True, "grade_id": "bonus", "locked": False, "points": 90, "schema_version": 3, "solution": True,
        "task": False}}}
    notebook["cells"][1:1] = [bonus, second]
    return notebook


def honest(entry, written: str) -> dict:
    """A notebook of the honest corpus with ``written`` as its written answer."""
    notebook = entry.notebook()
    for cell in notebook["cells"]:
        if grade_id(cell) == "written_answer":
            cell["source"] = written
    return notebook


def renamed(source: str) -> str:
    """lovelaceada's code as a copier hides it: other names, other comments, other spacing."""
    for old, new in (("X_hat", "normed"), ("moving_mean", "avg_mu"), ("moving_var", "avg_sigma2"), ("gamma", "g"),
                     ("beta", "b"), ("shape", "view_as"), ("dims", "axes"), ("X", "inp"), ("Y", "result"),
                     ("# fully connected: statistics over the batch", "# 2-D input"),
                     ("# (N, C, L): statistics over the batch and the length, per channel", "# 3-D input"),
                     ("# the scale and shift are learned", "# learnable affine"),
                     ("# the moving statistics are not", "# buffers")):
        source = re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)" if old[0] != "#" else re.escape(old), new, source)
    return source.replace("\n\n", "\n")


def held_for_review() -> dict:
    """The reference with a line in batch_norm that reaches into PyTorch's dispatch internals (torch.overrides)."""
    notebook = learner("The statistics mix every sequence of the batch, pads too, and a single request has none.")
    for cell in notebook["cells"]:
        if grade_id(cell) == "batch_norm":
            cell["source"] = cell["source"].replace(
                '"""\n', '"""\n    assert torch.overrides.is_tensor_like(x)  # a tensor, not a list\n', 1)
            assert "torch.overrides" in cell["source"]
    return notebook


def blank_release() -> dict:
    return json.loads((REPO / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())


def notebooks() -> dict[str, dict]:
    """How each notebook of the class is made -> the notebook."""
    wrong = next(m for m in MISTAKES if m.assignment == ASSIGNMENT and m.task == "batch_norm")
    copied = honest(EX3_D2L, COPIED_WRITTEN)
    for cell in copied["cells"]:
        if grade_id(cell) in EX3_D2L.answers:
            cell["source"] = renamed(cell["source"])
    return {
        "honest, with a written answer": honest(EX3_D2L, WRITTEN),
        "wrong batch_norm": learner("It depends on the batch.", batch_norm=wrong.source),
        "forged": forged(),
        "the reference": learner("Padding enters the statistics, and generation has no batch."),
        "the blank release": blank_release(),
        "another honest one": honest(EX3_MAKEMORE, "Padded positions change the batch mean; one token at a time "
                                                   "has no batch to average over."),
        "held for review": held_for_review(),
        "a copy of lovelaceada's, renamed": copied,
    }


def canvas_zip(path: Path) -> Path:
    """The class as Canvas's Download Submissions zip: every file flat, named by Canvas, with its time."""
    made = notebooks()
    with zipfile.ZipFile(path, "w") as archive:
        for number, (student, who) in enumerate(CLASS.items()):
            for uploaded, how in who.files.items():
                if who.resubmitted:
                    uploaded = uploaded.replace(".ipynb", "-1.ipynb")
                name = f"{student}_{'LATE_' * who.late_mark}{who.user_id}_{9001 + number}_{uploaded}"
                archive.writestr(zipfile.ZipInfo(name, date_time=who.when), json.dumps(made[how]))
    return path


# ---- the guide and the course folder ----------------------------------------------------------------------


def the_week(page: Path = REPO / "teaching.md") -> list[str]:
    """The command lines of the guide's code block named ``the-week``."""
    found = re.search(r"^```\{code-block\} bash\n:name: the-week\n(.*?)^```", page.read_text(), re.S | re.M)
    assert found, f"{page.name} should have a code block named the-week, the week's commands"
    return [line for line in found[1].splitlines() if line.strip() and not line.startswith("#")]


def course_files(course: Path) -> set[str]:
    """Every file under ``course``, as paths relative to it."""
    return {p.relative_to(course).as_posix() for p in course.rglob("*") if p.is_file() or p.is_symlink()}


def clone_files(target: Path) -> Path:
    """The files a clone of the repository has (tracked, or new and not ignored), copied to ``target``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    target.mkdir()
    with tarfile.open(target / "clone.tar", "w") as archive:  # keeps symbolic links (zh/exercises) as links
        for name in listed:
            if name and (os.path.lexists(REPO / name)):
                archive.add(REPO / name, arcname=name, recursive=False)
    with tarfile.open(target / "clone.tar") as archive:
        archive.extractall(target, filter="tar")
    (target / "clone.tar").unlink()
    return target


def activated_env(home: Path) -> dict:
    """This environment as a shell with the tests' Python environment activated, and a Jupyter of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER") and k != "PYTHONPATH"}
    env["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{env.get('PATH', '')}"
    env["JUPYTER_CONFIG_DIR"] = str(home / "config")  # no personal configuration (a password, a token)
    env["JUPYTER_RUNTIME_DIR"] = str(home / "runtime")
    return env


# ---- the formgrader ------------------------------------------------------------------------------------


class Server:
    """``jupyter server`` started from the guide's line; its printed link, once it is ready."""

    def __init__(self, line: str, course: Path, env: dict):
        command = line.split("#")[0].strip()
        if os.geteuid() == 0:
            command += " --allow-root"  # the guide: "as root ..., add --allow-root"
        self.process = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=course, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        self.link = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stderr:
            self.log.append(line)
            if re.search(r"http://127\.0\.0\.1:\d+/\?token=\w+", line):
                self.link.set()

    def url(self, timeout=120) -> tuple[str, str]:
        """(base URL, token) from the link the server prints."""
        if not self.link.wait(timeout):
            self.stop()
            pytest.fail("jupyter server printed no link:\n" + "".join(self.log)[-4000:])
        found = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=(\w+)", "".join(self.log))
        return found[1], found[2]

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class SubmissionPage:
    """What the formgrader's page for one submission showed."""

    text: str
    title: str
    outputs: int  # rendered output areas
    boxes: dict[str, str] = field(default_factory=dict)  # score box id -> the maximum printed after it


def open_submission(page, base: str, token: str, student: str):
    """Go from the formgrader's front page to ``student``'s ex3 notebook, as an instructor clicks."""
    page.goto(f"{base}/formgrader?token={token}")
    page.get_by_role("link", name="Manual Grading").first.click()
    page.get_by_role("link", name=ASSIGNMENT, exact=True).click()  # the assignment
    page.get_by_role("link", name=ASSIGNMENT, exact=True).click()  # its notebook
    page.locator("td.name a").first.wait_for(state="attached")  # the table of submissions is filled in by script
    page.get_by_text("Show All Names").click()
    page.get_by_role("link", name=student, exact=True).click()
    page.wait_for_load_state("networkidle")  # the page's script has fetched the grades and watches the boxes


def seen(page) -> SubmissionPage:
    boxes = {}
    for box in page.locator("input.score").all():
        maximum = box.evaluate("b => b.parentElement.textContent")
        boxes[box.get_attribute("id")] = re.search(r"/\s*([\d.]+)", maximum)[1]
    return SubmissionPage(page.inner_text("body"), page.title(), page.locator(".output_area").count(), boxes)


def grade_by_hand(page, points: float, comment: str) -> None:
    """Type the written answer's score and a comment; each is saved (a PUT) when the field is left."""
    with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT"):
        page.locator("input.score#written_answer").fill(f"{points:g}")
        page.keyboard.press("Tab")
    with page.expect_response(lambda r: "/formgrader/api/comment/" in r.url and r.request.method == "PUT"):
        page.locator("textarea#written_answer-comment").fill(comment)
        page.keyboard.press("Tab")


SCREENSHOT = "formgrader-manual-grading"  # the guide's figure of the formgrader (figures/teaching/)


def in_formgrader(chromium: str, base: str, token: str) -> tuple[SubmissionPage, str]:
    """Look at the forged submission and give its written answer 0, then grade the learner's written answer and
    take the guide's screenshot.

    Returns what the forged page showed and the text of the formgrader's front page.
    """
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=guide_screenshots.VIEWPORT,
                                      color_scheme=guide_screenshots.COLOR_SCHEME)
        # the formgrader's pages ask a CDN for MathJax; the network here is closed
        context.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname
                      in ("127.0.0.1", "localhost") else route.abort())
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(f"{base}/formgrader?token={token}")
        page.wait_for_load_state("networkidle")  # the assignments' table and any banner are filled in by script
        front_page = page.inner_text("body")
        open_submission(page, base, token, "yangcy")
        forged_page = seen(page)
        grade_by_hand(page, 0, FORGED_COMMENT)
        open_submission(page, base, token, "lovelaceada")
        grade_by_hand(page, MANUAL_POINTS, COMMENT)
        page.locator("input.score#written_answer").evaluate(
            "box => box.closest('.cell').scrollIntoView({block: 'center'})")
        guide_screenshots.take(page, SCREENSHOT)
        browser.close()
    return forged_page, front_page


# The guide's figures of what the week wrote: name -> (the page in results/ex3_batchnorm/, the id it is scrolled to).
HANDED_BACK = {"handback": ("handback/lovelaceada.html", None), "similarity-passages": ("similarity.html", "code-1")}


def take_the_guides_pictures(chromium: str, course: Path) -> None:
    """Screenshots of what the week wrote for the guide: a hand-back and the similarity report, as a browser shows
    them (each page is self-contained: no file is fetched)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=guide_screenshots.VIEWPORT,
                                      color_scheme=guide_screenshots.COLOR_SCHEME)
        context.route("**/*", lambda route: route.abort())
        page = context.new_page()
        for name, (path, anchor) in HANDED_BACK.items():
            page.set_content((course / "results" / ASSIGNMENT / path).read_text())
            if anchor:
                page.evaluate("id => document.getElementById(id).scrollIntoView()", anchor)
            guide_screenshots.take(page, name)
        browser.close()


# ---- the week -----------------------------------------------------------------------------------------------


@dataclass
class Week:
    course: Path
    ran: dict[str, subprocess.CompletedProcess]  # the guide's line -> what it did
    forged_page: SubmissionPage
    front_page: str  # the text of the formgrader's first page
    server_log: str  # what `jupyter server` printed
    written: set[str]  # the files the week added to the course folder, the LMS's download included


@pytest.fixture(scope="module")
def week(tmp_path_factory, chromium) -> Week:
    scratch = tmp_path_factory.mktemp("instructor")
    course = clone_files(scratch / "course")
    cloned = course_files(course)
    (course / "downloaded" / ASSIGNMENT / "archive").mkdir(parents=True)
    canvas_zip(course / "downloaded" / ASSIGNMENT / "archive" / "submissions.zip")
    (course / "course.toml").write_text(COURSE_TOML)
    env = activated_env(scratch)
    ran, forged_page, front_page, server = {}, None, "", None
    try:
        for line in the_week():
            if line.startswith("jupyter server"):
                server = Server(line, course, env)
                forged_page, front_page = in_formgrader(chromium, *server.url())
                continue
            if "STUDENT_ID" in line:  # the student the summary of `grade` holds for review, as the guide says
                held = re.search(r"held for review: (\S+) ", line_of_ran(ran, "python -m autograder grade").stdout)
                assert held, "the summary of `grade` names no student held for review"
                line = line.replace("STUDENT_ID", held[1])
            done = subprocess.run(["bash", "-c", line], cwd=course, env=env, capture_output=True, text=True,
                                  timeout=900)
            assert done.returncode == 0, f"`{line}` failed (exit {done.returncode}):\n{done.stdout[-3000:]}" \
                                         f"{done.stderr[-3000:]}"
            ran[line] = done
    finally:
        if server is not None:
            server.stop()
    assert forged_page is not None, "the guide's week starts no `jupyter server`"
    take_the_guides_pictures(chromium, course)
    return Week(course, ran, forged_page, front_page, "".join(server.log), course_files(course) - cloned)


def line_of_ran(ran: dict, start: str) -> subprocess.CompletedProcess:
    (found,) = [done for line, done in ran.items() if line.startswith(start)]
    return found


def line_of(week: Week, start: str) -> subprocess.CompletedProcess:
    return line_of_ran(week.ran, start)


# ---- release and collect --------------------------------------------------------------------------------


def test_releasing_records_every_assignment_with_its_graded_cells(week):
    with Gradebook(f"sqlite:///{week.course / 'gradebook.db'}") as gradebook:
        recorded = {a.name: sum(c.max_score for c in gradebook.find_notebook(a.name, a.name).grade_cells)
                    for a in gradebook.assignments}
    assert recorded == {name: 10.0 for name in ASSIGNMENTS} and len(ASSIGNMENTS) == 6


def test_releasing_writes_exercises_byte_for_byte_as_committed(week):
    committed = {p.relative_to(REPO): p.read_bytes() for p in sorted((REPO / "exercises").rglob("*")) if p.is_file()}
    released = {p.relative_to(week.course): p.read_bytes() for p in sorted((week.course / "exercises").rglob("*"))
                if p.is_file()}
    assert released == committed


def test_zip_collect_files_each_canvas_submission_under_its_student(week):
    found = {p.relative_to(week.course / "submitted").as_posix()
             for p in (week.course / "submitted").rglob("*.ipynb")}
    assert found == {f"{student}/{ASSIGNMENT}/{name}" for student, who in CLASS.items() for name in who.files}


@pytest.mark.parametrize("student", CLASS)
def test_zip_collect_keeps_the_time_canvas_stored_read_in_the_courses_time_zone(week, student):
    stamp = (week.course / "submitted" / student / ASSIGNMENT / "timestamp.txt").read_text().strip()
    berlin = datetime.datetime(*CLASS[student].when, tzinfo=zoneinfo.ZoneInfo("Europe/Berlin"))
    assert stamp == f"{berlin.astimezone(datetime.timezone.utc):%Y-%m-%d %H:%M:%S}"  # nbgrader's: UTC, no zone


# ---- grade and release ------------------------------------------------------------------------------------


def result(week: Week, student: str) -> dict:
    return json.loads((week.course / "results" / ASSIGNMENT / f"{student}.json").read_text())


def test_grading_into_the_gradebook_prints_no_warning(week):
    assert "Warning" not in line_of(week, "python -m autograder grade").stderr


def test_no_result_says_a_written_answer_is_missing(week):
    problems = {student: result(week, student)["extra_data"]["problems"] for student in CLASS}
    assert {student: [p for p in found if "written_answer" in p] for student, found in problems.items()} == \
        {student: [] for student in CLASS}


@pytest.mark.parametrize("said", [
    f"held for review: {HELD} (read the notes in results/{ASSIGNMENT}/feedback/STUDENT_ID.md",
    "1 student submitted several notebooks; the best of each counted",
    "late: 1 submission (1 with a penalty",
])
def test_the_summary_of_grading_names_what_needs_the_instructor(week, said):
    assert said in line_of(week, "python -m autograder grade").stdout


def test_grades_csv_flags_the_late_submission_with_its_hours_and_penalty(week):
    rows = {row["student_id"]: row for row in csv.DictReader((week.course / "results" / ASSIGNMENT / "grades.csv")
                                                             .open())}
    late = {s: (row["late"], row["hours_late"], row["penalty"], row["grade"]) for s, row in rows.items()
            if row["late"] != "no"}
    assert late == {"yangcy": ("yes", "23.75", "1", "6.0")} and set(rows) == set(CLASS)


def test_every_notebook_of_a_student_is_graded_and_the_best_counts(week):
    listed = {nb["name"]: (nb["score"], nb["counted"]) for nb in result(week, "chenmei")["extra_data"]["notebooks"]}
    assert listed == {f"{ASSIGNMENT}.ipynb": (0, False), f"{ASSIGNMENT}_final.ipynb": (7, True)}
    assert result(week, "chenmei")["score"] == 7


def test_release_gives_the_held_task_the_points_its_tests_measured(week):
    released = result(week, HELD)
    assert (released["score"], released["extra_data"]["status"], released["extra_data"]["parts"]["batch_norm"]) == \
        (7, "ok", {**released["extra_data"]["parts"]["batch_norm"], "score": 4.0,
                   "note": "released after your instructor's review"})
    assert f"{HELD}: released, 7 / 7" in line_of(week, "python -m autograder release").stdout


# ---- the formgrader ---------------------------------------------------------------------------------------


def test_formgrader_shows_no_exchange_warning(week):
    assert "Assignments" in week.front_page or "ex3_batchnorm" in week.front_page  # the page did load
    assert "exchange" not in week.front_page.lower(), week.front_page[:1000]


def test_jupyter_server_logs_no_unwritable_exchange_directory(week):
    assert "Unwritable directory" not in week.server_log


def test_every_file_the_week_writes_is_git_ignored(week):
    listed = "\n".join(sorted(week.written)) + "\n"
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=REPO, input=listed,
                             capture_output=True, text=True).stdout.split()
    assert len(week.written) > 20 and sorted(week.written - set(ignored)) == []


def test_each_screenshot_taken_for_the_guide_has_its_committed_copys_size(week):
    """The one taken here and any other browser test's: the guide shows the committed copies."""
    from PIL import Image

    def size(path):
        with Image.open(path) as image:
            return image.size

    taken = {png.stem: size(png) for png in guide_screenshots.TAKEN.glob("*.png")}
    committed = {stem: size(guide_screenshots.COMMITTED / f"{stem}.webp") for stem in taken
                 if (guide_screenshots.COMMITTED / f"{stem}.webp").is_file()}
    assert {SCREENSHOT, *HANDED_BACK} <= set(taken) and committed == taken
    assert taken[SCREENSHOT] == (guide_screenshots.VIEWPORT["width"], guide_screenshots.VIEWPORT["height"])


def test_formgrader_shows_no_output_the_student_saved(week):
    assert week.forged_page.outputs == 0 and FORGED_OUTPUT not in week.forged_page.text


def test_formgrader_shows_the_releases_score_boxes_with_the_releases_points(week):
    assert week.forged_page.boxes == {"check_batch_norm": "4.0", "check_BatchNorm1d": "3.0", "written_answer": "3.0"}


def test_formgrader_runs_no_script_from_the_students_markdown(week):
    assert week.forged_page.title != "forged" and "onerror" in week.forged_page.text  # shown, as text


@pytest.mark.parametrize("student, points, comment", [("lovelaceada", MANUAL_POINTS, COMMENT),
                                                      ("yangcy", 0.0, FORGED_COMMENT)])
def test_score_and_comment_typed_in_the_formgrader_are_in_the_gradebook(week, student, points, comment):
    with Gradebook(f"sqlite:///{week.course / 'gradebook.db'}") as gradebook:
        grade = gradebook.find_grade("written_answer", ASSIGNMENT, ASSIGNMENT, student)
        typed = gradebook.find_comment("written_answer", ASSIGNMENT, ASSIGNMENT, student)
        assert (grade.manual_score, grade.needs_manual_grade, typed.manual_comment) == (points, False, comment)


# ---- what each student receives: the hand-back ------------------------------------------------------------


GRADED = {"lovelaceada": 9.5, "yangcy": 6.0}  # 7 automatic + 2.5 by hand; 7 + 0 by hand - 1 for lateness
AUTOMATIC = {student: 6.0 if student == "bakerben" else 7.0 for student in CLASS}


def handback(week: Week, student: str) -> str:
    """The text of ``student``'s hand-back page as a reader sees it."""
    return text_of((week.course / "results" / ASSIGNMENT / "handback" / f"{student}.html").read_text())


def test_every_student_gets_a_hand_back_page_and_its_markdown(week):
    folder = week.course / "results" / ASSIGNMENT / "handback"
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == \
        sorted(f"{student}.{ext}" for student in CLASS for ext in ("html", "md"))


@pytest.mark.parametrize("student", CLASS)
def test_hand_back_total_is_the_grade_or_says_it_is_provisional(week, student):
    if student in GRADED:
        assert f"Total: {GRADED[student]:g} / 10 " in handback(week, student)
    else:
        assert f"Total so far: {AUTOMATIC[student]:g} / 10 (provisional, no grade yet: a part is not graded by hand " \
               "yet)" in handback(week, student)


@pytest.mark.parametrize("student", CLASS)
def test_hand_back_shows_the_automatic_points(week, student):
    assert f"Automatic points: {AUTOMATIC[student]:g} / 7 " in handback(week, student)


@pytest.mark.parametrize("student, points, comment", [("lovelaceada", MANUAL_POINTS, COMMENT),
                                                      ("yangcy", 0.0, FORGED_COMMENT)])
def test_hand_back_shows_the_points_and_the_comment_given_by_hand(week, student, points, comment):
    shown = handback(week, student)
    assert f"Graded by hand, the written answer written_answer: {points:g} / 3" in shown and comment in shown


def test_late_hand_back_shows_when_it_came_how_late_and_the_penalty(week):
    shown = handback(week, "yangcy")
    assert "Late penalty: -1 " in shown
    assert "Submitted: 2026-11-21 23:44 (UTC+01:00) Due: 2026-11-20 23:59 (UTC+01:00) Late by: 23 hours, 45 minutes " \
           "Penalty: 1 point (10 % of the maximum per started day late after a grace period of 15 minutes, at most " \
           "50 %)" in shown


@pytest.mark.parametrize("student", sorted(set(CLASS) - {"yangcy"}))
def test_on_time_hand_back_says_so_and_takes_nothing_off(week, student):
    shown = handback(week, student)
    assert "Late by: on time Penalty: 0 points" in shown and "Late penalty" not in shown


def test_wrong_submission_hand_back_names_the_lost_point_and_its_mistake(week):
    shown = handback(week, "bakerben")
    assert "Task 1: batch_norm Points: 3 / 4" in shown
    assert "running_var uses the biased variance of the batch: update it with the unbiased one (divide by n - 1)" \
        in shown


def test_hand_back_of_two_notebooks_says_which_counted(week):
    shown = handback(week, "chenmei")
    assert f"Which notebook counted {ASSIGNMENT}.ipynb: 0 points, cell_errors {ASSIGNMENT}_final.ipynb: 7 points, " \
           "ok (counted)" in shown


def test_released_hand_back_shows_the_tasks_measured_points_and_no_hold(week):
    shown = handback(week, HELD)
    assert "Task 1: batch_norm Points: 4 / 4 (released after your instructor's review)" in shown
    assert "waits for your instructor" not in shown and "released by the instructor after review" in shown


# ---- what the instructor reads: the similarity report -------------------------------------------------------


def similarity_rows(week: Week, which: int) -> list[tuple[str, str, str]]:
    """(student, compared with, share) of each row of the report's code (0) or written answers (1) table."""
    page = BeautifulSoup((week.course / "results" / ASSIGNMENT / "similarity.html").read_text(), "html.parser")
    rows = page.find_all("table")[which].find_all("tr")[1:]
    return [tuple(cell.get_text(" ", strip=True) for cell in row.find_all(["td", "th"])[1:4]) for row in rows]


@pytest.mark.parametrize("which", [0, 1], ids=["code", "written answers"])
def test_similarity_report_ranks_the_copy_first(week, which):
    student, other, _ = similarity_rows(week, which)[0]
    assert {student, other} == {"copycat", "lovelaceada"}


def test_similarity_report_lists_copies_of_the_reference_against_it_and_not_each_other(week):
    rows = similarity_rows(week, 0)
    copies = {"okaforchi", "yangcy", HELD}  # the reference's code (HELD's with one line added)
    assert {student for student, other, _ in rows if other == "reference solution (known source)"} >= copies
    assert [row for row in rows if {row[0], row[1]} <= copies] == []


def test_similarity_report_compares_the_notebook_that_counted(week):
    page = (week.course / "results" / ASSIGNMENT / "similarity.html").read_text()
    assert f"2 notebooks submitted; compared: {ASSIGNMENT}_final.ipynb (the one that counted)" in page


# ---- the exports ------------------------------------------------------------------------------------------


def exported(week: Week) -> dict[str, dict]:
    """student -> their ex3 row of the grades.csv that `nbgrader export` wrote."""
    return {row["student_id"]: row for row in csv.DictReader((week.course / "grades.csv").open())
            if row["assignment"] == ASSIGNMENT}


def lms_exported(week: Week) -> dict[str, dict]:
    """student -> their row of the CSV for Canvas that the guide's `python -m autograder export` line wrote."""
    (line,) = [line for line in week.ran if line.startswith("python -m autograder export")]
    written = week.course / re.search(r"-o (\S+)", line)[1]
    return {row["SIS Login ID"]: row for row in csv.DictReader(written.open()) if row["Student"] != "Points Possible"}


def test_lms_export_does_not_overwrite_nbgraders_grades_csv(week):
    assert "-o grades.csv" not in "\n".join(week.ran) and (week.course / "grades.csv").is_file()


def test_lms_export_gives_each_graded_student_the_hand_backs_total(week):
    assert {student: row[ASSIGNMENT] for student, row in lms_exported(week).items() if row[ASSIGNMENT]} == \
        {student: f"{total:g}" for student, total in GRADED.items()}


def test_lms_export_keeps_canvas_user_ids(week):
    assert {student: row["ID"] for student, row in lms_exported(week).items()} == \
        {student: str(who.user_id) for student, who in CLASS.items()}


def test_lms_export_leaves_a_written_answer_not_graded_yet_without_a_score_and_names_it(week):
    others = sorted(set(CLASS) - set(GRADED))
    assert {student: lms_exported(week)[student][ASSIGNMENT] for student in others} == {s: "" for s in others}
    err = line_of(week, "python -m autograder export").stderr
    assert all(f"{ASSIGNMENT}, {student}: no score yet, not graded by hand yet: grade the written answer "
               f"written_answer of {student} in the formgrader first" in err for student in others), err


def test_nbgraders_export_has_the_same_totals_and_late_penalty(week):
    rows = exported(week)
    assert {s: float(row["score"]) for s, row in rows.items() if s in GRADED} == GRADED
    assert {s: float(row["late_submission_penalty"]) for s, row in rows.items()} == \
        {s: 1.0 if s == "yangcy" else 0.0 for s in CLASS}


def test_nbgraders_export_gives_the_others_their_automatic_points(week):
    assert {s: float(row["score"]) for s, row in exported(week).items() if s not in GRADED} == \
        {s: points for s, points in AUTOMATIC.items() if s not in GRADED}


def test_every_student_gets_a_feedback_page_of_nbgraders(week):
    pages = {p.relative_to(week.course / "feedback").as_posix() for p in (week.course / "feedback").rglob("*.html")}
    assert pages == {f"{student}/{ASSIGNMENT}/{ASSIGNMENT}.html" for student in CLASS}


@pytest.mark.parametrize("student", GRADED)
def test_nbgraders_feedback_page_shows_the_hand_backs_total_and_the_comment(week, student):
    page = (week.course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    comment = COMMENT if student == "lovelaceada" else FORGED_COMMENT
    assert f"{ASSIGNMENT} (Score: {GRADED[student]:.1f} / 10.0)" in page and comment in page
