"""The book on a phone: no page scrolls sideways, nothing is cut off, figures stay legible.

Every page of both editions (_toc.yml, zh/_toc.yml) is opened 390 CSS pixels wide (a common phone) in Debian's Chromium,
started as in test_browser.py, from the session's strict build. A full-page screenshot of each
goes to tests/artifacts/phone-<page>.png.
"""

import functools

import pytest
import yaml
from tests.conftest import REPO
from tests.test_browser import ARTIFACTS, browser, site  # noqa: F401 (fixtures)

PHONE = 390  # CSS pixels
# Smallest rendered width of a figure, as a fraction of its natural width. The plots' text is
# at least 9 points at 110 dpi (13.75 px): at 0.45 it is still over 6 CSS pixels, about 18
# device pixels on a phone's 3x screen. A 10.2-inch-wide row of three panels gets 0.32.
MIN_FIGURE_SCALE = 0.45

MEASURE = """
() => {
  const vw = document.documentElement.clientWidth;
  const box = el => el.getBoundingClientRect();
  const text = el => (el.getAttribute('alt') || el.textContent || '').trim().slice(0, 70);
  const cut = [];
  const candidates = 'mjx-container, img, table, pre, p, li, h1, h2, h3, h4, code, dt, dd';
  for (const el of document.querySelectorAll(`article.bd-article :is(${candidates})`)) {
    const r = box(el);
    if (r.width === 0 || r.height === 0) continue;            // not shown (collapsed input)
    let clip = null, scroller = null;                         // the nearest of each above el
    for (let a = el.parentElement; a && a !== document.body && !scroller; a = a.parentElement) {
      const overflow = getComputedStyle(a).overflowX;
      if (overflow === 'auto' || overflow === 'scroll') scroller = a;
      else if (overflow !== 'visible' && !clip) clip = a;
    }
    const where = [el.tagName.toLowerCase(), text(el), Math.round(r.left), Math.round(r.right)];
    if (clip && (r.right > box(clip).right + 1 || r.left < box(clip).left - 1)) {
      cut.push(['clipped', ...where]);                        // hidden, and no way to scroll to it
    }
    const frame = scroller ? box(scroller) : r;                // a scroll box must fit the screen
    if (frame.right > vw + 1 || frame.left < -1) cut.push(['beyond the screen', ...where]);
  }
  const figures = [...document.querySelectorAll('article.bd-article img')].map(img => ({
    src: img.getAttribute('src'), natural: img.naturalWidth, shown: box(img).width,
  }));
  const tables = [...document.querySelectorAll('article.bd-article table')].map(table => {
    const holder = table.parentElement;
    return {
      text: text(table),
      overflows: holder.scrollWidth > holder.clientWidth + 1,
      scrolls: ['auto', 'scroll'].includes(getComputedStyle(holder).overflowX),
      hint: getComputedStyle(holder, '::before').content,
    };
  });
  return {width: document.documentElement.scrollWidth, viewport: vw, cut, figures, tables};
}
"""


def pages_in_toc(toc_file):
    toc = yaml.safe_load(toc_file.read_text())
    files = [toc["root"]] + [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    return [f"{name}.html" for name in files]


PAGES = pages_in_toc(REPO / "_toc.yml") + [f"zh/{page}" for page in pages_in_toc(REPO / "zh" / "_toc.yml")]


@pytest.fixture(scope="module")
def on_phone(browser, site):  # noqa: F811 (fixtures imported above)
    """on_phone(path): the page's measurements at phone width, taken once; saves a screenshot."""
    context = browser.new_context(viewport={"width": PHONE, "height": 844}, device_scale_factor=1)
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(site)
                  else route.abort())

    @functools.cache
    def measure(path):
        page = context.new_page()
        page.goto(site + path, wait_until="networkidle")
        page.evaluate("document.fonts.ready")
        page.wait_for_function("[...document.images].every(i => i.complete)")
        page.wait_for_timeout(500)  # MathJax typesets, the theme marks scrollable boxes
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=ARTIFACTS / f"phone-{path.replace('/', '-').removesuffix('.html')}.png",
                        full_page=True)
        result = page.evaluate(MEASURE)
        page.close()
        return result

    yield measure
    context.close()


@pytest.mark.parametrize("path", PAGES)
def test_page_is_no_wider_than_the_phone_screen(on_phone, path):
    measured = on_phone(path)
    assert measured["width"] <= measured["viewport"] == PHONE


@pytest.mark.parametrize("path", PAGES)
def test_nothing_is_cut_off_at_the_edge_of_the_column(on_phone, path):
    """Text, formulas, figures and tables end inside the screen, or inside a box that scrolls."""
    assert on_phone(path)["cut"] == []


@pytest.mark.parametrize("path", PAGES)
def test_figures_shrink_to_no_less_than_a_legible_fraction_of_their_size(on_phone, path):
    figures = on_phone(path)["figures"]
    assert all(f["natural"] > 0 for f in figures), "an image did not load"
    too_small = [f"{f['src']}: {f['shown']:.0f} of {f['natural']} px" for f in figures
                 if f["shown"] < MIN_FIGURE_SCALE * f["natural"]]
    assert too_small == []


@pytest.mark.parametrize("path", PAGES)
def test_a_table_wider_than_the_screen_scrolls_and_says_so(on_phone, path):
    for table in on_phone(path)["tables"]:
        if table["overflows"]:
            assert table["scrolls"], table["text"]
            assert table["hint"] not in ("none", "normal", ""), f"no scroll hint above: {table['text']}"
