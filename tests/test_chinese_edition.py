"""The built Chinese edition: the same pages, figures, quizzes and numbers as the English one, in Chinese.

Both editions come from the session's strict build (``editions`` in conftest.py): the English site
at ``book.html``, the Chinese one beside it in ``book.html / "zh"``.
"""

import re
from collections import Counter

import pytest
import yaml
from bs4 import BeautifulSoup
from tests.conftest import REPO
from tests.test_built_site import repo_path_of_launch_link

from tools import editions
from tools.local_site import built_pages

BOOK_PAGES = [page.with_suffix(".html") for page in editions.english_pages()]
CJK = re.compile(r"[\u4e00-\u9fff]")
# Glued values that are words of code, not of English: Python's booleans and float specials.
# Glued values that are words of code or names, not English: Python's booleans and float specials,
# dtypes, and the names of methods and authors, which the Chinese text uses as they are.
NAMES = {"True", "False", "inf", "nan", "float32", "float16", "bfloat16", "LayerNorm", "RMSNorm",
         "BatchNorm", "GroupNorm", "DeepNorm", "ReZero", "LayerScale", "Fixup", "DyT", "Adam", "Xiong"}


def soup(path):
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


@pytest.fixture(scope="module")
def site(book, zh_book):
    return book.html


@pytest.fixture(scope="module")
def pairs(site):
    """page path -> (English document, Chinese document)."""
    return {page: (soup(site / page), soup(site / "zh" / page)) for page in BOOK_PAGES}


def article(document):
    return document.select_one("article.bd-article")


def all_pages(site):
    """Every built page of both editions, without the theme's templates and the redirecting index.html."""
    return [site / page for page in built_pages(site)]


def test_the_chinese_build_runs_no_notebook(zh_book):
    """Every chapter's outputs come from the English build's execution cache."""
    assert "Executing notebook" not in zh_book.log
    assert zh_book.log.count("Using cached notebook") == len([p for p in BOOK_PAGES if p.parts[0] == "chapters"])


def test_the_chinese_build_has_no_warning(zh_book):
    assert re.findall(r"WARNING:.*", zh_book.log) == []


def test_every_page_declares_the_language_of_its_edition(site):
    wrong = []
    for path in all_pages(site):
        expected = "zh-CN" if path.relative_to(site).parts[0] == "zh" else "en"
        if soup(path).html.get("lang") != expected:
            wrong.append(str(path.relative_to(site)))
    assert wrong == []


def edition_link(document):
    link = document.select_one("a.edition-switch")
    return link["href"] if link else None


def test_every_page_links_to_the_same_page_in_the_other_edition_and_back(site):
    broken = []
    for path in all_pages(site):
        href = edition_link(soup(path))
        target = (path.parent / href).resolve() if href else None
        if target is None or not target.is_file():
            broken.append(f"{path.relative_to(site)} -> {href}")
        elif (target.parent / edition_link(soup(target))).resolve() != path.resolve():
            broken.append(f"{path.relative_to(site)} -> {href} does not link back")
    assert broken == []


def test_the_glossary_page_has_an_english_twin_with_the_same_table(site):
    english, chinese = soup(site / "glossary.html"), soup(site / "zh" / "glossary.html")
    assert edition_link(chinese) == "../glossary.html"
    assert len(english.select("table.glossary-table tbody tr")) == len(chinese.select("table.glossary-table tbody tr"))


@pytest.mark.parametrize("page", BOOK_PAGES, ids=str)
def test_every_section_has_the_same_anchor_in_both_editions(pairs, page):
    """So the language switch keeps the reader's section (_ext/bilingual.py gives Chinese sections the English ids)."""
    english, chinese = pairs[page]

    def anchors(document):
        return [section["id"] for section in article(document).select("section[id]")]

    assert anchors(chinese) == anchors(english)


def test_the_switch_names_the_other_language_in_that_language(pairs):
    english, chinese = pairs[BOOK_PAGES[1]]
    assert english.select_one("a.edition-switch").get_text(strip=True) == "中文"
    assert chinese.select_one("a.edition-switch").get_text(strip=True) == "English"


