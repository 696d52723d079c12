"""The built book in a real browser: the explorer, the quizzes, offline use, screenshots.

Debian's Chromium (never a downloaded browser), driven by Playwright, loads the book of the
session's strict build from a server on 127.0.0.1. Every request to any other host is refused
and recorded. Screenshots go to tests/artifacts/.
"""

import functools
import math
import re
from dataclasses import dataclass, field

import pytest
import torch
import torch.nn.functional as F
from tests.conftest import REPO, quizzes_in
from hypothesis import given, settings
from hypothesis import strategies as st
from playwright.sync_api import Page, sync_playwright

from addnorm_helpers import add_and_norm_stages  # chapters/ is on pytest's pythonpath (pyproject.toml)
from tools.local_site import CHROMIUM_ARGS, only_localhost, served

DESKTOP, PHONE = 1280, 375  # viewport widths in CSS pixels
ARTIFACTS = REPO / "tests" / "artifacts"
EXPLORER_PAGE = "chapters/02_layer_normalization.html"
CHAPTERS = sorted((REPO / "chapters").glob("[0-9][0-9]_*.md"))
BARS, STATS = 0.005, 0.0005  # half a unit of the last digit shown: bars show 2 decimals, statistics 3


# ---- the browser and the site ---------------------------------------------------------------


@pytest.fixture(scope="module")
def site(book):
    """Base URL of the built book, served on 127.0.0.1 at a free port."""
    with served(book.html) as base:
        yield base


@pytest.fixture(scope="module")
def browser(chromium):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@dataclass
class Visit:
    """An open page, with what it logged and what it tried to fetch from elsewhere."""

    page: Page
    console_errors: list[str] = field(default_factory=list)
    outside_requests: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def visit(browser, site):
    """visit(path, width=DESKTOP) opens a page of the book in a fresh browser context.

    A chapter page takes seconds to load on a busy two-core machine, so tests share pages
    where they can (see ``opened`` and ``explorer``).
    """
    contexts = []

    def open_page(path, width=DESKTOP, height=900):
        context = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(context)
        page = context.new_page()
        seen = Visit(page)

        context.route("**/*", only_localhost(seen.outside_requests))
        page.on("console", lambda message: message.type == "error" and seen.console_errors.append(message.text))
        page.on("pageerror", lambda error: seen.console_errors.append(str(error)))
        page.goto(site + path, wait_until="load")
        return seen

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture(scope="module")
def opened(visit):
    """opened(path): the page at ``path``, opened once at desktop width for all tests of this module."""
    return functools.cache(visit)


# ---- reading the explorer --------------------------------------------------------------------


def shown(page, chart):
    """The values written on the bars of one chart."""
    return [float(t) for t in page.locator(f'[data-chart="{chart}"] text.ane-value').all_text_contents()]


def stat(page, name):
    return float(page.locator(f'[data-stat="{name}"]').text_content())


def start_vectors(page):
    state = page.evaluate("window.addNormExplorer.state()")
    return state["x"], state["fx"]


def torch_layer_norm(summed, gamma=1.0, beta=0.0):
    """torch's layer_norm of one token in float64, with gamma and beta shared by all features."""
    summed = torch.tensor(summed, dtype=torch.float64)
    C = len(summed)
    weight, bias = torch.full((C,), gamma, dtype=torch.float64), torch.full((C,), beta, dtype=torch.float64)
    return F.layer_norm(summed, (C,), weight, bias, eps=1e-5).tolist()


def address(x, fx):
    return f"{EXPLORER_PAGE}?x={','.join(map(str, x))}&fx={','.join(map(str, fx))}"


VECTORS = {  # name: (x, fx)
    "small integers": ([1, 2, 3, 4, 5], [0.5, -1, 0.25, 2, -0.75]),
    "the chapter's worked token, silent sublayer": ([10, -5, 2, 8, -3], [0, 0, 0, 0, 0]),
    "large and mixed": ([120, -40, 3.5, 0, 77], [-250, 13, 99, 1, -8]),
    "spread far below sqrt(eps)": ([0.001, 0, 0, 0, 0], [0, 0, 0, 0, 0]),
}


