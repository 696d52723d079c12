"""Every text notebook's .ipynb twin is generated from it, carries no outputs, and reads without MyST.

The text notebooks are the chapters (both editions) and the exercise solutions. A chapter's twin is
what Colab, Binder and plain Jupyter open, where no MyST extension runs: tools/sync_notebooks.py
writes its measured values, quizzes, figures and cross-references as plain Markdown. A solution's
twin is jupytext's conversion, unchanged, for nbgrader.
"""

import base64
import json
import re
import subprocess
import sys
from html.parser import HTMLParser

import jupytext
import nbformat
import pytest
from tests.conftest import REPO, quizzes_in
from nbconvert import HTMLExporter

from tools import sync_notebooks

TEXT_SOURCES = sync_notebooks.text_notebooks()
CHAPTER_SOURCES = [p for p in TEXT_SOURCES if sync_notebooks.is_chapter(p)]
SOLUTION_SOURCES = [p for p in TEXT_SOURCES if not sync_notebooks.is_chapter(p)]
MEASURED = sync_notebooks.load_measured()
MYST_LEFTOVERS = ("{glue", "{quiz}", ":::{", "```{", "{numref}", "{ref}", "{download}", "{doc}", ")=")
# A cell that reads a clock: the values it glues are timings.
READS_A_CLOCK = re.compile(r"\bTimer\b|\btimings\b|perf_counter|\btimeit\b|time\.time\(")
GLUE_CALL = re.compile(r"\b(glue|glue_text|show_figure)\(\s*(f?)[\"']([^\"']+)[\"']")


def name_of(path):
    return str(path.relative_to(REPO))


def cells(twin_text: str, kind: str) -> list[dict]:
    """The cells of one kind ("code", "markdown") of a twin's text, each source joined into one string."""
    return [cell for cell in nbformat.reads(twin_text, as_version=4).cells if cell.cell_type == kind]


def markdown_cells(twin_text: str) -> list[dict]:
    return cells(twin_text, "markdown")


def markdown_of(source) -> str:
    """All the Markdown of the twin ``source`` gives, one cell after another."""
    return "\n\n".join(cell["source"] for cell in markdown_cells(sync_notebooks.render_twin(source)))


class PageText(HTMLParser):
    """The text a reader sees on an HTML page (outside <style> and <script>), and its images."""

    def __init__(self):
        super().__init__()
        self.text, self.images, self._hidden = [], [], 0

    def handle_starttag(self, tag, attrs):
        self._hidden += tag in ("style", "script")
        if tag == "img":
            self.images.append(dict(attrs).get("src", ""))

    def handle_endtag(self, tag):
        self._hidden -= tag in ("style", "script")

    def handle_data(self, data):
        if not self._hidden:
            self.text.append(data)


@pytest.fixture(scope="module")
def plain_html():
    """source -> what nbconvert (no MyST anywhere) shows of its twin's Markdown cells."""
    exporter = HTMLExporter(template_name="basic", exclude_input=True)
    cache = {}

    def render(source) -> PageText:
        if source not in cache:
            html, _ = exporter.from_filename(str(sync_notebooks.twin_of(source)))
            cache[source] = PageText()
            cache[source].feed(html)
        return cache[source]

    return render


# ---- the committed twins -----------------------------------------------------------------------


def test_there_are_chapter_sources_in_both_editions():
    editions = {sync_notebooks.edition_of(p) for p in CHAPTER_SOURCES}
    assert len(CHAPTER_SOURCES) >= 4 and editions == {"en", "zh"}


@pytest.mark.parametrize("source", TEXT_SOURCES, ids=name_of)
def test_committed_twin_is_exactly_what_the_sync_command_writes(source):
    twin = sync_notebooks.twin_of(source)
    assert twin.exists(), f"missing {name_of(twin)}: run python -m tools.sync_notebooks"
    assert twin.read_text(encoding="utf-8") == sync_notebooks.render_twin(source), (
        f"{name_of(twin)} is stale: run python -m tools.sync_notebooks")


@pytest.mark.parametrize("source", TEXT_SOURCES, ids=name_of)
def test_twin_is_a_valid_notebook(source):
    """Jupyter, Colab and nbgrader refuse a notebook that breaks the format (attachments included)."""
    nbformat.validate(nbformat.reads(sync_notebooks.twin_of(source).read_text(encoding="utf-8"), as_version=4))