@pytest.mark.parametrize("page", BOOK_PAGES, ids=str)
def test_both_editions_show_the_same_figures_in_the_same_order(pairs, page):
    """The generated plots are the same files: one measurement, two captions."""
    english, chinese = pairs[page]

    def figures(document):
        return [(figure.get("id"), figure.img["src"]) for figure in article(document).select("figure")]

    assert figures(chinese) == figures(english)


@pytest.mark.parametrize("page", BOOK_PAGES, ids=str)
def test_figure_captions_and_alt_texts_are_chinese(pairs, page):
    chinese = article(pairs[page][1])
    for figure in chinese.select("figure"):
        assert CJK.search(figure.figcaption.get_text()), figure.get("id")
        assert CJK.search(figure.img.get("alt", "")), figure.get("id")


def numbers(document):
    """Every value pasted from code into the page as a number, as a multiset (phrases left out)."""
    texts = [span.get_text(strip=True) for span in article(document).select("span.pasted-text")]
    return Counter(t for t in texts if re.fullmatch(r"[-−+]?[\d.,]+(?:e[-+]?\d+)?%?|nan|inf", t))


@pytest.mark.parametrize("page", BOOK_PAGES, ids=str)
def test_both_editions_paste_the_same_numbers(pairs, page):
    english, chinese = pairs[page]
    assert numbers(chinese) == numbers(english)


@pytest.mark.parametrize("page", BOOK_PAGES, ids=str)
def test_no_english_phrase_is_pasted_into_a_chinese_page(pairs, page):
    chinese = article(pairs[page][1])
    pasted = [span.get_text() for span in chinese.select("span.pasted-text, .pasted-inline")]
    english = [text for text in pasted if not CJK.search(text) and set(re.findall(r"[A-Za-z]{3,}", text)) - NAMES]
    assert english == []


@pytest.mark.parametrize("page", BOOK_PAGES, ids=str)
def test_glued_tables_are_the_same_size_in_both_editions(pairs, page):
    english, chinese = pairs[page]

    def shapes(document):
        return [(len(t.select("tr")), len(t.select("tr")[0].select("th, td"))) for t in article(document).select("table")]

    assert shapes(chinese) == shapes(english)


@pytest.mark.parametrize("page", BOOK_PAGES, ids=str)
def test_both_editions_ask_the_same_quizzes(pairs, page):
    english, chinese = pairs[page]

    def answers(document):
        return [[a["data-right"] for a in quiz.select("input[type=radio]")] for quiz in article(document).select(".quiz")]

    assert answers(chinese) == answers(english)
    assert all(CJK.search(q.get_text()) for q in article(chinese).select(".quiz-question"))


def test_every_table_header_of_a_chinese_page_is_chinese_or_a_name(pairs):
    """Tables pasted from code are glued once per language, so none keeps English headers."""
    english_headers = []
    for page, (_, chinese) in pairs.items():
        for th in article(chinese).select("th"):
            if th.find_parent(class_="ane-fallback"):
                continue  # the explorer's stand-in without JavaScript, removed by the script: see README
            text = th.get_text(" ", strip=True)
            if re.search(r"[a-z]{3,} [a-z]{3,}", text) and not CJK.search(text):
                english_headers.append(f"{page}: {text}")
    assert english_headers == []


def test_the_glossary_page_lists_every_term_of_the_glossary(site):
    page = soup(site / "zh" / "glossary.html")
    rows = page.select("table.glossary-table tbody tr")
    terms = yaml.safe_load((REPO / "zh" / "glossary.yml").read_text(encoding="utf-8"))["terms"]
    assert [row.select("th, td")[0].get_text(strip=True) for row in rows] == [term["zh"] for term in terms]


@pytest.mark.parametrize("service", ["colab.research.google.com", "mybinder.org"])
def test_chinese_chapters_launch_their_own_notebook_twin(pairs, learner_copy, service):
    """Colab and Binder open the Chinese notebook, generated from the Chinese page, not the English one."""
    for page, (_, chinese) in pairs.items():
        if page.parts[0] != "chapters":
            continue
        targets = {repo_path_of_launch_link(a["href"], learner_copy) for a in chinese.find_all("a", href=True)
                   if service in a["href"]}
        chapters = {target for target in targets if not target.startswith("exercises/")}  # the exercise's own link
        assert chapters == {f"zh/{page.with_suffix('.ipynb')}"}
        assert (REPO / "zh" / page.with_suffix(".ipynb")).is_file()
