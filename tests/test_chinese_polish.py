"""The Chinese edition reads as one book: one wording per term and heading, Chinese typesetting, Chinese interface.

The first tests read the Chinese sources (prose only: code cells are the English ones); the others
read the pages of the session's strict build, and two open them in Debian's Chromium (started as in
test_browser.py), where the page's language picks what CSS shows.
"""

import re
from collections import defaultdict
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup, Comment
from tests.conftest import REPO
from tests.test_browser import browser, site, visit  # noqa: F401 (fixtures)

from tools import editions

PAGES = editions.english_pages()  # intro, the chapters and the glossary, as paths of the English sources
TEXT_PAGES = [page for page in PAGES if page.name != "glossary.md"]  # the glossary names the wordings to avoid
CJK = "\u4e00-\u9fff"
FULL_WIDTH_PUNCTUATION = "。，；：！？、）"
REFERENCE = r"\{(?:numref|eq)\}`[^`]+`"


def chinese_prose(page):
    return editions.Page.read(REPO / "zh" / page).prose


def sentences(page):
    """The Chinese prose a reader reads (editions.readable), without the reference lists, which stay as published."""
    lines = editions.readable(chinese_prose(page)).splitlines()
    return "\n".join(line for line in lines if not (line.startswith("- ") and "*" in line))


def headings(text):
    return re.findall(r"^#{1,6} (.+)$", text, re.M)


# ---- the sources ----------------------------------------------------------------------------


def test_a_section_that_recurs_in_the_english_chapters_has_one_chinese_heading():
    """"Check your understanding" is 自测题 in every chapter, "Exercise" is 练习, and so on."""
    chinese_for = defaultdict(set)  # English heading -> its Chinese twins
    for page in PAGES:
        english = headings(editions.Page.read(REPO / page).prose)
        for en, zh in zip(english, headings(chinese_prose(page)), strict=True):
            chinese_for[en].add(zh)
    assert {en: zh for en, zh in chinese_for.items() if len(zh) > 1} == {}


@pytest.mark.parametrize("page", TEXT_PAGES, ids=str)
def test_code_and_self_check_cells_are_called_by_their_glossary_names(page):
    short = re.findall(r"(?:代码|自检)单元(?!格)", chinese_prose(page))
    assert short == []


ENGLISH_IN_PARENTHESES_ONLY = ["dropout", "massive activations"]


@pytest.mark.parametrize("page", TEXT_PAGES, ids=str)
def test_an_english_term_with_a_chinese_name_only_follows_it_in_parentheses(page):
    """暂退法（dropout）, never "dropout" alone in a Chinese sentence (code spans such as `dropout=0.0` aside)."""
    prose = re.sub(r"（[^（）]*）", "", sentences(page))
    assert [term for term in ENGLISH_IN_PARENTHESES_ONLY if term in prose.lower()] == []


@pytest.mark.parametrize("page", TEXT_PAGES, ids=str)
def test_no_space_separates_a_figure_reference_from_the_chinese_before_it(page):
    """在图 6 中, not 在 图 6 中 (Sphinx writes the reference as 图 6)."""
    assert re.findall(rf".{{0,6}}[{CJK}{FULL_WIDTH_PUNCTUATION}] {REFERENCE}", chinese_prose(page)) == []


CITATION_SLIPS = re.compile(
    r"[A-Z][\w'-]+(?: et al\.)? \(\d{4}[a-z]?\)"  # Wang et al. (2022)  -> Wang et al.（2022）
    r"|[A-Z][\w'-]+ (?:and|&) [A-Z][\w'-]+(?:,| ?[（(]) ?\d{4}"  # Ioffe and Szegedy (2015) -> Ioffe 和 Szegedy（2015）
    r"|et al\.,? \d{4}"                           # (He et al., 2016)     -> （He et al.，2016）
)


@pytest.mark.parametrize("page", TEXT_PAGES, ids=str)
def test_citations_have_one_style_with_full_width_punctuation(page):
    """Wang et al.（2022） in a sentence, （Wang et al.，2022） after one, Ioffe 和 Szegedy（2015）."""
    assert CITATION_SLIPS.findall(sentences(page)) == []


