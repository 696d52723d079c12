"""The Chinese edition is the English book's code with Chinese prose, page for page.

``tools/editions.py`` says what ties a Chinese page to its English twin (identical code cells and
front matter; the same headings, labels, figures, quizzes and glued values; no stale or untranslated
prose). These tests run it on every page of the book, and on small pages made to break each rule.
"""

import json
import re

import pytest
import yaml
from tests.conftest import REPO

from tools import editions

PAGES = editions.english_pages()
GLOSSARY = yaml.safe_load((REPO / "zh" / "glossary.yml").read_text(encoding="utf-8"))["terms"]
CJK = r"\u4e00-\u9fff"


def chinese(page):
    return (REPO / "zh" / page).read_text(encoding="utf-8")


def prose_only(text):
    """Text a reader reads as prose: without code cells, code spans, math, roles and directive lines."""
    return editions.readable(editions.CODE_CELL.sub("", text))


# ---- the book as it is -----------------------------------------------------------------------


def test_the_chinese_toc_lists_the_english_pages_under_the_same_names():
    english = yaml.safe_load((REPO / "_toc.yml").read_text())
    chinese_toc = yaml.safe_load((REPO / "zh" / "_toc.yml").read_text())
    assert chinese_toc["root"] == english["root"]
    assert [part["chapters"] for part in chinese_toc["parts"]] == [part["chapters"] for part in english["parts"]]


@pytest.mark.parametrize("page", PAGES, ids=str)
def test_the_chinese_page_matches_its_english_twin(page):
    assert editions.differences(page, editions.load_recorded()) == []


@pytest.mark.parametrize("page", [page for page in PAGES if page.name != "glossary.md"], ids=str)
def test_no_chinese_page_uses_a_wording_the_glossary_avoids(page):
    """Except the glossary page, which names a few of them: readers searching for them find the right chapter."""
    text = chinese(page)
    used = [(term["en"], wrong) for term in GLOSSARY for wrong in term.get("avoid", []) if wrong in text]
    assert used == []


@pytest.mark.parametrize("page", PAGES, ids=str)
def test_chinese_sentences_use_full_width_punctuation(page):
    """A comma, colon, semicolon or question mark right after a Chinese character is the half-width one by mistake."""
    slips = re.findall(rf"[{CJK}][,;:?!](?=\s|$)", prose_only(chinese(page)), re.M)
    assert slips == []


@pytest.mark.parametrize("page", PAGES, ids=str)
def test_no_line_break_falls_between_two_chinese_characters(page):
    """The browser shows such a break as a space in the middle of a Chinese sentence."""
    full_width = rf"[{CJK}\u3000-\u303f\uff00-\uffef]"
    assert re.findall(rf"{full_width}\n[ \t]*{full_width}", editions.CODE_CELL.sub("", chinese(page))) == []


def test_every_glossary_term_has_an_english_and_a_chinese_wording():
    for term in GLOSSARY:
        assert term["en"] and re.search(rf"[{CJK}]", term["zh"]), term


def test_no_wording_to_avoid_is_part_of_a_term_the_glossary_asks_for():
    """Else using the right term would count as using the wrong one."""
    clashes = [(wrong, term["zh"]) for other in GLOSSARY for wrong in other.get("avoid", [])
               for term in GLOSSARY if wrong in term["zh"]]
    assert clashes == []


def test_every_diagram_has_a_chinese_twin_with_chinese_labels():
    english = sorted(p.name for p in (REPO / "chapters" / "figures").glob("*.svg"))
    twins = sorted(p.name for p in (REPO / "zh" / "chapters" / "figures").glob("*.svg"))
    assert twins == english
    for name in twins:
        svg = (REPO / "zh" / "chapters" / "figures" / name).read_text(encoding="utf-8")
        labels = " ".join(re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S))
        assert re.search(rf"[{CJK}]", labels), f"{name}: no Chinese label"
        assert re.search(rf"<title[^>]*>[^<]*[{CJK}]", svg), f"{name}: no Chinese <title>"


def test_the_recorded_english_sources_are_those_of_the_pages_of_the_book():
    recorded = json.loads((REPO / "zh" / "sources.json").read_text())
    assert sorted(recorded) == sorted(map(str, PAGES))


# ---- the checker, on pages made to break one rule each -----------------------------------------

ENGLISH = """---
kernelspec:
  name: python3
---

(demo-start)=
# A demo

Some prose about LayerNorm, with a value {glue:text}`mean:.2f` and a verdict {glue:text}`verdict`.

```{code-cell} ipython3
glue("mean", 0.5)
glue_text("verdict", en="holds", zh="成立")
```

More prose after the code, with a figure.

```{glue:figure} demo-fig
:name: demo-fig
:alt: A plot.

Caption.
```

:::{quiz}
question: Which?
answers:
  - text: This one.
    right: true
    why: Because.
  - text: That one.
    why: Because not.
:::
"""

CHINESE = """---
kernelspec:
  name: python3
---

(demo-start)=
# 一个示例

关于层归一化的一段话，数值为 {glue:text}`mean:.2f`，结论是{glue:text}`verdict_zh`。

```{code-cell} ipython3
glue("mean", 0.5)
glue_text("verdict", en="holds", zh="成立")
```

代码之后还有一段话和一张图。

```{glue:figure} demo-fig
:name: demo-fig
:alt: 一幅图。

图注。
```

:::{quiz}
question: 哪一个？
answers:
  - text: 这一个。
    right: true
    why: 因为如此。
  - text: 那一个。
    why: 因为并非如此。
:::
"""

