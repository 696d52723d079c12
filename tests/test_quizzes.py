"""The self-check quizzes: every chapter has one, each question is well formed, and the book renders them.

How they behave in a browser is tested in test_browser.py.
"""

import textwrap

import pytest
from bs4 import BeautifulSoup
from tools.book_build import build_book
from tests.conftest import REPO, make_mini_book, quizzes_in
from quiz import parse_quiz, spoken

CHAPTERS = sorted((REPO / "chapters").glob("[0-9][0-9]_*.md"))


@pytest.fixture(params=CHAPTERS, ids=lambda path: path.stem)
def chapter(request):
    return request.param


def test_every_chapter_of_the_toc_is_a_chapter_source_and_no_other(toc_chapters):
    assert [f"chapters/{path.stem}" for path in CHAPTERS] == toc_chapters


def test_chapter_has_at_least_five_questions(chapter):
    assert len(quizzes_in(chapter)) >= 5


def test_every_question_has_exactly_one_right_answer(chapter):
    for quiz in quizzes_in(chapter):
        assert [answer.right for answer in quiz.answers].count(True) == 1, quiz.question


def test_every_answer_has_an_explanation_of_at_least_a_sentence(chapter):
    for quiz in quizzes_in(chapter):
        for answer in quiz.answers:
            assert len(answer.why.split()) >= 8, f"{quiz.question!r}: {answer.text!r}"


def test_quizzes_sit_in_a_check_your_understanding_section_after_the_summary(chapter):
    text = chapter.read_text()
    section = text.index("\n## Check your understanding\n")
    assert text.index("\n## Summary\n") < section < text.index(":::{quiz}")
    following = text[section + 1:].split("\n## ")[1]
    assert following.startswith(("Exercise", "Where to go next"))


def test_right_answers_are_spread_over_the_positions():
    positions = [
        [answer.right for answer in quiz.answers].index(True) for path in CHAPTERS for quiz in quizzes_in(path)
    ]
    assert set(positions) == {0, 1, 2, 3}
    assert max(positions.count(p) for p in set(positions)) < 0.4 * len(positions)


BAD_QUIZZES = {
    "two right answers": """
        question: Q?
        answers:
          - {text: a, right: true, why: because}
          - {text: b, right: true, why: because}
    """,
    "no right answer": """
        question: Q?
        answers:
          - {text: a, why: because}
          - {text: b, why: because}
    """,
    "an answer without explanation": """
        question: Q?
        answers:
          - {text: a, right: true, why: because}
          - {text: b}
    """,
    "a single answer": """
        question: Q?
        answers:
          - {text: a, right: true, why: because}
    """,
    "an unknown key": """
        question: Q?
        answers:
          - {text: a, right: true, why: because, hint: look again}
          - {text: b, why: because}
    """,
    "'right' given as text": """
        question: Q?
        answers:
          - {text: a, right: "yes", why: because}
          - {text: b, why: because}
    """,
    "no question": """
        answers:
          - {text: a, right: true, why: because}
          - {text: b, why: because}
    """,
    "broken YAML": "question: [unclosed",
}


@pytest.mark.parametrize("body", BAD_QUIZZES.values(), ids=BAD_QUIZZES.keys())
def test_parse_quiz_rejects_a_malformed_quiz(body):
    with pytest.raises(ValueError):
        parse_quiz(textwrap.dedent(body))


def test_parse_quiz_keeps_the_order_and_the_text_of_the_answers():
    quiz = parse_quiz(textwrap.dedent("""
        question: Which axis?
        answers:
          - {text: rows, why: because rows}
          - {text: columns, right: true, why: because columns}
    """))
    assert quiz.question == "Which axis?"
    assert [(a.text, a.right, a.why) for a in quiz.answers] == [
        ("rows", False, "because rows"),
        ("columns", True, "because columns"),
    ]


@pytest.mark.slow
@pytest.mark.build
def test_a_malformed_quiz_fails_the_strict_build(tmp_path):
    source = make_mini_book(tmp_path / "src", chapters=["chapters/quiz"])
    (source / "chapters" / "quiz.md").write_text(textwrap.dedent("""\
        # Quiz

        :::{quiz}
        question: Which is right?
        answers:
          - {text: this one, right: true, why: it is}
          - {text: this one too, right: true, why: it is as well}
        :::
        """))
    result = build_book(source, tmp_path / "out")
    assert result.returncode != 0
    assert "a quiz needs exactly one right answer" in result.log


@pytest.fixture(scope="module")
def rendered(book):
    """chapter stem -> the .quiz elements of its built page."""
    return {
        path.stem: BeautifulSoup((book.html / "chapters" / f"{path.stem}.html").read_text(), "html.parser")
        .select(".quiz")
        for path in CHAPTERS
    }


def test_built_page_shows_every_question_of_its_chapter(chapter, rendered):
    assert len(rendered[chapter.stem]) == len(quizzes_in(chapter))


def test_built_questions_offer_one_radio_button_and_one_hidden_explanation_per_answer(chapter, rendered):
    for page_quiz, quiz in zip(rendered[chapter.stem], quizzes_in(chapter)):
        radios = page_quiz.select("input[type=radio]")
        assert len(radios) == len(quiz.answers)
        assert len({radio["name"] for radio in radios}) == 1
        assert [radio["data-right"] == "true" for radio in radios] == [a.right for a in quiz.answers]
        assert all(page_quiz.select_one(f'label[for="{radio["id"]}"]') for radio in radios)
        feedback = page_quiz.select(".quiz-feedback")
        assert len(feedback) == len(quiz.answers)
        assert all(f.has_attr("hidden") for f in feedback)


def test_built_questions_have_unique_ids_on_their_page(rendered):
    for quizzes in rendered.values():
        ids = [q["id"] for q in quizzes]
        assert len(ids) == len(set(ids))


@pytest.mark.parametrize("tex, said", [
    (r"\sqrt{\epsilon}", "√ϵ"),
    (r"0/0", "0/0"),
    (r"\eta/\lVert W \rVert^2", "η/‖ W ‖²"),
    (r"\sqrt{\sigma^2 + \epsilon}", "√(σ² + ϵ)"),
    (r"x \leftarrow \mathrm{LN}(x + F(x))", "x ← LN(x + F(x))"),
    (r"\log_{10}(\mathrm{lr}/\mathrm{std}(W))", "log₁₀(lr/std(W))"),
    (r"\mathbb{E}[x]", "𝔼[x]"),
    (r"\hat{x}", "x̂"),
    (r"\frac{1}{2N}", "1/(2N)"),
    (r"a_m", "a_m"),
])
def test_an_answers_formula_is_named_by_a_plain_text_form_that_keeps_it(tex, said):
    assert spoken(tex) == said