@pytest.fixture(params=VECTORS.values(), ids=VECTORS.keys())
def vectors(request):
    return request.param


@pytest.fixture
def explorer(opened):
    """The explorer's page at desktop width, reset to its starting vectors and default controls."""
    page = opened(EXPLORER_PAGE).page
    page.evaluate("window.addNormExplorer.reset()")
    page.evaluate("document.activeElement?.blur()")
    return page


def set_vectors(page, x, fx):
    page.evaluate("([x, fx]) => window.addNormExplorer.set(x, fx)", [x, fx])


# ---- the explorer ----------------------------------------------------------------------------


def test_explorer_replaces_its_static_fallback(explorer):
    assert explorer.locator(".addnorm-explorer.ane-ready").count() == 1
    assert explorer.locator(".ane-fallback").count() == 0


def test_every_bar_shows_its_value(explorer):
    for chart in ("identity", "transformed", "summed", "stats", "x-hat", "y"):
        bars = explorer.locator(f'[data-chart="{chart}"] rect.ane-bar')
        assert bars.count() == 5
        assert len(shown(explorer, chart)) == 5


def test_vectors_from_the_address_are_shown_as_given(visit, vectors):
    page = visit(address(*vectors)).page
    x, fx = vectors
    assert shown(page, "identity") == pytest.approx(x, abs=BARS)
    assert shown(page, "transformed") == pytest.approx(fx, abs=BARS)


def test_shown_numbers_equal_the_python_definition(explorer, vectors):
    page = explorer
    set_vectors(page, *vectors)
    stages = add_and_norm_stages(*vectors)
    assert shown(page, "summed") == pytest.approx(stages.summed.tolist(), abs=BARS)
    assert stat(page, "mu") == pytest.approx(stages.mu, abs=STATS)
    assert stat(page, "sigma") == pytest.approx(stages.sigma, abs=STATS)
    assert shown(page, "x-hat") == pytest.approx(stages.x_hat.tolist(), abs=BARS)
    assert shown(page, "y") == pytest.approx(stages.y.tolist(), abs=BARS)
    assert stat(page, "identity-cosine") == pytest.approx(stages.identity_cosine, abs=STATS)


def test_normalized_and_output_values_equal_torch_layer_norm(explorer, vectors):
    page = explorer
    set_vectors(page, *vectors)
    summed = [a + b for a, b in zip(*vectors)]
    assert shown(page, "x-hat") == pytest.approx(torch_layer_norm(summed), abs=BARS)
    assert shown(page, "y") == pytest.approx(torch_layer_norm(summed), abs=BARS)


def test_malformed_address_is_reported_and_ignored(visit, explorer):
    page = visit(f"{EXPLORER_PAGE}?x=1,2,3&fx=a,b").page
    assert page.locator(".ane-message").is_visible()
    assert "5 numbers" in page.locator(".ane-message").text_content()
    assert start_vectors(page) == start_vectors(explorer)


finite = st.floats(-1000, 1000, allow_nan=False, allow_infinity=False)


@settings(max_examples=25, deadline=None)
@given(x=st.lists(finite, min_size=5, max_size=5), fx=st.lists(finite, min_size=5, max_size=5))
def test_any_vectors_give_the_statistics_and_the_layer_norm_of_torch(opened, x, fx):
    page = opened(EXPLORER_PAGE).page   # not the `explorer` fixture: hypothesis calls this test many times
    set_vectors(page, x, fx)
    summed = torch.tensor(x, dtype=torch.float64) + torch.tensor(fx, dtype=torch.float64)
    assert stat(page, "mu") == pytest.approx(summed.mean().item(), abs=STATS)
    assert stat(page, "sigma") == pytest.approx(summed.var(correction=0).sqrt().item(), abs=STATS)
    assert shown(page, "x-hat") == pytest.approx(torch_layer_norm(summed.tolist()), abs=BARS)


def press(page, name):
    page.get_by_role("button", name=re.compile(name, re.I)).click()