PAGE = editions.Path("chapters/demo.md")


@pytest.fixture
def twins(tmp_path):
    """write(english, chinese) -> the checker's findings for that pair, its English sources stamped first."""

    def write(english=ENGLISH, chinese=CHINESE, stamp_from=None):
        (tmp_path / "chapters").mkdir(exist_ok=True)
        (tmp_path / "zh" / "chapters").mkdir(parents=True, exist_ok=True)
        (tmp_path / PAGE).write_text(stamp_from or english)
        editions.stamp([str(PAGE)], root=tmp_path)
        (tmp_path / PAGE).write_text(english)
        (tmp_path / "zh" / PAGE).write_text(chinese)
        recorded = json.loads((tmp_path / "zh" / "sources.json").read_text())
        return editions.differences(PAGE, recorded, root=tmp_path)

    return write


def test_a_faithful_twin_has_no_difference(twins):
    assert twins() == []


def test_a_changed_code_cell_is_reported(twins):
    found = twins(chinese=CHINESE.replace('glue("mean", 0.5)', 'glue("mean", 0.25)'))
    assert found == ["chapters/demo.md: code cell 1 differs (first differing English line: 'glue(\"mean\", 0.5)')"]


def test_a_code_cell_whose_metadata_differs_is_reported(twins):
    tagged = CHINESE.replace("```{code-cell} ipython3\n", "```{code-cell} ipython3\n:tags: [hide-input]\n")
    assert any("code cell 1 differs" in line for line in twins(chinese=tagged))


def test_an_edited_english_paragraph_marks_only_its_own_segment_stale(twins):
    edited = ENGLISH.replace("More prose after the code", "Other prose after the code")
    found = twins(english=edited, chinese=CHINESE, stamp_from=ENGLISH)
    assert found == ["chapters/demo.md: prose segment 1 is stale (English now starts 'Other prose after the code, with a figure.')"]


def test_a_segment_left_in_english_is_reported(twins):
    english_start = ENGLISH.split("```{code-cell}")[0]
    found = twins(chinese=english_start.replace("`verdict`", "`verdict_zh`") + "```{code-cell}" +
                  CHINESE.split("```{code-cell}", 1)[1])
    assert found == ["chapters/demo.md: prose segment 0 is not translated"]


def test_an_english_paragraph_among_chinese_ones_is_reported(twins):
    found = twins(chinese=CHINESE.replace("代码之后还有一段话和一张图。", "More prose after the code, with a figure."))
    assert found == ["chapters/demo.md: prose segment 1 still has English paragraphs: "
                     "['More prose after the code, with a figure.']"]


def test_an_english_reference_entry_is_not_an_untranslated_paragraph(twins):
    entry = "He, Zhang, Ren and Sun. Deep residual learning for image recognition. CVPR 2016."
    assert twins(chinese=CHINESE.replace("代码之后还有一段话和一张图。", "代码之后还有一段话和一张图。\n\n" + entry)) == []


def test_a_missing_label_is_reported(twins):
    assert any("labels differ" in line for line in twins(chinese=CHINESE.replace("(demo-start)=\n", "")))


def test_moving_the_right_answer_of_a_quiz_is_reported(twins):
    moved = CHINESE.replace("    right: true\n    why: 因为如此。", "    why: 因为如此。").replace(
        "    why: 因为并非如此。", "    right: true\n    why: 因为并非如此。")
    assert any("quizzes differ" in line for line in twins(chinese=moved))


def test_pasting_the_english_phrase_on_the_chinese_page_is_reported(twins):
    found = twins(chinese=CHINESE.replace("`verdict_zh`", "`verdict`"))
    assert found == ["chapters/demo.md: the Chinese page pastes English phrases; use ['verdict_zh']"]


def test_pasting_the_english_phrase_of_an_f_string_name_is_reported(twins):
    english = ENGLISH.replace('glue_text("verdict"', 'glue_text(f"verdict_{0}"').replace("`verdict`", "`verdict_0`")
    chinese = CHINESE.replace('glue_text("verdict"', 'glue_text(f"verdict_{0}"').replace("`verdict_zh`", "`verdict_0`")
    assert twins(english, chinese) == ["chapters/demo.md: the Chinese page pastes English phrases; use ['verdict_0_zh']"]


def test_a_value_pasted_in_one_edition_only_is_reported(twins):
    found = twins(chinese=CHINESE.replace("数值为 {glue:text}`mean:.2f`，", ""))
    assert found == ["chapters/demo.md: glued values pasted in one edition only: English only ['mean'], Chinese only []"]


def test_sync_code_copies_the_english_code_and_keeps_the_chinese_prose(twins, tmp_path):
    twins(chinese=CHINESE.replace('glue("mean", 0.5)', 'glue("mean", 0.25)'))
    editions.sync_code([PAGE], root=tmp_path)
    assert (tmp_path / "zh" / PAGE).read_text() == CHINESE


def test_drifted_code_names_the_differing_cell_which_stops_the_chinese_build(twins, tmp_path):
    twins(chinese=CHINESE.replace('glue("mean", 0.5)', 'glue("mean", 0.25)'))
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: chapters/demo\nparts: []\n")
    assert editions.drifted_code(tmp_path) == [
        "chapters/demo.md: code cell 1 differs (first differing English line: 'glue(\"mean\", 0.5)')"]
