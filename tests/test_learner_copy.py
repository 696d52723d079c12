"""The learner's copy (``python -m tools.learner_copy``) holds what a learner runs and nothing the grader keeps.

A line "of a reference solution" is a line of a ``### BEGIN SOLUTION`` block of ``solutions/*/*.md``; a line "of a
hidden suite" is a line of ``autograder/suites/`` or of a ``BEGIN HIDDEN TESTS`` block. Lines a learner is shown
anyway are left out: what the chapters' sources say (the book shows its LayerNorm in full) and what the exercises'
sources say outside those blocks (the instructions name the submodules), and short or structural lines
(``return out``, ``super().__init__()``, imports). What remains is what must never reach a learner.
"""

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from nbclient import NotebookClient
from packaging.utils import canonicalize_name

from tools import learner_copy as tool

REPO = Path(__file__).resolve().parent.parent
SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)
TAG = re.compile(r"<[^>]*>")
HIDDEN_BLOCK = re.compile(r"^\s*### BEGIN HIDDEN TESTS\s*$", re.M)  # a block, not the guide's words about it
LAUNCH_URL = re.compile(
    r"https://(?:colab\.research\.google\.com|mybinder\.org|raw\.githubusercontent\.com)/[^\s)\"'\\>]+")


def code_of(line: str) -> str:
    return line.split("  #")[0].strip()


def is_trivial(line: str) -> bool:
    return len(line) < 20 or line.startswith(("import ", "from ", "class ", "def __init__", "@"))


def public_lines() -> set[str]:
    """Every line a learner is shown anyway: the chapters' sources, the exercises' sources outside secret blocks."""
    shown = [page.read_text(encoding="utf-8") for page in REPO.glob("chapters/*.md")]
    shown += [HIDDEN.sub("", SOLUTION.sub("", source.read_text(encoding="utf-8")))
              for source in REPO.glob("solutions/*/*.md")]
    return {code_of(line) for text in shown for line in text.splitlines()}


def secret(texts: list[str]) -> set[str]:
    lines = {code_of(line) for text in texts for line in text.splitlines()}
    return {line for line in lines - public_lines() if not is_trivial(line)}


@pytest.fixture(scope="module")
def solution_lines() -> set[str]:
    sources = [source.read_text(encoding="utf-8") for source in REPO.glob("solutions/*/*.md")]
    return secret([block for source in sources for block in SOLUTION.findall(source)])


@pytest.fixture(scope="module")
def hidden_suite_lines() -> set[str]:
    suites = [path.read_text(encoding="utf-8") for path in REPO.glob("autograder/suites/**/*.py")]
    sources = [source.read_text(encoding="utf-8") for source in REPO.glob("solutions/*/*.md")]
    return secret(suites + [block for source in sources for block in HIDDEN.findall(source)])


