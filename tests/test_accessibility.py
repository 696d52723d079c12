"""WCAG 2.1 AA on every page of both editions, and the book used from the keyboard alone.

axe-core (the ``axe.min.js`` that ``axe-playwright-python`` bundles; requirements.txt pins it) runs
in Debian's Chromium, started as in test_browser.py, with the rules tagged wcag2a, wcag2aa,
wcag21a and wcag21aa, ``label-content-name-mismatch`` (WCAG 2.5.3, which axe keeps off by default)
included. The theme's own header and sidebars count: a reader meets them on every page.

- Every page a reader reaches, both editions: every rule but the colour ones, once.
- The colour rules (contrast, links told apart from text) on every page again in the theme's light
  and dark modes (``data-theme`` on ``<html>``, switched on the loaded page). axe's contrast check
  lays out every text element it checks, and a chapter's highlighted code is most of them (chapter
  3's code alone took 15 s a page and mode): a token's colour is its kind's (Pygments' ``k``,
  ``nn``, ``mi``, ...), so the code is checked through one token of each kind on the page, the rest
  of the page in full.

The keyboard tests do what a reader without a mouse does: Tab from the top of chapter 2 to the
explorer and operate it, browse a quiz's answers with the arrow keys and check one, see where the
focus is.
"""

import functools
import re
from pathlib import Path

import axe_playwright_python
import pytest
from bs4 import BeautifulSoup
from tests.test_browser import browser, site, visit  # noqa: F401 (fixtures)
from tests.test_phone_layout import pages_in_toc

from tests.conftest import REPO
from tools.local_site import built_pages

AXE = (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text()
WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
MODES = ["light", "dark"]
EXPLORER_PAGE = "chapters/02_layer_normalization.html"
QUIZ_PAGE = "chapters/02_layer_normalization.html"
TABLE_PAGES = ["chapters/05_rmsnorm.html", "chapters/07_beyond_the_norm_layer.html"]
# Tab presses from the top of chapter 2 to the explorer: the header's and sidebars' controls, the
# chapter's links, its code blocks and their copy buttons. 202 while every formula was a Tab stop.
MOST_TABS_TO_EXPLORER = 75  # 71 in both editions today


def edition_pages(prefix, toc_file, extra):
    return [prefix + page for page in pages_in_toc(toc_file) + extra]


PAGES = (edition_pages("", REPO / "_toc.yml", ["genindex.html", "search.html"])
         + edition_pages("zh/", REPO / "zh" / "_toc.yml", ["genindex.html", "search.html"]))
COLOUR_RULES = ["color-contrast", "link-in-text-block"]

AUDIT = """
async ([tags, colourRules, modes]) => {
  const said = (result) => result.violations.flatMap((rule) =>
    rule.nodes.map((node) => `${rule.id} at ${node.target.join(" ")}: ${node.failureSummary.split("\\n")[1] || ""}`));
  const rules = {"label-content-name-mismatch": {enabled: true}};
  for (const rule of colourRules) rules[rule] = {enabled: false};
  const found = {all: said(await axe.run(document, {runOnly: {type: "tag", values: tags}, rules, resultTypes: ["violations"]}))};
  const kinds = new Set();   // one highlighted token of each kind stands for all the others
  for (const token of document.querySelectorAll("div.highlight pre span[class]")) {
    if (!kinds.has(token.className)) { kinds.add(token.className); token.dataset.axeSample = ""; }
  }
  const colours = {runOnly: {type: "rule", values: colourRules}, resultTypes: ["violations"]};
  for (const mode of modes) {
    document.documentElement.dataset.theme = mode;   // what the theme's colour-mode button sets
    document.documentElement.dataset.mode = mode;
    await Promise.all(document.getAnimations().map((animation) => animation.finished));  // colour transitions
    found[mode] = said(await axe.run({include: [["body"]], exclude: [["div.highlight"]]}, colours));
    if (kinds.size) found[mode].push(...said(await axe.run({include: [["[data-axe-sample]"]]}, colours)));
  }
  return found;
}
"""


@pytest.fixture(scope="module")
def audit(browser, site):  # noqa: F811 (fixtures imported above)
    """audit(path): axe's WCAG 2.1 AA violations of the page, ["rule at target: why", ...], under
    "all" (every rule but the colour ones), "light" and "dark" (the colour rules in each mode).

    One page load per page: switching data-theme, then running axe again, is cheaper than
    loading the page twice.
    """
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(site) else route.abort())

    @functools.cache
    def check(path):
        page = context.new_page()
        page.goto(site + path, wait_until="load")
        page.evaluate("() => window.MathJax?.startup?.promise")  # formulas typeset: axe sees what a reader sees
        page.add_script_tag(content=AXE)
        found = page.evaluate(AUDIT, [WCAG_21_AA, COLOUR_RULES, MODES])
        page.close()
        return found

    yield check
    context.close()