@pytest.mark.parametrize("page", TEXT_PAGES, ids=str)
def test_no_space_follows_full_width_punctuation_in_the_sources(page):
    slips = re.findall(rf".{{0,8}}[{FULL_WIDTH_PUNCTUATION}]\**\x20+\S.{{0,4}}", chinese_prose(page))
    assert slips == []


# ---- the built pages ------------------------------------------------------------------------


def reading_text(document):
    """The text of a page's article as a reader reads it: without code, scripts, styles and hidden English."""
    article = document.select_one("article.bd-article")
    return "".join(text for text in article.find_all(string=True) if not isinstance(text, Comment)
                   and not any(parent.name in ("pre", "script", "style") or parent.get("lang") == "en"
                               for parent in text.parents))


@pytest.fixture(scope="module")
def chinese_pages(book, zh_book):
    """page path (like ``chapters/02_layer_normalization.html``) -> its Chinese page, parsed."""
    return {str(page.with_suffix(".html")): BeautifulSoup(
        (book.html / "zh" / page.with_suffix(".html")).read_text(encoding="utf-8"), "html.parser") for page in PAGES}


@pytest.fixture(scope="module")
def chinese_texts(chinese_pages):
    """page path -> the text of its Chinese article."""
    return {page: reading_text(document) for page, document in chinese_pages.items()}


def test_chinese_captions_start_with_the_number_and_a_full_width_colon(chinese_pages):
    numbers = [span.get_text() for page in chinese_pages.values() for span in page.select(".caption-number")]
    assert numbers and [n for n in numbers if not re.fullmatch(r"[图表] \d+：", n)] == []


def test_no_curly_apostrophe_stands_in_a_chinese_page(chinese_texts):
    """A CJK font draws ’ full width: Bessel’ s. The Chinese edition keeps straight quotes."""
    curly = {page: re.findall(r".{0,10}[‘’].{0,5}", text) for page, text in chinese_texts.items()}
    assert {page: found for page, found in curly.items() if found} == {}


def test_no_space_follows_full_width_punctuation_in_a_chinese_page(chinese_texts):
    """Glued sentences included: the sources alone do not show what a glued phrase ends with."""
    slips = {page: re.findall(rf".{{0,8}}[{FULL_WIDTH_PUNCTUATION}][ \u00a0]+\S.{{0,4}}", text)
             for page, text in chinese_texts.items()}
    assert {page: found for page, found in slips.items() if found} == {}


def test_code_cell_toggles_are_labelled_in_chinese(chinese_pages):
    toggles = [p.get_text(strip=True) for page in chinese_pages.values() for p in page.select("details summary p")]
    assert toggles and set(toggles) <= {"显示代码", "隐藏代码"}


# ---- what CSS picks by the page's language (Chromium) -----------------------------------------


@pytest.fixture(scope="module")
def without_javascript(browser, site):
    """open(path, width): a page in a tab with JavaScript off (the explorer's stand-in stays), localhost only."""
    context = browser.new_context(java_script_enabled=False)
    context.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname == "127.0.0.1"
                  else route.abort())

    def open_page(path, width):
        page = context.new_page()
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(site + path, wait_until="load")
        return page

    yield open_page
    context.close()


@pytest.mark.parametrize("edition, language", [("", "en"), ("zh/", "zh-CN")], ids=["English", "Chinese"])
def test_the_explorers_stand_in_speaks_the_language_of_its_page(without_javascript, edition, language):
    page = without_javascript(f"{edition}chapters/02_layer_normalization.html", 1280)
    shown = page.evaluate("""() => [...document.querySelectorAll('.ane-fallback [lang]')]
        .filter(el => el.offsetParent !== null).map(el => el.lang)""")
    assert shown and set(shown) == {language}


def test_the_wide_table_notice_is_chinese_on_chinese_pages(visit):
    """The theme marks a table box that scrolls with tabindex="0" (from its script); the notice is CSS."""
    page = visit("zh/chapters/05_rmsnorm.html", width=390).page
    page.wait_for_selector('.pst-scrollable-table-container[tabindex="0"]', state="attached")
    notices = page.evaluate("""() => [...document.querySelectorAll('.pst-scrollable-table-container[tabindex="0"]')]
        .map(box => getComputedStyle(box, '::before').content)""")
    assert notices and all("表格" in notice and "wider" not in notice for notice in notices)