@pytest.mark.parametrize("source", TEXT_SOURCES, ids=name_of)
def test_twin_has_no_outputs(source):
    notebook = json.loads(sync_notebooks.twin_of(source).read_text())
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)


@pytest.mark.parametrize("source", TEXT_SOURCES, ids=name_of)
def test_twin_code_cells_are_jupytexts_byte_for_byte(source):
    """Code and cell metadata (tags included) are the source's: only the Markdown is rewritten."""
    read = jupytext.read(source, fmt="md:myst")
    expected = [(c.source, dict(c.metadata)) for c in read.cells if c.cell_type == "code"]
    code = cells(sync_notebooks.twin_of(source).read_text(), "code")
    assert [(c.source, dict(c.metadata)) for c in code] == expected


@pytest.mark.parametrize("source", SOLUTION_SOURCES, ids=name_of)
def test_solution_twin_markdown_is_the_myst_source_verbatim(source):
    """nbgrader reads the solution twins: they stay jupytext's plain conversion."""
    expected = [c.source for c in jupytext.read(source, fmt="md:myst").cells if c.cell_type == "markdown"]
    markdown = markdown_cells(sync_notebooks.twin_of(source).read_text())
    assert [c["source"] for c in markdown] == expected and not any("attachments" in c for c in markdown)


@pytest.mark.parametrize("source", CHAPTER_SOURCES, ids=name_of)
def test_plain_jupyter_shows_no_myst_markup_in_a_chapter_twin(source, plain_html):
    text = "".join(plain_html(source).text)
    assert [markup for markup in MYST_LEFTOVERS if markup in text] == []


@pytest.mark.parametrize("source", CHAPTER_SOURCES, ids=name_of)
def test_every_image_of_a_chapter_twin_is_embedded(source, plain_html):
    """Each {figure} is an image in the twin, carried inside it: nothing to fetch, nothing broken."""
    images = plain_html(source).images
    assert len(images) == source.read_text().count("```{figure}")
    for src in images:
        mime, _, data = src.partition(";base64,")
        assert mime == "data:image/svg+xml" and base64.b64decode(data).lstrip().startswith((b"<svg", b"<?xml"))


@pytest.mark.parametrize("source", CHAPTER_SOURCES, ids=name_of)
def test_every_value_a_chapter_pastes_is_measured(source):
    pasted = {ref.name for ref in sync_notebooks.glue_references(source.read_text(encoding="utf-8"))}
    missing = pasted - set(MEASURED["chapters"].get(source.stem, {}))
    assert missing == set(), "run python -m tools.book_build, then python -m tools.sync_notebooks --measure"


@pytest.mark.parametrize("source", CHAPTER_SOURCES, ids=name_of)
def test_first_markdown_cell_says_the_numbers_come_from_the_build(source):
    first = markdown_cells(sync_notebooks.twin_of(source).read_text())[0]["source"]
    versions = MEASURED["environment"]
    said = "measured when the book was built" if sync_notebooks.edition_of(source) == "en" else "在构建本书时测得"
    assert said in first and versions["torch"] in first and versions["python"] in first


@pytest.mark.parametrize("source", CHAPTER_SOURCES, ids=name_of)
def test_colab_fetches_the_helpers_from_the_learner_copy(source, learner_copy):
    org, name, branch = learner_copy["org"], learner_copy["name"], learner_copy["branch"]
    expected = f"https://raw.githubusercontent.com/{org}/{name}/{branch}/chapters/addnorm_helpers.py"
    assert expected in sync_notebooks.twin_of(source).read_text()


def test_rms_norm_twin_says_its_timings_change_from_run_to_run():
    first = markdown_cells(sync_notebooks.twin_of(REPO / "chapters" / "05_rmsnorm.md").read_text())[0]["source"]
    assert "“Speed, like for like”" in first and "change from run to run" in first


def glued_by(code: str) -> list[re.Pattern]:
    """The names a code cell glues, as patterns: ``glue(f"time_{key}", ...)`` gives ``time_.+``."""
    patterns = []
    for function, is_f, name in GLUE_CALL.findall(code):
        pattern = ".+".join(map(re.escape, re.split(r"\{[^{}]*\}", name) if is_f else [name]))
        patterns += [pattern, pattern + "_zh"] if function == "glue_text" else [pattern]
    return [re.compile(pattern) for pattern in patterns]