def test_inject_instability_multiplies_the_sublayer_output_by_ten(explorer):
    x, fx = start_vectors(explorer)
    press(explorer, "instability")
    assert shown(explorer, "transformed") == pytest.approx([10 * v for v in fx], abs=BARS)
    assert shown(explorer, "summed") == pytest.approx([a + 10 * b for a, b in zip(x, fx)], abs=BARS)


def test_instability_button_shows_its_state_in_label_colour_and_aria_pressed(explorer):
    button = explorer.locator(".ane-instability")
    before = (button.text_content(), button.evaluate("b => getComputedStyle(b).backgroundColor"))
    button.click()
    after = (button.text_content(), button.evaluate("b => getComputedStyle(b).backgroundColor"))
    assert button.get_attribute("aria-pressed") == "true"
    assert "on" in after[0] and after[0] != before[0]
    assert after[1] != before[1]


def test_after_instability_the_normalized_vector_is_layer_norm_of_the_new_sum(explorer):
    x, fx = start_vectors(explorer)
    press(explorer, "instability")
    x_hat = shown(explorer, "x-hat")
    assert x_hat == pytest.approx(torch_layer_norm([a + 10 * b for a, b in zip(x, fx)]), abs=BARS)
    assert sum(x_hat) / 5 == pytest.approx(0, abs=BARS)
    assert math.sqrt(sum(v * v for v in x_hat) / 5) == pytest.approx(1, abs=3 * BARS)


def test_after_instability_the_normalized_vector_differs_from_the_stable_one(explorer):
    stable = shown(explorer, "x-hat")
    press(explorer, "instability")
    assert max(abs(a - b) for a, b in zip(shown(explorer, "x-hat"), stable)) > 0.1


def test_after_instability_outlines_mark_the_stable_normalized_vector(explorer):
    stable = shown(explorer, "x-hat")
    assert explorer.locator(".ane-ghost").count() == 0
    press(explorer, "instability")
    outlines = [float(v) for v in explorer.locator(".ane-ghost").evaluate_all("els => els.map(e => e.dataset.value)")]
    assert outlines == pytest.approx(stable, abs=BARS)
    assert explorer.locator(".ane-legend").is_visible()


def test_after_instability_less_of_x_is_left_in_the_normalized_vector(explorer):
    x, fx = start_vectors(explorer)
    press(explorer, "instability")
    expected = add_and_norm_stages(x, fx, unstable=True).identity_cosine
    assert stat(explorer, "identity-cosine") == pytest.approx(expected, abs=STATS)
    assert expected < add_and_norm_stages(x, fx).identity_cosine


def test_residual_toggle_zeroes_the_identity_path(explorer):
    x, fx = start_vectors(explorer)
    press(explorer, "Residual")
    assert explorer.locator(".ane-residual").get_attribute("aria-pressed") == "false"
    assert shown(explorer, "identity") == [0.0] * 5
    assert shown(explorer, "summed") == pytest.approx(fx, abs=BARS)
    assert shown(explorer, "x-hat") == pytest.approx(torch_layer_norm(fx), abs=BARS)


def test_gamma_slider_scales_the_output(explorer):
    x, fx = start_vectors(explorer)
    slider = explorer.get_by_role("slider", name=re.compile("gamma"))
    slider.focus()
    for _ in range(5):
        explorer.keyboard.press("ArrowRight")           # 1.0 -> 1.5
    assert explorer.locator(".ane-gamma-value").text_content() == "1.5"
    summed = [a + b for a, b in zip(x, fx)]
    assert shown(explorer, "y") == pytest.approx(torch_layer_norm(summed, gamma=1.5), abs=BARS)


def test_beta_slider_shifts_the_output(explorer):
    x, fx = start_vectors(explorer)
    explorer.get_by_role("slider", name=re.compile("beta")).focus()
    explorer.keyboard.press("End")                      # 0.0 -> 2.0
    summed = [a + b for a, b in zip(x, fx)]
    assert shown(explorer, "y") == pytest.approx(torch_layer_norm(summed, beta=2.0), abs=BARS)


