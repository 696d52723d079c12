"""The Chinese edition in a real browser: its quizzes, its explorer, its font, its language switch.

The same Debian Chromium, server and refusal of every outside request as test_browser.py, on the
Chinese pages of the session's build (``book.html / "zh"``). Screenshots at desktop width go to
tests/artifacts/zh-desktop-<page>.png; the phone-width ones are taken by test_phone_layout.py.
"""

import re

import pytest
from tests.conftest import REPO, quizzes_in
from tests.test_browser import (  # noqa: F401 (fixtures)
    ARTIFACTS,
    BARS,
    STATS,
    browser,
    opened,
    press,
    shown,
    site,
    start_vectors,
    stat,
    torch_layer_norm,
    visit,
)

from addnorm_helpers import add_and_norm_stages  # chapters/ is on pytest's pythonpath (pyproject.toml)

CHAPTERS = sorted((REPO / "zh" / "chapters").glob("[0-9][0-9]_*.md"))
PAGES = ["zh/intro.html", "zh/glossary.html"] + [f"zh/chapters/{path.stem}.html" for path in CHAPTERS]
EXPLORER_PAGE = "zh/chapters/02_layer_normalization.html"
CJK = re.compile(r"[\u4e00-\u9fff]")


# ---- every page --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES)
def test_chinese_page_requests_nothing_outside_localhost_and_logs_no_error(opened, path):
    seen = opened(path)
    seen.page.wait_for_load_state("networkidle")
    assert seen.outside_requests == []
    assert seen.console_errors == []


@pytest.mark.parametrize("path", PAGES)
def test_chinese_text_is_drawn_with_a_cjk_font_of_the_system(opened, path):
    page = opened(path).page
    session = page.context.new_cdp_session(page)
    session.send("DOM.enable")
    session.send("CSS.enable")
    root = session.send("DOM.getDocument")["root"]["nodeId"]
    node = session.send("DOM.querySelector", {"nodeId": root, "selector": "article.bd-article p"})["nodeId"]
    fonts = [font["familyName"] for font in session.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]]
    session.detach()
    assert any("CJK" in family for family in fonts), fonts


@pytest.mark.parametrize("path", PAGES)
def test_desktop_screenshot_shows_the_chinese_page(opened, path):
    page = opened(path).page
    page.evaluate("document.fonts.ready")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"zh-desktop-{path.removeprefix('zh/').replace('/', '-').removesuffix('.html')}.png"
    page.screenshot(path=shot)
    assert len(CJK.findall(page.locator("article.bd-article").first.inner_text())) > 100
    assert shot.stat().st_size > 20_000  # a page of text, not a blank frame


def test_the_language_switch_leads_to_the_same_page_in_english_and_back(visit):
    page = visit(EXPLORER_PAGE).page
    page.get_by_role("link", name="English").click()
    page.wait_for_load_state("load")
    assert page.url.endswith("/chapters/02_layer_normalization.html") and "/zh/" not in page.url
    assert page.locator("html").get_attribute("lang") == "en"
    page.get_by_role("link", name="中文").click()
    page.wait_for_load_state("load")
    assert page.url.endswith("/zh/chapters/02_layer_normalization.html")
    assert page.locator("html").get_attribute("lang") == "zh-CN"


# ---- the quizzes --------------------------------------------------------------------------------

QUIZ_ANSWERS = [
    pytest.param(path.stem, number, index, answer.right, id=f"{path.stem[:2]}-q{number}-{index}")
    for path in CHAPTERS
    for number, quiz in enumerate(quizzes_in(path), start=1)
    for index, answer in enumerate(quiz.answers)
]


@pytest.mark.parametrize("stem, number, index, right", QUIZ_ANSWERS)
def test_checking_an_answer_gives_its_verdict_and_explanation_in_chinese(opened, stem, number, index, right):
    page = opened(f"zh/chapters/{stem}.html").page
    quiz = page.locator(f"#quiz-{number}")
    assert quiz.locator(".quiz-number").text_content() == f"第 {number} 题"
    quiz.locator(f'label[for="quiz-{number}-{index}"]').click()
    quiz.get_by_role("button", name="核对答案").click()
    visible = quiz.locator(".quiz-feedback:visible")
    assert visible.count() == 1 and visible.get_attribute("data-index") == str(index)
    assert visible.locator(".quiz-verdict").text_content() == ("✓ 答对了。" if right else "✗ 还不对。")
    explanation = visible.text_content().split("。", 1)[1]
    assert CJK.search(explanation)


# ---- the explorer -------------------------------------------------------------------------------


@pytest.fixture
def explorer(opened):
    page = opened(EXPLORER_PAGE).page
    page.evaluate("window.addNormExplorer.reset()")
    return page


def test_the_explorer_names_its_controls_in_chinese(explorer):
    for name in ("注入不稳定", "残差连接：开", "换一个随机向量"):
        assert explorer.get_by_role("button", name=re.compile(name)).count() == 1
    for name in ("γ（gamma），缩放", "β（beta），平移"):
        assert explorer.get_by_role("slider", name=name).count() == 1
    assert explorer.get_by_role("region", name="Add & Norm 交互演示").count() == 1


def test_inject_instability_in_chinese_multiplies_the_sublayer_output_by_ten(explorer):
    x, fx = start_vectors(explorer)
    press(explorer, "注入不稳定")
    assert explorer.locator(".ane-instability").text_content().startswith("⚠ 已注入不稳定")
    assert shown(explorer, "transformed") == pytest.approx([10 * v for v in fx], abs=BARS)
    x_hat = shown(explorer, "x-hat")
    assert x_hat == pytest.approx(torch_layer_norm([a + 10 * b for a, b in zip(x, fx)]), abs=BARS)
    assert explorer.locator(".ane-status").text_content() == "F(x) 乘以 10。残差连接已打开。"


def test_cutting_the_residual_in_chinese_zeroes_the_identity_path(explorer):
    x, fx = start_vectors(explorer)
    press(explorer, "残差连接")
    assert explorer.locator(".ane-residual").text_content() == "残差连接：关（恒等路径 = 0）"
    assert shown(explorer, "identity") == [0.0] * 5
    expected = add_and_norm_stages(x, fx, residual=False)
    assert stat(explorer, "mu") == pytest.approx(expected.mu, abs=STATS)


def test_the_explorers_statistics_read_in_chinese(explorer):
    line = explorer.locator(".ane-stats-line").text_content()
    assert "有偏" in line and "5 个特征" in line
    assert explorer.locator(".ane-cosine-line").text_content().startswith("x̂ 中还剩多少 x")