def test_timing_patterns_match_exactly_the_values_glued_by_cells_that_read_a_clock():
    """TIMINGS leaves values out of the comparison with a fresh build: only timings may be left out."""
    declared, timed, untimed = set(), set(), set()
    for source in CHAPTER_SOURCES:
        if sync_notebooks.edition_of(source) != "en":
            continue
        names = MEASURED["chapters"][source.stem]
        declared |= {(source.stem, name) for name in names if sync_notebooks.is_timing(source.stem, name)}
        for cell in cells(sync_notebooks.twin_of(source).read_text(), "code"):
            glued = {(source.stem, name) for name in names if any(p.fullmatch(name) for p in glued_by(cell.source))}
            (timed if READS_A_CLOCK.search(cell.source) else untimed).update(glued)
    assert timed and declared == timed and not declared & untimed


def test_sync_check_command_passes_on_the_repository():
    proc = subprocess.run([sys.executable, "-m", "tools.sync_notebooks", "--check"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- one quiz, in detail --------------------------------------------------------------------


@pytest.fixture(scope="module")
def rms_quiz():
    """Chapter 5's first quiz, as the book parses it, and its twin's Markdown before and after the fold."""
    source = REPO / "chapters" / "05_rmsnorm.md"
    quiz = quizzes_in(source)[0]
    cell = next(c["source"] for c in markdown_cells(sync_notebooks.twin_of(source).read_text())
                if quiz.question in c["source"])
    start = cell.index(quiz.question)
    shown, _, folded = cell[start:].partition("<details>")
    return quiz, shown, folded.partition("</details>")[0]


def squeeze(text):
    return " ".join(text.split())


def test_quiz_twin_lists_every_answer_before_the_fold_without_the_verdict(rms_quiz):
    quiz, shown, _ = rms_quiz
    assert all(squeeze(answer.text) in squeeze(shown) for answer in quiz.answers)
    assert "The right answer is" not in shown


def test_quiz_twin_folds_the_right_answer_and_every_explanation(rms_quiz):
    quiz, _, folded = rms_quiz
    letter = "ABCDEFGH"[next(i for i, answer in enumerate(quiz.answers) if answer.right)]
    assert f"The right answer is **{letter}**." in folded
    assert all(squeeze(answer.why) in squeeze(folded) for answer in quiz.answers)


# ---- against a fresh build -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.build
def test_committed_values_are_a_fresh_builds_except_timings(book):
    """A changed number with stale twins fails here: run --measure after the build."""
    fresh = sync_notebooks.measure(book.executed)["chapters"]
    changed = set()
    for source in CHAPTER_SOURCES:
        for ref in sync_notebooks.glue_references(source.read_text(encoding="utf-8")):
            if not sync_notebooks.is_timing(source.stem, ref.name):
                shown, now = ref.render(MEASURED["chapters"][source.stem]), ref.render(fresh[source.stem])
                if shown != now:
                    changed.add(f"{name_of(source)}: {ref.name} shows {shown!r}, the build gives {now!r}")
    assert not changed, "run python -m tools.sync_notebooks --measure\n" + "\n".join(sorted(changed))


@pytest.mark.slow
@pytest.mark.build
@pytest.mark.parametrize("edition", ["en", "zh"])
@pytest.mark.parametrize(("caption", "word"), [("figcaption", r"(?:Fig\.|图)"), ("caption", r"(?:Table|表)")])
def test_twins_number_the_figures_and_tables_as_the_book_does(book, edition, caption, word):
    site = book.html / "zh" if edition == "zh" else book.html
    for source in (s for s in CHAPTER_SOURCES if sync_notebooks.edition_of(s) == edition):
        page = (site / "chapters" / f"{source.stem}.html").read_text(encoding="utf-8")
        in_book = [int(n) for n in re.findall(rf'<{caption}>\s*(?:<p>)?<span class="caption-number">\D*(\d+)', page)]
        in_twin = [int(n) for n in re.findall(rf"^\*\*{word} (\d+)", markdown_of(source), re.M)]
        assert in_twin == in_book, source.name


# ---- the converter, on small chapters ----------------------------------------------------------

FRONT_MATTER = ("---\njupytext:\n  formats: md:myst\n"
                "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n")
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>\n'


@pytest.fixture
def mini_book(tmp_path):
    """A book with an intro (one figure), one chapter in each edition, a figure file and a config."""
    (tmp_path / "_config.yml").write_text(
        "repository:\n  url: https://github.com/example-org/example-book\n  branch: trunk\n")
    toc = "format: jb-book\nroot: intro\nparts:\n  - caption: Chapters\n    chapters:\n      - file: chapters/01_demo\n"
    for edition_root in (tmp_path, tmp_path / "zh"):
        (edition_root / "chapters" / "figures").mkdir(parents=True)
        (edition_root / "chapters" / "figures" / "diagram.svg").write_bytes(SVG)
        (edition_root / "_toc.yml").write_text(toc)
        (edition_root / "intro.md").write_text(
            "# Intro\n\n```{figure} chapters/figures/diagram.svg\n:name: intro-figure\n\nThe intro's figure.\n```\n")
    return tmp_path


def chapter(root, body, edition="en", values=None, stem="01_demo"):
    """Write a chapter (and the measured values it pastes) into ``root``; return its path."""
    folder = root / ("zh/chapters" if edition == "zh" else "chapters")
    source = folder / f"{stem}.md"
    source.write_text(FRONT_MATTER + "# Demo\n\n" + body, encoding="utf-8")
    measured = {"environment": {"python": "3.11.0", "torch": "9.9.9"},
                "chapters": {stem: {name: data for name, data in (values or {}).items()}}}
    (root / "chapters" / "measured.json").write_text(json.dumps(measured))
    return source


def plain(value):
    return {"text/plain": value}


@pytest.mark.parametrize(
    ("glued", "role", "shown"),
    [
        ("0.123456", "x:.3f", "0.123"),
        ("0.0421", "x:.1%", "4.2%"),
        ("6.739961729161831e-31", "x:.2e", "6.74e-31"),
        ("'widens up to 16 blocks'", "x", "widens up to 16 blocks"),
        ("12", "x", "12"),
    ],
)
def test_glue_text_shows_the_value_as_the_book_formats_it(mini_book, glued, role, shown):
    source = chapter(mini_book, f"The value is {{glue:text}}`{role}` here.\n", values={"x": plain(glued)})
    assert f"The value is {shown} here." in markdown_of(source)


def test_glue_text_escapes_what_markdown_would_read_as_markup(mini_book):
    source = chapter(mini_book, "It follows {glue:text}`x`.\n", values={"x": plain("'1/RMS(x_L) * 2'")})
    assert r"It follows 1/RMS(x\_L) \* 2." in markdown_of(source)


def test_glue_md_pastes_the_glued_markdown_table(mini_book):
    table = "| n | error |\n|---:|---:|\n| 2 | 0.5 |"
    source = chapter(mini_book, "```{glue:md} table\n:format: myst\n```\n",
                     values={"table": {"text/plain": "<IPython.core.display.Markdown object>", "text/markdown": table}})
    assert table in markdown_of(source)


def test_chinese_twin_pastes_the_chinese_phrase(mini_book):
    source = chapter(mini_book, "结果{glue:text}`verdict_zh`。\n", edition="zh",
                     values={"verdict": plain("'holds'"), "verdict_zh": plain("'成立'")})
    assert "结果成立。" in markdown_of(source)


def test_a_value_missing_from_the_measurements_is_an_error_naming_chapter_value_and_command(mini_book):
    chapter(mini_book, "Gain {glue:text}`gain:.2f`, loss {glue:text}`loss:.3f`.\n", values={"loss": plain("0.5")})
    (problem,) = sync_notebooks.problems(mini_book)[:1]
    assert "chapters/01_demo.md" in problem and "gain" in problem and "loss" not in problem.split("hold:")[1]
    assert "python -m tools.book_build" in problem and "python -m tools.sync_notebooks --measure" in problem


def test_a_value_that_cannot_take_its_format_is_an_error_naming_it(mini_book):
    source = chapter(mini_book, "{glue:text}`word:.2f`\n", values={"word": plain("'faster'")})
    with pytest.raises(sync_notebooks.TwinError, match=r"01_demo.md: `word` cannot be formatted as `\.2f`"):
        sync_notebooks.render_twin(source)


def test_figure_is_attached_to_its_cell_as_svg_with_its_alt_text(mini_book):
    source = chapter(mini_book, "```{figure} figures/diagram.svg\n:name: demo-figure\n:alt: A black square.\n"
                                ":width: 100%\n\nA square.\n```\n")
    (cell,) = markdown_cells(sync_notebooks.render_twin(source))
    assert cell["attachments"] == {"diagram.svg": {"image/svg+xml": base64.b64encode(SVG).decode()}}
    assert "![A black square.](attachment:diagram.svg)" in cell["source"]


def test_figure_caption_is_numbered_through_the_book(mini_book):
    """The intro's figure is Fig. 1, so the chapter's first is Fig. 2, as Sphinx numbers them."""
    source = chapter(mini_book, "```{figure} figures/diagram.svg\n:name: demo-figure\n\nA square.\n```\n")
    assert "**Fig. 2.** A square." in markdown_of(source)


@pytest.mark.parametrize(("edition", "caption"), [("en", "**Table 1.** Errors by batch size."),
                                                ("zh", "**表 1**　各批量大小的误差。")])
def test_table_caption_is_numbered_above_its_table(mini_book, edition, caption):
    text = "Errors by batch size." if edition == "en" else "各批量大小的误差。"
    table = "| n | error |\n|---:|---:|\n| 2 | 0.5 |"
    source = chapter(mini_book, f":::{{table}} {text}\n:name: demo-table\n\n{table}\n:::\n", edition=edition)
    assert f"{caption}\n\n{table}" in markdown_of(source)


def test_glued_table_keeps_its_caption(mini_book):
    table = "| n | error |\n|---:|---:|\n| 2 | 0.5 |"
    body = ":::{table} Errors by batch size.\n:name: demo-table\n\n```{glue:md} table\n:format: myst\n```\n:::\n"
    source = chapter(mini_book, body,
                     values={"table": {"text/plain": "<IPython.core.display.Markdown object>", "text/markdown": table}})
    assert f"**Table 1.** Errors by batch size.\n\n{table}" in markdown_of(source)


def test_a_missing_figure_file_is_an_error_naming_it(mini_book):
    source = chapter(mini_book, "```{figure} figures/gone.svg\n:name: gone\n\nGone.\n```\n")
    with pytest.raises(sync_notebooks.TwinError, match="figures/gone.svg does not exist"):
        sync_notebooks.render_twin(source)


@pytest.mark.parametrize(("edition", "shown"), [("en", "see Fig. 2."), ("zh", "see 图 2.")])
def test_numref_shows_the_figure_number(mini_book, edition, shown):
    figure = "```{glue:figure} demo-plot\n:name: demo-plot\n\nA plot.\n```\n\n"
    source = chapter(mini_book, figure + "Then see {numref}`demo-plot`.\n", edition=edition)
    assert shown in markdown_of(source)


def test_glue_figure_keeps_its_caption_and_says_the_cell_above_draws_it(mini_book):
    body = ('```{code-cell} ipython3\nshow_figure("demo-plot")\n```\n\n'
            "```{glue:figure} demo-plot\n:name: demo-plot\n:alt: Two lines.\n\nLoss against steps.\n```\n")
    text = markdown_of(chapter(mini_book, body))
    assert "**Fig. 2.** Loss against steps. *(The code cell above draws this figure when you run it.)*" in text
    assert "Two lines." in text.partition("<details>")[2]


@pytest.mark.parametrize(("edition", "title"), [("en", "Warning"), ("zh", "警告")])
def test_admonition_becomes_a_block_quote_under_its_title(mini_book, edition, title):
    source = chapter(mini_book, "```{warning}\nMind the axis.\n\nTwice.\n```\n", edition=edition)
    assert f"> **{title}**\n>\n> Mind the axis.\n>\n> Twice." in markdown_of(source)


def test_label_lines_are_removed(mini_book):
    source = chapter(mini_book, "(demo-section)=\n## A section\n")
    assert "(demo-section)=" not in markdown_of(source) and "## A section" in markdown_of(source)


def test_ref_shows_its_text_without_a_link_when_no_online_book_is_configured(mini_book):
    body = "(demo-section)=\n## A section\n\nSee {ref}`that part <demo-section>` and {ref}`demo-section`.\n"
    source = chapter(mini_book, body)
    assert "See that part and A section." in markdown_of(source)


def test_ref_links_to_the_online_book_when_configured(mini_book):
    config = mini_book / "_config.yml"
    config.write_text(config.read_text() + "html:\n  baseurl: https://example.org/book/\n")
    source = chapter(mini_book, "(demo-section)=\n## A section\n\nSee {ref}`that part <demo-section>`.\n", edition="zh")
    assert "See [that part](https://example.org/book/zh/chapters/01_demo.html#demo-section)." in markdown_of(source)


def test_download_links_to_the_raw_file_in_the_configured_repository(mini_book):
    (mini_book / "exercises").mkdir()
    (mini_book / "exercises" / "ex1.ipynb").write_text("{}")
    (mini_book / "zh" / "exercises").symlink_to(mini_book / "exercises")
    source = chapter(mini_book, "- {download}`下载 ex1.ipynb <../exercises/ex1.ipynb>`\n", edition="zh")
    url = "https://raw.githubusercontent.com/example-org/example-book/trunk/exercises/ex1.ipynb"
    assert f"- [下载 ex1.ipynb]({url})" in markdown_of(source)


def test_literalinclude_of_a_python_object_includes_its_code(mini_book):
    (mini_book / "chapters" / "helpers.py").write_text(
        "import math\n\n\ndef half(x):\n    return x / 2\n\n\ndef double(x):\n    return 2 * x\n")
    source = chapter(mini_book, "```{literalinclude} helpers.py\n:language: python\n:pyobject: double\n```\n")
    assert "```python\ndef double(x):\n    return 2 * x\n```" in markdown_of(source)


def test_math_is_kept_as_written(mini_book):
    math = "$x_{l} = x_{l-1} + F(x)$ and\n\n$$\n\\begin{aligned} a &= b \\\\ c &= d \\end{aligned}\n$$\n"
    assert math.strip() in markdown_of(chapter(mini_book, math))


def test_links_to_other_chapters_point_to_their_twins(mini_book):
    chapter(mini_book, "Other.\n", stem="02_other")
    source = chapter(mini_book, "See [Chapter 2](02_other.md) and [the intro](../intro.md#top).\n")
    intro = "https://github.com/example-org/example-book/blob/trunk/intro.md"
    expected = f"See [Chapter 2](02_other.ipynb) and [the intro]({intro})."
    assert expected in markdown_of(source)


def test_code_cells_stay_as_jupytext_reads_them(mini_book):
    body = "```{code-cell} ipython3\n:tags: [remove-cell]\n\nx = {'a': 1}  # {glue:text}`not_a_role`\n```\n"
    source = chapter(mini_book, body)
    (code,) = cells(sync_notebooks.render_twin(source), "code")
    (expected,) = [c for c in jupytext.read(source, fmt="md:myst").cells if c.cell_type == "code"]
    assert (code.source, dict(code.metadata)) == (expected.source, dict(expected.metadata))


@pytest.mark.parametrize("markup", ["{term}`LayerNorm`", "```{mermaid}\ngraph LR\n```"])
def test_markup_the_converter_does_not_know_is_an_error_naming_it(mini_book, markup):
    source = chapter(mini_book, f"Some text.\n\n{markup}\n")
    with pytest.raises(sync_notebooks.TwinError, match=r"01_demo.md: the (role|directive) \{(term|mermaid)\}"):
        sync_notebooks.render_twin(source)


QUIZ = """:::{quiz}
question: Which axis does LayerNorm average over?
answers:
  - text: The batch axis.
    why: That is BatchNorm.
  - text: The features of one token.
    right: true
    why: Each token is normalized on its own.
:::
"""


@pytest.mark.parametrize(
    ("edition", "heading", "summary", "verdict"),
    [("en", "**Question 1.**", "<summary>Answer and explanations</summary>", "The right answer is **B**."),
     ("zh", "**第 1 题**", "<summary>答案与解析</summary>", "正确答案是 **B**。")],
)
def test_quiz_becomes_a_question_with_answers_and_a_folded_verdict(mini_book, edition, heading, summary, verdict):
    text = markdown_of(chapter(mini_book, QUIZ, edition=edition))
    shown, _, folded = text.partition("<details>")
    assert f"{heading}" in shown and "- **B.** The features of one token." in shown
    assert summary in folded and verdict in folded and "That is BatchNorm." in folded


def test_an_invalid_quiz_is_an_error_saying_what_is_wrong(mini_book):
    source = chapter(mini_book, QUIZ.replace("    right: true\n", ""))
    with pytest.raises(sync_notebooks.TwinError, match="exactly one right answer"):
        sync_notebooks.render_twin(source)


@pytest.mark.parametrize(("edition", "said"), [("en", "with Python 3.11.0 and PyTorch 9.9.9"),
                                               ("zh", "（Python 3.11.0，PyTorch 9.9.9）")])
def test_first_markdown_cell_notes_the_build_that_measured_the_values(mini_book, edition, said):
    cells = markdown_cells(sync_notebooks.render_twin(chapter(mini_book, "Text.\n", edition=edition)))
    assert cells[0]["source"].startswith("# Demo\n\n> **") and said in cells[0]["source"]


def test_note_names_the_sections_that_paste_timings(mini_book, monkeypatch):
    monkeypatch.setitem(sync_notebooks.TIMINGS, "01_demo", re.compile(r"ms_\w+"))
    body = "## Speed\n\n{glue:text}`ms_forward:.2f` ms.\n\n## Accuracy\n\n{glue:text}`acc:.2f`.\n"
    source = chapter(mini_book, body, values={"ms_forward": plain("3.0"), "acc": plain("0.9")})
    first = markdown_cells(sync_notebooks.render_twin(source))[0]["source"]
    note = next(line for line in first.splitlines() if line.startswith("> "))
    assert "The timings in the section “Speed” depend on the machine" in note and "Accuracy" not in note


def test_sync_check_reports_a_stale_twin(tmp_path):
    source = tmp_path / "chapters" / "demo.md"
    source.parent.mkdir()
    source.write_text(FRONT_MATTER + "# Demo\n\n```{code-cell} ipython3\n1 + 1\n```\n")
    sync_notebooks.write_twin(source)
    assert sync_notebooks.stale_twins(tmp_path) == []
    source.write_text(source.read_text().replace("1 + 1", "2 + 2"))
    assert sync_notebooks.stale_twins(tmp_path) == [sync_notebooks.twin_of(source)]


# ---- --measure, on a small executed chapter ----------------------------------------------------


@pytest.fixture
def executed(mini_book):
    """A chapter pasting one value, and a build folder whose executed notebook glued it."""
    source = chapter(mini_book, "```{code-cell} ipython3\nglue('gain', 0.5)\n```\n\nGain {glue:text}`gain:.1f`.\n")
    folder = mini_book / "_build" / "jupyter_execute" / "chapters"
    folder.mkdir(parents=True)
    notebook = jupytext.read(source, fmt="md:myst")
    notebook.metadata["language_info"] = {"version": "3.11.0"}
    (folder / "01_demo.ipynb").write_text(jupytext.writes(notebook, fmt="ipynb"))
    glued = {"gain": {"data": {"text/plain": "0.5"}}, "unused": {"data": {"text/plain": "1"}}}
    (folder / "01_demo.glue.json").write_text(json.dumps(glued))
    return source


def test_measure_keeps_the_values_the_chapters_paste(mini_book, executed):
    measured = sync_notebooks.measure(root=mini_book)
    assert measured["chapters"] == {"01_demo": {"gain": {"text/plain": "0.5"}}}
    assert measured["environment"]["python"] == "3.11.0"


def test_measure_refuses_a_build_of_other_code(mini_book, executed):
    executed.write_text(executed.read_text().replace("glue('gain', 0.5)", "glue('gain', 0.25)"))
    with pytest.raises(sync_notebooks.TwinError, match="older than the chapter.*python -m tools.book_build"):
        sync_notebooks.measure(root=mini_book)


def test_measured_values_file_reads_back_as_written(mini_book, executed):
    measured = sync_notebooks.measure(root=mini_book)
    sync_notebooks.write_measured(measured, mini_book)
    assert sync_notebooks.load_measured(mini_book) == measured
