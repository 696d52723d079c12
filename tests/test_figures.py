"""Every figure of every page has a numbered caption, a label and one line of alt text.

Figures come two ways: diagrams, written as ``{figure}`` directives, and plots drawn by code
cells, glued with ``show_figure(name)`` and pasted under their caption by a ``{glue:figure}``
directive in the prose (so the Chinese edition, which shares the code cells, has its own captions). A ``{figure}`` option whose value runs onto a second line ends the option list
early: the alt text is cut there, and the rest of it, ``:width:`` included, becomes the caption.
The sources are checked for that mistake, the built pages for what a reader gets.
"""

import json
import re

import pytest
import yaml
from bs4 import BeautifulSoup
from tests.conftest import REPO

FIGURE_BLOCK = re.compile(r"^```\{(?:glue:)?figure\}[^\n]*\n(.*?)^```$", re.M | re.S)
OPTION = re.compile(r"^:[a-z_-]+:( .*)?$")
OPTION_IN_TEXT = re.compile(r":(alt|width|height|name|align|class|scale|target|figwidth|figclass):")


def pages_in_toc():
    """intro.md and every chapter of _toc.yml, as source paths."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = [toc["root"]] + [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    return [REPO / f"{name}.md" for name in files]


PAGES = pages_in_toc()


def spilled_options(source_text):
    """Lines of a {figure} directive's option block that are not `:name: value` lines."""
    bad = []
    for body in FIGURE_BLOCK.findall(source_text):
        options = body.split("\n\n", 1)[0].splitlines()
        bad += [line for line in options if not OPTION.match(line)]
    return bad


@pytest.mark.parametrize("page", PAGES + [REPO / "zh" / p.relative_to(REPO) for p in PAGES],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_figure_directive_options_each_fit_on_one_line(page):
    assert spilled_options(page.read_text()) == []


def test_an_alt_text_running_onto_a_second_line_is_caught():
    source = "```{figure} a.svg\n:alt: A long description that goes\n  on here.\n:width: 100%\n\nCaption.\n```\n"
    assert spilled_options(source) == ["  on here."]


# ---- the built pages ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built_pages(book):
    """source page -> parsed HTML of its built page."""
    return {
        page: BeautifulSoup((book.html / page.relative_to(REPO).with_suffix(".html")).read_text(), "html.parser")
        for page in PAGES
    }


def content_images(html):
    """The images of the page's article: figures and plots, not the theme's logos and buttons."""
    return html.select("article.bd-article img")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_image_sits_in_a_numbered_captioned_figure(built_pages, page):
    for img in content_images(built_pages[page]):
        figure = img.find_parent("figure")
        assert figure is not None, f"{img['src']} is not a figure"
        number = figure.select_one("figcaption .caption-number")
        assert number is not None and re.fullmatch(r"Fig\. \d+", number.get_text(strip=True)), img["src"]
        assert figure.select_one("figcaption .caption-text").get_text(strip=True), f"{img['src']}: empty caption"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_figure_has_a_name_to_refer_to(built_pages, page):
    for figure in built_pages[page].select("article.bd-article figure"):
        assert not re.fullmatch(r"id\d+", figure.get("id", "id0")), f"unnamed figure: {figure.get_text()[:60]}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_image_has_one_line_of_alt_text(built_pages, page):
    for img in content_images(built_pages[page]):
        alt = img.get("alt", "")
        assert len(alt.split()) >= 5, f"{img['src']}: alt text {alt!r} says next to nothing"
        assert "\n" not in alt, f"{img['src']}: alt text spans lines"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_no_caption_shows_a_directive_option(built_pages, page):
    for caption in built_pages[page].select("article.bd-article figcaption"):
        assert not OPTION_IN_TEXT.search(caption.get_text()), caption.get_text()[:120]


def executed_notebooks(book):
    chapters = [p for p in PAGES if p.parent.name == "chapters"]
    return {p.stem: json.loads((book.executed / "chapters" / f"{p.stem}.ipynb").read_text()) for p in chapters}


SHOW_FIGURE = re.compile(r'^show_figure\("([\w-]+)"\)$', re.M)


def test_every_plotting_cell_shows_one_image_and_glues_it_for_its_captioned_figure(book):
    """show_figure(name): the notebook (and Colab) shows the plot; the book pastes it under its caption."""
    cells = 0
    for stem, notebook in executed_notebooks(book).items():
        glued = json.loads((book.executed / "chapters" / f"{stem}.glue.json").read_text())
        for cell in notebook["cells"]:
            for name in SHOW_FIGURE.findall("".join(cell["source"])):
                cells += 1
                images = [o for o in cell["outputs"] if "image/png" in o.get("data", {})]
                others = [o for o in cell["outputs"] if o.get("output_type") != "stream" and o not in images]
                assert len(images) == 1 and others == [], f"{stem}: {name}"
                assert any(mime.startswith("image/") for mime in glued[name]["data"]), f"{stem}: {name} not glued"
                assert "remove-output" in cell["metadata"].get("tags", []), f"{stem}: {name} shown twice in the book"
    assert cells >= 30


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_no_caption_or_alt_text_lives_in_a_code_cell(page):
    """Captions are prose: in a {glue:figure} directive each edition writes its own; code cells are shared."""
    assert not re.search(r"^:?\s*(caption|alt):", "".join(re.findall(r"^```\{code-cell\}.*?^```$", page.read_text(),
                                                                  re.M | re.S)), re.M)