@pytest.fixture(scope="module")
def chapter(visit):  # noqa: F811
    """chapter(path): that page, loaded once for this module's keyboard tests, MathJax done."""

    @functools.cache
    def open_page(path):
        page = visit(path).page
        page.evaluate("() => window.MathJax?.startup?.promise")
        return page

    return open_page


def test_every_page_of_the_site_is_audited(book):
    assert sorted(PAGES) == built_pages(book.html)


@pytest.mark.parametrize("path", PAGES)
def test_page_has_no_wcag_21_aa_violation(audit, path):
    violations = audit(path)["all"]
    assert violations == [], f"{path}:\n" + "\n".join(violations)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", PAGES)
def test_page_colours_meet_wcag_21_aa_in_both_modes(audit, path, mode):
    violations = audit(path)[mode]
    assert violations == [], f"{path} in {mode} mode:\n" + "\n".join(violations)


# ---- the keyboard --------------------------------------------------------------------------


def focused_in(page, selector):
    return page.evaluate(f"document.activeElement?.closest({selector!r}) !== null")


def test_tab_reaches_the_explorer_in_few_presses(visit):  # noqa: F811
    page = visit(EXPLORER_PAGE).page  # a page of its own: Tab starts from the top
    page.evaluate("() => window.MathJax?.startup?.promise")
    for presses in range(1, MOST_TABS_TO_EXPLORER + 1):
        page.keyboard.press("Tab")
        if focused_in(page, ".addnorm-explorer"):
            break
    else:
        pytest.fail(f"{MOST_TABS_TO_EXPLORER} Tab presses did not reach the explorer")
    assert presses <= MOST_TABS_TO_EXPLORER


FOCUSABLE_FORMULAS = """() => [...document.querySelectorAll('mjx-container')]
  .filter((formula) => formula.tabIndex >= 0 || formula.querySelector('[tabindex]:not([tabindex^="-"])'))
  .map((formula) => ({display: formula.getAttribute('display') === 'true',
                      scrolls: formula.scrollWidth > formula.clientWidth + 1}))"""


@pytest.mark.parametrize("path", ["chapters/01_residual_connections.html", EXPLORER_PAGE])
def test_only_formulas_that_scroll_are_in_the_tab_order(chapter, path):
    page = chapter(path)
    assert page.locator("mjx-container").count() > 50
    focusable = page.evaluate(FOCUSABLE_FORMULAS)
    assert all(formula == {"display": True, "scrolls": True} for formula in focusable)
    assert len(focusable) <= 3


def test_keyboard_toggles_the_instability_and_the_bars_follow(chapter):
    page = chapter(EXPLORER_PAGE)
    page.evaluate("window.addNormExplorer.reset()")
    before = page.evaluate("window.addNormExplorer.state().stages.summed")
    page.locator(".ane-instability").focus()
    page.keyboard.press("Space")
    assert page.locator(".ane-instability").get_attribute("aria-pressed") == "true"
    assert page.evaluate("window.addNormExplorer.state().stages.summed") != before
    page.keyboard.press("Space")