@pytest.mark.parametrize("name, low, high, start", [("gamma", 0.1, 3.0, 1.0), ("beta", -2.0, 2.0, 0.0)])
def test_slider_range_and_default(explorer, name, low, high, start):
    slider = explorer.get_by_role("slider", name=re.compile(name))
    assert float(slider.input_value()) == start
    slider.focus()
    explorer.keyboard.press("Home")
    assert float(slider.input_value()) == low
    explorer.keyboard.press("End")
    assert float(slider.input_value()) == high


def test_sliders_leave_stage_a_and_the_statistics_alone(explorer):
    before = shown(explorer, "summed"), stat(explorer, "mu"), stat(explorer, "sigma"), shown(explorer, "x-hat")
    explorer.get_by_role("slider", name=re.compile("gamma")).fill("2.5")
    after = shown(explorer, "summed"), stat(explorer, "mu"), stat(explorer, "sigma"), shown(explorer, "x-hat")
    assert after == before


def test_new_random_vector_draws_two_decimal_values_in_minus_one_to_one(explorer):
    before = start_vectors(explorer)
    press(explorer, "New random vector")
    x, fx = start_vectors(explorer)
    assert (x, fx) != before
    for value in x + fx:
        assert -1 <= value <= 1 and round(value, 2) == value
    assert shown(explorer, "x-hat") == pytest.approx(torch_layer_norm([a + b for a, b in zip(x, fx)]), abs=BARS)


@pytest.mark.parametrize("key", ["Enter", " "])
def test_toggle_buttons_work_from_the_keyboard(explorer, key):
    button = explorer.locator(".ane-instability")
    button.focus()
    explorer.keyboard.press(key)
    assert button.get_attribute("aria-pressed") == "true"
    explorer.keyboard.press(key)
    assert button.get_attribute("aria-pressed") == "false"


def test_controls_have_accessible_names(explorer):
    for name in ("Inject instability", "Residual connection", "New random vector"):
        assert explorer.get_by_role("button", name=re.compile(name)).count() == 1
    for name in ("gamma", "beta"):
        assert explorer.get_by_role("slider", name=re.compile(name)).count() == 1


def test_charts_are_labelled_images_listing_their_values(explorer):
    charts = explorer.locator(".addnorm-explorer svg.ane-svg")
    assert charts.count() == 6
    for label in charts.evaluate_all("els => els.map(e => e.getAttribute('role') + ' ' + e.getAttribute('aria-label'))"):
        assert label.startswith("img ") and len(re.findall(r"-?\d+\.\d\d", label)) == 5


def test_a_change_is_announced_in_one_sentence_of_one_live_region(explorer):
    press(explorer, "instability")
    assert explorer.locator(".ane-announcer").get_attribute("role") == "status"
    said = explorer.locator(".ane-announcer").text_content()
    assert said.startswith("F(x) is multiplied by 10. Residual connection on. y = ")
    assert explorer.locator(".addnorm-explorer [aria-live=polite]").count() == 0


def test_unstable_sum_differs_by_pattern_not_only_by_colour(explorer):
    fill = explorer.locator('[data-chart="summed"] rect.ane-bar').first
    stable = fill.get_attribute("fill")
    press(explorer, "instability")
    unstable = fill.get_attribute("fill")
    assert stable.startswith("url(#") and unstable.startswith("url(#") and stable != unstable
    assert "⚠" in explorer.locator('[data-chart="summed"] figcaption').text_content()


def test_explorer_fits_a_phone_width_screen(visit):
    page = visit(EXPLORER_PAGE, width=PHONE).page
    box = page.locator(".addnorm-explorer").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE
    overflow = page.locator(".addnorm-explorer").evaluate("e => e.scrollWidth - e.clientWidth")
    assert overflow <= 0


def test_using_every_control_logs_no_console_error(opened, explorer):
    for name in ("instability", "Residual", "New random vector", "instability", "Residual"):
        press(explorer, name)
    explorer.get_by_role("slider", name=re.compile("gamma")).fill("0.1")
    explorer.get_by_role("slider", name=re.compile("beta")).fill("-2")
    assert opened(EXPLORER_PAGE).console_errors == []


# ---- the quizzes -----------------------------------------------------------------------------

