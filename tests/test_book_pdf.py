"""The book on paper: the print stylesheet (_static/print.css) and the whole-book PDF of each edition.

The PDFs are made by tools/book_pdf.py from the session's strict build, once for this module, into a
temporary folder, and read back with pypdf the way a reader's viewer reads them: their text, their
fonts, their bookmarks and their links. The print stylesheet is also checked in Chromium with print
media emulated, on chapter 2 (its explorer, hidden code cells and long code lines).
"""

import functools
import posixpath
import re

import pytest
from bs4 import BeautifulSoup
from pypdf import PdfReader
from tests.test_browser import EXPLORER_PAGE, browser, site, visit  # noqa: F401 (fixtures)
from tools.book_pdf import EDITIONS, CHINESE, book_pdfs

# A4 less 15 mm side margins, in CSS pixels at 100 % scale: narrower than the column of the book's PDF
# (printed at 85 %) and than what a browser's Print gives with its default margins.
PRINT_WIDTH = round((210 - 2 * 15) / 25.4 * 96)


def squeezed(text: str) -> str:
    """``text`` without whitespace: a line of code that wraps in print, or a title set on two lines,
    still reads whole."""
    return re.sub(r"\s+", "", text)


def heading_text(heading) -> str:
    for link in heading.select(".headerlink"):
        link.decompose()
    return " ".join(heading.get_text().split())


# ---- the PDFs --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pdfs(book, chromium, tmp_path_factory):
    """Both editions' PDFs, made from the session's build: {edition: path}."""
    return book_pdfs(book.html, tmp_path_factory.mktemp("pdf"), chromium=chromium)


@pytest.fixture(scope="module", params=EDITIONS, ids=lambda edition: edition.language)
def edition(request):
    return request.param


@pytest.fixture(scope="module")
def pdf(pdfs, edition) -> PdfReader:
    return PdfReader(pdfs[edition])


@pytest.fixture(scope="module")
def text(pdf):
    """text(number): the squeezed text of page ``number`` (from 0) of the edition's PDF.

    pypdf reads about ten pages a second here, so the tests read only the pages they need.
    """
    return functools.cache(lambda number: squeezed(pdf.pages[number].extract_text()))


@pytest.fixture(scope="module")
def bookmarks(pdf) -> list:
    """The PDF's top-level bookmarks, one per page of the table of contents."""
    return [item for item in pdf.outline if not isinstance(item, list)]


@pytest.fixture(scope="module")
def starts(pdf, bookmarks) -> list[int]:
    """Where each top-level bookmark leads: the first PDF page of each page of the book."""
    return [pdf.get_destination_page_number(item) for item in bookmarks]


@pytest.fixture(scope="module")
def pages(book, edition) -> dict[str, BeautifulSoup]:
    """The edition's pages in the built site, in the order of its table of contents: {path: page}."""
    return {path: BeautifulSoup((book.html / path).read_text(), "html.parser") for path in edition.pages()}


@pytest.fixture(scope="module")
def titles(pages) -> list[str]:
    return [heading_text(page.select_one("article.bd-article h1")) for page in pages.values()]


def test_each_page_has_a_bookmark_named_by_its_title_in_toc_order(bookmarks, titles):
    assert [item.title for item in bookmarks] == titles


def test_every_page_title_is_printed_where_its_bookmark_leads(text, starts, titles):
    assert [title for title, start in zip(titles, starts) if squeezed(title) not in text(start)] == []


def as_shown(title: str) -> re.Pattern:
    """A heading of the built HTML as the browser shows it: MathJax typesets its ``\\(...\\)``."""
    return re.compile(".+?".join(map(re.escape, re.split(r"\\\(.*?\\\)", title))))


def test_each_bookmark_holds_its_pages_sections(pdf, bookmarks, pages):
    below = {}  # index of a top-level bookmark -> titles of the bookmarks right under it
    for index, item in enumerate(pdf.outline):
        if isinstance(item, list):
            below[bookmarks.index(pdf.outline[index - 1])] = [i.title for i in item if not isinstance(i, list)]
    for index, page in enumerate(pages.values()):
        sections = [heading_text(h) for h in page.select("article.bd-article section > h2")]
        bookmarked = below.get(index, [])
        assert len(bookmarked) == len(sections) and all(map(re.fullmatch, map(as_shown, sections), bookmarked))


def test_no_code_line_of_chapter_2_is_cut_off(text, starts, pages, edition):
    """Every line of every code cell and output chapter 2 shows is in the PDF, though many are wider
    than the printed column."""
    chapter = edition.pages().index(f"{edition.folder}{EXPLORER_PAGE}")
    printed = "".join(text(number) for number in range(starts[chapter], starts[chapter + 1]))
    blocks = [block for block in list(pages.values())[chapter].select("article.bd-article pre")
              if block.find_parent("details", class_="hide") is None]  # a folded cell's code is not shown
    lines = [line for block in blocks for line in block.get_text().splitlines() if line.strip()]
    assert len(lines) > 300
    assert [line for line in lines if squeezed(line) not in printed] == []