def test_keyboard_moves_the_gamma_slider_and_the_output_follows(chapter):
    page = chapter(EXPLORER_PAGE)
    page.evaluate("window.addNormExplorer.reset()")
    page.locator(".ane-gamma").focus()
    page.keyboard.press("ArrowRight")
    assert page.locator(".ane-gamma-value").text_content() == "1.1"
    state = page.evaluate("window.addNormExplorer.state()")
    assert state["stages"]["y"] == pytest.approx([1.1 * v for v in state["stages"]["xHat"]])


LIVE_CHANGES = """
async (slider) => {
  const regions = [...document.querySelectorAll('[aria-live], [role=status], [role=alert], [role=log], output')]
    .filter((region) => (region.getAttribute('aria-live') || 'polite') !== 'off');
  const changed = new Set();
  const observer = new MutationObserver((records) => {
    for (const record of records) {
      const node = record.target.nodeType === 1 ? record.target : record.target.parentElement;
      for (const region of regions) if (region.contains(node)) changed.add(region.className);
    }
  });
  for (const region of regions) observer.observe(region, {subtree: true, childList: true, characterData: true});
  document.querySelector(slider).focus();
  document.querySelector(slider).dispatchEvent(new Event('input', {bubbles: true}));
  await new Promise((resolve) => setTimeout(resolve, 0));
  observer.disconnect();
  return [...changed];
}
"""


@pytest.mark.parametrize("slider", [".ane-gamma", ".ane-beta"])
def test_one_live_region_changes_per_slider_step(chapter, slider):
    page = chapter(EXPLORER_PAGE)
    page.evaluate("window.addNormExplorer.reset()")
    page.evaluate(f"document.querySelector({slider!r}).stepUp()")
    assert page.evaluate(LIVE_CHANGES, slider) == ["ane-announcer addnorm-sr-only"]
    said = page.locator(".ane-announcer").text_content()
    assert said.startswith("γ = ") and "y = " in said


def quiz_state(page, number):
    """Which answer is checked, which feedback is shown and which marks are drawn in quiz ``number``."""
    return page.evaluate(
        """(number) => {
          const quiz = document.getElementById(`quiz-${number}`);
          return {
            checked: quiz.querySelector('input:checked')?.value ?? null,
            shown: [...quiz.querySelectorAll('.quiz-feedback')].filter((f) => !f.hidden).map((f) => f.dataset.index),
            marks: [...quiz.querySelectorAll('.quiz-mark')].map((m) => m.textContent).join(''),
          };
        }""",
        number,
    )


def test_arrow_keys_browse_quiz_answers_without_a_verdict(chapter):
    page = chapter(QUIZ_PAGE)
    page.locator("#quiz-1-0").focus()
    for key, index in [("Space", "0"), ("ArrowDown", "1"), ("ArrowDown", "2"), ("ArrowUp", "1")]:
        page.keyboard.press(key)
        assert quiz_state(page, 1) == {"checked": index, "shown": [], "marks": ""}


@pytest.mark.parametrize("how, number", [("Enter on the answer", 2), ("the Check button", 4)])
def test_checking_reveals_the_verdict_of_the_chosen_answer(chapter, how, number):
    page = chapter(QUIZ_PAGE)
    right = page.locator(f'#quiz-{number} input[data-right="true"]').get_attribute("value")
    page.locator(f"#quiz-{number}-0").focus()
    page.keyboard.press("Space")
    for _ in range(int(right)):
        page.keyboard.press("ArrowDown")
    assert quiz_state(page, number)["shown"] == []
    if how == "Enter on the answer":
        page.keyboard.press("Enter")
    else:
        page.keyboard.press("Tab")
        assert focused_in(page, f"#quiz-{number} .quiz-check")
        page.keyboard.press("Space")
    assert quiz_state(page, number) == {"checked": right, "shown": [right], "marks": "✓"}
    assert page.locator(f"#quiz-{number} .quiz-feedback:visible .quiz-verdict").text_content() == "✓ Right."


def test_quiz_answer_name_keeps_its_formula(chapter):
    page = chapter(QUIZ_PAGE)
    assert page.get_by_role("radio", name="at least √ϵ: a constant row gives zeros instead of 0/0").count() == 1