QUIZ_ANSWERS = [
    pytest.param(path.stem, number, index, answer, id=f"{path.stem[:2]}-q{number}-{'ABCDEFGH'[index]}")
    for path in CHAPTERS
    for number, quiz in enumerate(quizzes_in(path), start=1)
    for index, answer in enumerate(quiz.answers)
]


@pytest.fixture(scope="module")
def chapter_page(opened):
    """chapter_page(stem): that chapter's page, opened once for all its quiz tests."""
    return lambda stem: opened(f"chapters/{stem}.html").page


def plain_words(markdown, count=6):
    """The first words of a MyST text that survive rendering: no math, no code, no markup."""
    text = re.sub(r"\$[^$]*\$|`[^`]*`|[*_>]", " ", markdown)
    return re.findall(r"[A-Za-z]{3,}", text)[:count]


@pytest.mark.parametrize("stem, number, index, answer", QUIZ_ANSWERS)
def test_checking_an_answer_shows_its_verdict_and_its_explanation(chapter_page, stem, number, index, answer):
    page = chapter_page(stem)
    quiz = page.locator(f"#quiz-{number}")
    quiz.locator(f'label[for="quiz-{number}-{index}"]').click()
    assert quiz.locator(".quiz-feedback:visible").count() == 0  # picking is not checking
    quiz.get_by_role("button", name="Check").click()
    visible = quiz.locator(".quiz-feedback:visible")
    assert visible.count() == 1
    assert visible.get_attribute("data-index") == str(index)
    verdict = visible.locator(".quiz-verdict").text_content()
    assert verdict == ("✓ Right." if answer.right else "✗ Not quite.")
    explanation = " ".join(visible.text_content().split())
    assert all(word in explanation for word in plain_words(answer.why))
    mark = quiz.locator(f'.quiz-answer[data-index="{index}"] .quiz-mark').text_content()
    assert mark == ("✓" if answer.right else "✗")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_questions_appear_in_the_order_of_the_source(chapter_page, path):
    page = chapter_page(path.stem)
    for number, quiz in enumerate(quizzes_in(path), start=1):
        question = " ".join(page.locator(f"#quiz-{number} .quiz-question").text_content().split())
        assert all(word in question for word in plain_words(quiz.question))


# ---- every page: offline, quiet --------------------------------------------------------------

PAGES = ["intro.html"] + [f"chapters/{path.stem}.html" for path in CHAPTERS]


@pytest.mark.parametrize("path", PAGES)
def test_page_requests_nothing_outside_localhost(opened, path):
    seen = opened(path)  # for chapters: after the quiz tests above have used it
    seen.page.wait_for_load_state("networkidle")
    assert seen.outside_requests == []


@pytest.mark.parametrize("path", PAGES)
def test_page_logs_no_console_error(opened, path):
    seen = opened(path)
    seen.page.wait_for_load_state("networkidle")
    assert seen.console_errors == []


# ---- screenshots -----------------------------------------------------------------------------


@pytest.mark.parametrize("width, label", [(DESKTOP, "desktop"), (PHONE, "phone")])
def test_screenshots_of_the_explorer_and_a_quiz_are_saved(visit, width, label):
    ARTIFACTS.mkdir(exist_ok=True)
    page = visit(EXPLORER_PAGE, width=width, height=3000).page   # tall: the whole explorer in view
    explorer = page.locator(".addnorm-explorer")
    explorer.screenshot(path=ARTIFACTS / f"explorer-{label}.png")
    press(page, "instability")
    explorer.screenshot(path=ARTIFACTS / f"explorer-unstable-{label}.png")
    quiz = page.locator("#quiz-5")
    quiz.locator("label").first.click()
    quiz.locator(".quiz-check").click()
    quiz.screenshot(path=ARTIFACTS / f"quiz-{label}.png")
    for name in (f"explorer-{label}.png", f"explorer-unstable-{label}.png", f"quiz-{label}.png"):
        data = (ARTIFACTS / name).read_bytes()
        assert data.startswith(b"\x89PNG")
        assert int.from_bytes(data[16:20], "big") <= width  # PNG width: fits the viewport