def text_of(path: Path) -> str:
    """What a reader of ``path`` sees: a notebook's cells and outputs, a page's text, any other file's text."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".ipynb":
        cells = json.loads(text)["cells"]
        text = "\n".join("".join(cell["source"]) for cell in cells)
        text += "\n".join("".join(output.get("text", "")) for cell in cells for output in cell.get("outputs", []))
    elif path.suffix == ".html":  # the page's text: tags dropped, entities read (code keeps its lines)
        text = html.unescape(TAG.sub("", text))
    return text


def lines_of(path: Path) -> set[str]:
    return {code_of(line) for line in text_of(path).splitlines()}


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def leaks(folder: Path, lines: set[str], suffixes=None) -> dict[str, set[str]]:
    found = {}
    for path in files_under(folder):
        if suffixes is None or path.suffix in suffixes:
            if shared := lines_of(path) & lines:
                found[path.relative_to(folder).as_posix()] = shared
    return found


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("learner") / "add-and-norm-learner"
    tool.write(dest)
    return dest


def run_tool(*args, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.learner_copy", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=60)


# ---- what the copy holds --------------------------------------------------------------------------


def test_the_copy_holds_every_chapter_notebook_of_both_editions(copy):
    expected = {p.relative_to(REPO).as_posix() for edition in ("chapters", "zh/chapters")
                for p in (REPO / edition).glob("*.ipynb")}
    assert len(expected) == 18
    assert expected <= {p.relative_to(copy).as_posix() for p in files_under(copy)}


def test_the_copy_holds_every_release_byte_for_byte(copy):
    releases = sorted(REPO.glob("exercises/*/*.ipynb"))
    assert len(releases) == 6
    for release in releases:
        assert (copy / release.relative_to(REPO)).read_bytes() == release.read_bytes()


def test_the_copy_holds_no_file_of_solutions_autograder_or_tests(copy):
    kept = {p.read_bytes() for folder in ("solutions", "autograder", "tests") for p in files_under(REPO / folder)}
    assert [p for p in files_under(copy) if p.read_bytes() in kept and p.stat().st_size > 100] == []
    assert not {"solutions", "autograder", "tests"} & {p.name for p in copy.iterdir()}


def test_the_reader_finds_the_reference_solutions_in_the_solution_notebooks(solution_lines, hidden_suite_lines):
    """The leak check can fail: it finds secret lines where they are."""
    assert len(solution_lines) > 50 and len(hidden_suite_lines) > 500
    assert set(leaks(REPO / "solutions", solution_lines, {".ipynb"})) == {
        f"{p.parent.name}/{p.name}" for p in REPO.glob("solutions/*/*.ipynb")}
    assert leaks(REPO / "autograder" / "suites", hidden_suite_lines)
    assert any(HIDDEN_BLOCK.search(text_of(notebook)) for notebook in REPO.glob("solutions/*/*.ipynb"))


def test_the_reader_finds_a_solution_line_in_a_highlighted_page(tmp_path, solution_lines):
    line = sorted(solution_lines)[0]
    spans = "".join(f'<span class="n">{html.escape(char)}</span>' for char in line)
    (tmp_path / "page.html").write_text(f'<div class="highlight"><pre>{spans}\n</pre></div>')
    assert leaks(tmp_path, solution_lines) == {"page.html": {line}}


def test_no_file_of_the_copy_holds_a_line_of_a_reference_solution(copy, solution_lines):
    assert leaks(copy, solution_lines) == {}


def test_no_file_of_the_copy_holds_a_hidden_test(copy, hidden_suite_lines):
    assert [p for p in files_under(copy) if HIDDEN_BLOCK.search(text_of(p))] == []
    assert leaks(copy, hidden_suite_lines) == {}


# ---- its requirements -----------------------------------------------------------------------------


def requirement_pins(path: Path) -> dict[str, str]:
    return {name: line.split("==")[1] for name, line in tool.pins(path.read_text()).items()}


def test_every_requirement_of_the_copy_is_pinned_exactly_as_the_course_pins_it(copy):
    lines = [line for line in (copy / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith(("#", "--"))]
    assert lines and all(re.fullmatch(r"[A-Za-z0-9._-]+==[0-9][\w.]*", line) for line in lines)
    course = requirement_pins(REPO / "requirements.txt")
    assert {name: course.get(name) for name in requirement_pins(copy / "requirements.txt")} == \
        requirement_pins(copy / "requirements.txt")


def test_the_copy_installs_what_its_notebooks_import_and_no_book_tooling(copy):
    imported = set()
    for notebook in [*copy.glob("*/*.ipynb"), *copy.glob("*/*/*.ipynb")]:
        for cell in nbformat.read(notebook, as_version=4).cells:
            if cell.cell_type == "code":
                imported |= set(re.findall(r"^\s*(?:from|import) (\w+)", cell.source, re.M))
    distributions = {"torch": "torch", "numpy": "numpy", "matplotlib": "matplotlib", "IPython": "ipython"}
    pinned = set(requirement_pins(copy / "requirements.txt"))
    assert {canonicalize_name(distributions[m]) for m in imported if m in distributions} <= pinned
    assert {"ipywidgets", "ipykernel", "jupyterlab"} <= pinned  # chapter 2's explorer; what Binder opens
    assert not {"jupyter-book", "nbgrader", "playwright", "pytest", "copydetect"} & pinned


def test_binder_runs_the_copy_on_the_course_python(copy):
    assert (copy / "runtime.txt").read_text() == (REPO / "runtime.txt").read_text()


# ---- refusals, as a learner or instructor runs the command ------------------------------------------


def test_a_folder_that_is_not_empty_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    proc = run_tool(tmp_path)
    assert proc.returncode == 2 and "is not empty" in proc.stderr and "Traceback" not in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_folder_inside_the_repository_is_refused():
    proc = run_tool("learner-copy")
    assert proc.returncode == 2 and "inside the course's repository" in proc.stderr and "Traceback" not in proc.stderr
    assert not (REPO / "learner-copy").exists()


def test_the_command_says_what_it_wrote_and_how_to_publish_it(tmp_path):
    proc = run_tool(tmp_path / "copy")
    url, branch = tool.learner_copy_setting()
    assert proc.returncode == 0, proc.stderr
    assert "18 chapter notebooks (9 English, 9 Chinese)" in proc.stdout and "6 exercise releases" in proc.stdout
    assert f"git remote add origin {url}.git" in proc.stdout and f"git push -u origin {branch}" in proc.stdout


# ---- the copy runs on its own ---------------------------------------------------------------------


def run_cells(notebook, folder: Path, extra: str = ""):
    """Run ``notebook``'s cells in a fresh kernel whose working folder is ``folder``; errors stay in the outputs."""
    if extra:
        notebook.cells.append(nbformat.v4.new_code_cell(extra))
    NotebookClient(notebook, kernel_name="python3", allow_errors=True, timeout=120,
                   resources={"metadata": {"path": str(folder)}}).execute()
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def errors(cell) -> list[str]:
    return [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]


