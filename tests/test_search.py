"""Finding a page in either edition: the search page, the glossary's other wordings, the language switch.

A reader's query is typed into the book's own search page (``search.html?q=...``) in Debian's
Chromium, started as in test_browser.py, on the session's strict build; the test waits until
Sphinx's search says it has finished and reads the pages it lists. The Chinese edition's index is
split into words by jieba, with the glossary's terms as its dictionary, and the other wordings of a
term readers type (``also`` and ``also_en`` in zh/glossary.yml) are index entries on the page that
introduces the term (_ext/bilingual.py).
"""

import json
import re
from urllib.parse import quote, urlsplit

import pytest
import yaml
from tests.conftest import REPO
from tests.test_browser import browser, site, visit  # noqa: F401 (fixtures)

GLOSSARY = yaml.safe_load((REPO / "zh" / "glossary.yml").read_text(encoding="utf-8"))["terms"]
CH1, CH2, CH3, CH4, CH5 = (f"chapters/{name}" for name in (
    "01_residual_connections", "02_layer_normalization", "03_batchnorm_vs_layernorm",
    "04_pre_norm_vs_post_norm", "05_rmsnorm"))

# (query, a page it must find): what a reader of each edition types, and where it should lead.
CHINESE_QUERIES = [
    ("层归一化", CH2),
    ("批量", CH3),
    ("均方根", CH5),
    ("梯度", CH1),
    ("前置归一化", CH4),
    ("后置归一化", CH4),
    ("批归一化", CH3),
    ("残差连接", CH1),
    ("层规范化", CH2),  # d2l-zh's wordings, which this book does not use
    ("批量规范化", CH3),
    ("层标准化", CH2),
    ("RMSNorm", CH5),
]
ENGLISH_QUERIES = [
    ("layer normalization", CH2),
    ("batch", CH3),
    ("root mean square", CH5),
    ("gradient", CH1),
    ("pre-norm", CH4),
    ("batch normalization", CH3),
    ("layer norm", CH2),
    ("batch norm", CH3),
    ("pre-LN", CH4),
    ("skip connection", CH1),
]
SEARCH_DONE = "() => document.querySelector('#search-results .search-summary')?.textContent.trim()"
FOUND_PAGES = """
() => [...document.querySelectorAll('#search-results ul.search li a')]
  .map(a => new URL(a.href).pathname)
"""


@pytest.fixture(scope="module")
def search(visit, site):
    """search(edition, query): the pages (like ``chapters/02_layer_normalization``) the search page lists, best first.

    ``edition`` is "" (English) or "zh/". One browser tab per edition, reused for every query.
    """
    tabs = {}

    def found(edition, query):
        if edition not in tabs:
            tabs[edition] = visit(f"{edition}search.html").page
        page = tabs[edition]
        page.goto(f"{site}{edition}search.html?q={quote(query)}")
        page.wait_for_function(SEARCH_DONE)
        root = urlsplit(site + edition).path
        return [path.removeprefix(root).removesuffix(".html") for path in page.evaluate(FOUND_PAGES)]

    return found


@pytest.mark.parametrize(("query", "expected"), CHINESE_QUERIES, ids=[q for q, _ in CHINESE_QUERIES])
def test_a_chinese_query_finds_the_chapter_about_it(search, query, expected):
    assert expected in search("zh/", query)


@pytest.mark.parametrize(("query", "expected"), ENGLISH_QUERIES, ids=[q for q, _ in ENGLISH_QUERIES])
def test_an_english_query_finds_the_chapter_about_it(search, query, expected):
    assert expected in search("", query)


@pytest.mark.parametrize(("edition", "query", "expected"), [("zh/", "层规范化", CH2), ("", "pre-LN", CH4)])
def test_a_wording_the_book_does_not_use_leads_first_to_the_chapter_that_introduces_the_term(
        search, edition, query, expected):
    assert search(edition, query)[0] == expected


# ---- the search index itself (read from the built site: no browser) -------------------------


def search_index(path):
    """The object Sphinx's searchindex.js hands to Search.setIndex."""
    text = path.read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1:text.rindex(")")])


def wordings_to_find(chinese):
    """(wording, page) for every wording of a term with ``introduced_in``, in one edition."""
    from bilingual import search_entries  # _ext/ is on pytest's pythonpath (pyproject.toml)

    return [(wording, term["introduced_in"]) for term in GLOSSARY if "introduced_in" in term
            for wording in search_entries(term, chinese)]


@pytest.mark.parametrize(("edition", "chinese"), [("", False), ("zh", True)], ids=["English", "Chinese"])
def test_every_wording_of_a_glossary_term_is_a_main_index_entry_of_the_page_that_introduces_it(
        book, edition, chinese):
    index = search_index(book.html / edition / "searchindex.js")
    missing = []
    for wording, page in wordings_to_find(chinese):
        entries = index["indexentries"].get(wording.lower(), [])
        if not any(index["docnames"][file] == page and is_main for file, _anchor, is_main in entries):
            missing.append(f"{wording} -> {page}")
    assert missing == []


def test_the_chinese_index_holds_the_glossary_terms_as_whole_words(book):
    terms = search_index(book.html / "zh" / "searchindex.js")["terms"]
    chinese_terms = [t["zh"] for t in GLOSSARY if re.fullmatch(r"[\u4e00-\u9fff]{2,}", t["zh"])]
    assert [term for term in chinese_terms if term not in terms] == []


def test_every_term_is_introduced_on_a_page_of_both_editions_that_uses_it():
    from bilingual import wordings

    wrong = []
    for term in (t for t in GLOSSARY if "introduced_in" in t):
        chinese = (REPO / "zh" / f"{term['introduced_in']}.md").read_text(encoding="utf-8")
        english = (REPO / f"{term['introduced_in']}.md").read_text(encoding="utf-8").lower()
        english_names = wordings(term["en"]) + re.findall(r"\((.*?)\)", term["en"])  # "(LayerNorm)" too
        if not all(w in chinese for w in wordings(term["zh"])) or not any(n.lower() in english for n in english_names):
            wrong.append(f"{term['en']}: {term['introduced_in']}")
    assert wrong == []


# ---- the language switch keeps the reader's place ----------------------------------------------


def switch_to_the_other_edition(page):
    page.locator("a.edition-switch").click()
    page.wait_for_load_state("load")
    return page


@pytest.mark.parametrize("edition, twin", [("", "zh/"), ("zh/", "")], ids=["to Chinese", "to English"])
def test_the_switch_lands_on_the_same_section_of_the_twin_page(visit, site, edition, twin):
    page = visit(f"{edition}{CH2}.html#the-equation").page
    switch_to_the_other_edition(page)
    assert page.url == f"{site}{twin}{CH2}.html#the-equation"
    heading = page.locator("#the-equation h2")
    assert heading.count() == 1 and heading.is_visible()
    assert page.evaluate("() => document.querySelector('#the-equation').getBoundingClientRect().top") < 150


@pytest.mark.parametrize("edition, twin, query", [("", "zh/", "layer norm"), ("zh/", "", "层归一化")],
                         ids=["to Chinese", "to English"])
def test_the_switch_on_the_search_page_keeps_the_query(visit, site, edition, twin, query):
    page = visit(f"{edition}search.html?q={quote(query)}").page
    switch_to_the_other_edition(page)
    assert urlsplit(page.url).path == urlsplit(f"{site}{twin}search.html").path
    assert page.locator("input[name=q]").first.input_value() == query