FOCUSED_CONTROLS = [
    ".bd-header-article .edition-switch",
    ".bd-header-article .theme-switch-button",
    ".bd-header-article .dropdown-toggle",
    ".bd-header-article .primary-toggle",
    "details.hide summary",
    ".ane-new",
    ".ane-gamma",
    "#quiz-3-0",
]

FOCUS_RING = """(selector) => {
  const control = document.querySelector(selector);
  control.focus();
  const style = getComputedStyle(control);
  return {visible: control.matches(':focus-visible'), outline: style.outlineStyle, width: style.outlineWidth,
          shadow: style.boxShadow};
}"""


@pytest.mark.parametrize("selector", FOCUSED_CONTROLS)
def test_focused_control_shows_a_focus_ring(chapter, selector):
    page = chapter(EXPLORER_PAGE)
    page.keyboard.press("Shift")  # a key, not the mouse, moved the focus last: :focus-visible applies
    ring = page.evaluate(FOCUS_RING, selector)
    assert ring["visible"]
    assert (ring["outline"] != "none" and float(ring["width"].removesuffix("px")) >= 2) or ring["shadow"] != "none"


# ---- tables --------------------------------------------------------------------------------

# The explorer's fallback (chapter 2) is a table a script replaces; its paragraph says what it shows.
FALLBACK = "ane-fallback"
CJK = re.compile("[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def table_captions(book):
    """page -> the caption of every table in its article, in order ("" for a table without one)."""
    captions = {}
    for path in built_pages(book.html):
        soup = BeautifulSoup((book.html / path).read_text(encoding="utf-8"), "html.parser")
        tables = [table for table in soup.select("article table") if not table.find_parent(class_=FALLBACK)]
        if tables:
            captions[path] = [" ".join(table.caption.get_text(" ", strip=True).split()) if table.caption else ""
                              for table in tables]
    return captions


def test_tables_of_both_editions_are_found(table_captions):
    assert sum(len(captions) for path, captions in table_captions.items() if not path.startswith("zh/")) >= 21
    assert sum(len(captions) for path, captions in table_captions.items() if path.startswith("zh/")) >= 22


def test_every_table_has_a_caption(table_captions):
    uncaptioned = [f"{path} table {index + 1}" for path, captions in table_captions.items()
                   for index, caption in enumerate(captions) if not caption.strip("¶ ")]
    assert uncaptioned == []


@pytest.mark.parametrize("edition, number", [("en", re.compile(r"Table \d+ \S")),
                                             ("zh", re.compile(r"表 \d+： \S"))])
def test_table_captions_are_numbered_like_figures(table_captions, edition, number):
    captions = [caption for path, captions in table_captions.items()
                if path.startswith("zh/") == (edition == "zh") for caption in captions]
    assert [caption for caption in captions if not number.match(caption)] == []


def test_chinese_table_captions_are_in_chinese(table_captions):
    captions = [caption for path, captions in table_captions.items() if path.startswith("zh/") for caption in captions]
    assert [caption for caption in captions if len(CJK.findall(caption)) < 4] == []



@pytest.mark.parametrize("path", TABLE_PAGES + [f"zh/{path}" for path in TABLE_PAGES])
def test_every_table_row_has_a_row_header(chapter, path):
    page = chapter(path)
    rows = page.locator("article table tbody tr")
    assert rows.count() > 0
    assert page.locator('article table tbody tr:not(:has(> th[scope="row"]))').count() == 0


@pytest.mark.parametrize("path, yes, no", [("chapters/05_rmsnorm.html", "yes", "no"),
                                          ("zh/chapters/05_rmsnorm.html", "是", "否")])
def test_check_marks_in_tables_say_yes_or_no_in_words(chapter, path, yes, no):
    page = chapter(path)
    cells = page.locator("article table td").filter(has_text=re.compile("[✔✘]"))
    assert cells.count() >= 20
    for text in cells.all_text_contents():
        assert text.strip() in (f"✔{yes}", f"✘{no}")