def test_pages_are_numbered_in_the_footer_after_the_title_page(pdf, text, starts, edition):
    footer = squeezed(edition.title) + "·{}"
    sampled = [*starts, len(pdf.pages) - 1]
    assert [number for number in sampled if not text(number).endswith(footer.format(number + 1))] == []
    assert not text(0).endswith(footer.format(1))


def test_links_to_the_book_stay_inside_the_pdf(pdf):
    """No link leads to the server the pages were printed from."""
    local = [str(annotation.get_object()["/A"]["/URI"])
             for page in pdf.pages for annotation in page.get("/Annots", [])
             if "/URI" in annotation.get_object().get("/A", {})
             and "127.0.0.1" in str(annotation.get_object()["/A"]["/URI"])]
    assert local == []


def test_links_within_a_page_lead_into_that_page(pdf, starts):
    """Every chapter has a "References" section: a chapter's link to it leads to its own."""
    names = pdf.named_destinations
    astray = []
    for start, end in zip(starts, [*starts[1:], len(pdf.pages)]):
        for number in range(start, end):
            for annotation in pdf.pages[number].get("/Annots", []):
                annotation = annotation.get_object()
                if "/Dest" in annotation:
                    target = pdf.get_destination_page_number(names[str(annotation["/Dest"])])
                    if not start <= target < end:
                        astray.append((number + 1, str(annotation["/Dest"]), target + 1))
    assert astray == []


def fonts_of(resources, found: dict) -> None:
    """Every font of ``resources`` and of the forms it draws: {name: glyphs embedded}."""
    resources = resources.get_object()
    for font in resources.get("/Font", {}).values():
        font = font.get_object()
        parts = [font] + [part.get_object() for part in font.get("/DescendantFonts", [])]
        descriptors = [part["/FontDescriptor"].get_object() for part in parts if "/FontDescriptor" in part]
        name = str(descriptors[0]["/FontName"] if descriptors else font.get("/BaseFont"))
        has_program = any(key in d for d in descriptors for key in ("/FontFile", "/FontFile2", "/FontFile3"))
        drawn_in_pdf = font.get("/Subtype") == "/Type3" and len(font.get("/CharProcs", {})) > 0
        found[name] = found.get(name, True) and (has_program or drawn_in_pdf)
    for form in resources.get("/XObject", {}).values():
        form = form.get_object()
        if form.get("/Subtype") == "/Form" and "/Resources" in form:
            fonts_of(form["/Resources"], found)


def test_chinese_glyphs_are_embedded(pdfs):
    """The Chinese PDF draws its Chinese text with glyphs it carries: a font program, or Chromium's
    Type 3 font whose glyph outlines are in the PDF (how Chromium embeds the CFF-based Noto CJK)."""
    pdf, found = PdfReader(pdfs[CHINESE]), {}
    for bookmark in pdf.outline:  # the first page of each page of the book: body text and headings
        if not isinstance(bookmark, list):
            fonts_of(pdf.pages[pdf.get_destination_page_number(bookmark)]["/Resources"], found)
    cjk = {name: embedded for name, embedded in found.items() if "CJK" in name}
    assert cjk and all(cjk.values()), found


def test_landing_page_links_to_its_pdf(pages, edition):
    landing = edition.pages()[0]
    links = [a["href"] for a in next(iter(pages.values())).select("article.bd-article a[href]")]
    assert posixpath.relpath(edition.pdf, posixpath.dirname(landing) or ".") in links


# ---- the print stylesheet in Chromium ----------------------------------------------------------


@pytest.fixture(scope="module")
def printed(visit):
    """Chapter 2 as Chromium lays it out for print, at the width of an A4 page."""
    page = visit(EXPLORER_PAGE, width=PRINT_WIDTH).page
    page.emulate_media(media="print")
    return page


def shown(page, selector: str) -> list[bool]:
    return [element.is_visible() for element in page.locator(selector).all()]


def test_code_cell_toggles_do_not_print(printed):
    toggles = shown(printed, "article details.hide > summary")
    assert toggles and not any(toggles)


def test_explorer_sliders_and_buttons_do_not_print(printed):
    controls = shown(printed, ".ane-sliders, .ane-new, .ane-button[aria-pressed='false']")
    assert controls and not any(controls)


def test_pressed_explorer_button_prints_in_its_colours(printed):
    button = printed.locator(".ane-button[aria-pressed='true']")
    style = button.evaluate("b => { const s = getComputedStyle(b); return [s.printColorAdjust, s.backgroundColor]; }")
    assert button.is_visible() and style[0] == "exact" and style[1] not in ("transparent", "rgba(0, 0, 0, 0)")


def test_explorer_charts_print_in_their_colours(printed):
    adjust = printed.locator(".ane-svg").evaluate_all("svgs => svgs.map(s => getComputedStyle(s).printColorAdjust)")
    assert adjust and set(adjust) == {"exact"}


def test_no_code_block_is_wider_than_the_page(printed):
    wide = printed.locator("article pre").evaluate_all(
        "blocks => blocks.filter(b => b.scrollWidth > b.clientWidth + 1).map(b => b.textContent.slice(0, 60))")
    assert wide == []