def test_an_exercise_runs_in_the_copy_up_to_its_first_self_check(copy):
    folder = copy / "exercises" / "ex2_layernorm"
    notebook = nbformat.read(folder / "ex2_layernorm.ipynb", as_version=4)
    ids = [cell.metadata.get("nbgrader", {}).get("grade_id", "") for cell in notebook.cells]
    first_check = next(i for i, grade_id in enumerate(ids) if grade_id.startswith("selfcheck_"))
    notebook.cells = notebook.cells[:first_check + 1]
    *before, check = run_cells(notebook, folder)
    assert [errors(cell) for cell in before if errors(cell)] == []
    said = " ".join(errors(check) + ["".join(o.get("text", "")) for o in check.outputs])
    assert "not written yet" in said or "NotImplementedError" in said


@pytest.mark.parametrize("edition", ["chapters", "zh/chapters"])
def test_a_chapter_notebook_imports_its_helpers_from_the_copy(copy, edition):
    folder = copy / edition
    notebook = nbformat.read(folder / "08_normalization_now.ipynb", as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    notebook.cells = code[:2]  # the Colab fetch, then the imports
    cells = run_cells(notebook, folder, "import addnorm_helpers\nprint(addnorm_helpers.__file__)")
    assert [errors(cell) for cell in cells if errors(cell)] == []
    assert Path(cells[-1].outputs[0]["text"].strip()) == folder / "addnorm_helpers.py"


# ---- every link a learner follows opens the copy ----------------------------------------------------


def chapter_files() -> list[Path]:
    return sorted(p for edition in ("chapters", "zh/chapters") for suffix in ("md", "ipynb")
                  for p in (REPO / edition).glob(f"*.{suffix}"))


def path_in_copy(url: str, copy_repo: str, branch: str) -> str | None:
    """The file of the learner's copy ``url`` opens or fetches, or None when it opens something else."""
    for prefix in (f"https://colab.research.google.com/github/{copy_repo}/blob/{branch}/",
                   f"https://raw.githubusercontent.com/{copy_repo}/{branch}/"):
        if url.startswith(prefix):
            return url[len(prefix):]
    binder = re.fullmatch(rf"https://mybinder\.org/v2/gh/{re.escape(copy_repo)}/{branch}\?urlpath=lab/tree/(\S+)", url)
    return binder[1] if binder else None


@pytest.fixture(scope="module")
def copy_repo() -> tuple[str, str]:
    return tool.copy_repository()


def test_every_colab_binder_and_fetch_url_of_the_chapters_opens_a_file_of_the_copy(copy, copy_repo):
    urls = {(page.relative_to(REPO).as_posix(), url) for page in chapter_files()
            for url in LAUNCH_URL.findall(page.read_text(encoding="utf-8"))}
    assert len({page for page, _ in urls}) == 36  # every chapter fetches its helpers; six link an exercise
    elsewhere = [(page, url) for page, url in urls if path_in_copy(url, *copy_repo) is None]
    assert elsewhere == []
    missing = [url for _, url in urls if not (copy / path_in_copy(url, *copy_repo)).is_file()]
    assert missing == []


COURSE_LINKS = """\
if not pathlib.Path("addnorm_helpers.py").exists():
    urllib.request.urlretrieve(
        "https://raw.githubusercontent.com/add-and-norm/add-and-norm/main/chapters/addnorm_helpers.py",
- or open it in [Colab](https://colab.research.google.com/github/add-and-norm/add-and-norm/blob/main/exercises/ex1_residual/ex1_residual.ipynb)
  or on [Binder](https://mybinder.org/v2/gh/add-and-norm/add-and-norm/main?urlpath=lab/tree/exercises/ex1_residual/ex1_residual.ipynb).
"""


def test_a_chapter_link_to_another_repository_is_reported():
    """_ext/learner_launch.py turns each into a warning, which fails the strict build."""
    assert len(tool.links_elsewhere(COURSE_LINKS)) == 3
    assert tool.links_elsewhere(tool.relinked(COURSE_LINKS)) == []


def test_the_build_warns_of_a_chapter_link_to_another_repository(monkeypatch):
    import learner_launch  # _ext/ is on pytest's pythonpath

    warnings = []
    monkeypatch.setattr(learner_launch.logger, "warning", lambda message, **kw: warnings.append(message))
    learner_launch.check_links(None, "chapters/01_residual_connections", [COURSE_LINKS])
    learner_launch.check_links(None, "chapters/01_residual_connections", [tool.relinked(COURSE_LINKS)])
    assert len(warnings) == 3 and all(tool.RELINK in warning for warning in warnings)


def test_relink_points_every_chapter_link_at_the_configured_copy(copy_repo):
    relinked = tool.relinked(COURSE_LINKS)
    release = "exercises/ex1_residual/ex1_residual.ipynb"
    assert [path_in_copy(url, *copy_repo) for url in LAUNCH_URL.findall(relinked)] == [
        "chapters/addnorm_helpers.py", release, release]


def test_the_launch_buttons_open_the_same_notebook_in_the_copy(copy, copy_repo):
    """What sphinx-book-theme builds from repository.url, rewritten by _ext/learner_launch.py."""
    import learner_launch  # _ext/ is on pytest's pythonpath

    class App:
        class config:
            html_theme_options = {"repository_url": "https://github.com/add-and-norm/add-and-norm",
                                  "repository_branch": "main"}

    theme_made = [
        {"type": "link", "text": "Binder",
         "url": "https://mybinder.org/v2/gh/add-and-norm/add-and-norm/main?urlpath=lab/tree/zh/chapters/05_rmsnorm.ipynb"},
        {"type": "link", "text": "Colab",
         "url": "https://colab.research.google.com/github/add-and-norm/add-and-norm/blob/main/chapters/05_rmsnorm.ipynb"},
    ]
    context = {"header_buttons": [{"label": "launch-buttons", "buttons": theme_made}]}
    learner_launch.point_to_learner_copy(App, "chapters/05_rmsnorm", "page.html", context, None)
    opened = [path_in_copy(button["url"], *copy_repo) for button in theme_made]
    assert opened == ["zh/chapters/05_rmsnorm.ipynb", "chapters/05_rmsnorm.ipynb"]
    assert all((copy / path).is_file() for path in opened)


def test_both_editions_launch_from_the_one_learner_copy_setting():
    english = yaml.safe_load((REPO / "_config.yml").read_text())
    chinese = yaml.safe_load((REPO / "zh" / "_config.yml").read_text())
    assert "learner_copy" in english and "learner_copy" not in chinese  # one place: zh reads ../_config.yml
    for config in (english, chinese):
        assert "learner_launch" in config["sphinx"]["local_extensions"]


# ---- the published book -----------------------------------------------------------------------------


def test_the_built_site_holds_no_solution_line_and_no_hidden_test(book, solution_lines, hidden_suite_lines):
    readable = {".html", ".ipynb", ".md", ".txt", ".py", ".js", ".json"}
    assert leaks(book.html, solution_lines | hidden_suite_lines, readable) == {}
    assert [p for p in files_under(book.html) if p.suffix in readable
            and HIDDEN_BLOCK.search(text_of(p))] == []
