"""Pages a reader downloads quickly: what each chapter page of both editions weighs on a cold cache.

The built site is served as GitHub Pages serves it, by ``benchmarks/page_weight.py``'s server: HTML,
JavaScript, CSS, SVG and JSON gzipped for a browser that accepts it, fonts and images as they are.
Every chapter page of both editions is opened in a fresh Chromium context (an empty cache), started
as in test_browser.py, and weighed as the benchmark weighs it: the bytes that crossed the wire
(Chromium's size of each response body as transferred) until MathJax has typeset the page and its
fonts have arrived. The budget is 1.5 MB transferred; chapter pages transfer 0.48-1.11 MB: JavaScript
0.22 MB (most of it MathJax's), fonts 0.07-0.30 MB, figures 0.07-0.46 MB (lossless WebP), the theme's CSS
0.08 MB and the page itself 0.03-0.09 MB. Uncompressed they are still 1.8-2.7 MB (README, Performance).
"""

import gzip
import re
import urllib.request

import pytest
from fontTools.ttLib import TTFont
from tests.conftest import REPO
from tests.test_browser import browser, opened, site, visit  # noqa: F401 (fixtures)

from benchmarks.page_weight import CHAPTER_BUDGET, SETTLED, weigh
from tools.book_build import share_static
from tools.local_site import GzipHandler, served

CHAPTERS = [f"{edition}chapters/{p.stem}.html" for edition in ("", "zh/")
            for p in sorted((REPO / "chapters").glob("[0-9][0-9]_*.md"))]


@pytest.fixture(scope="module")
def hosted(book):
    """Base URL of the built book as a host that gzips text serves it (the benchmark's server)."""
    with served(book.html, GzipHandler) as base:
        yield base


@pytest.fixture(scope="module")
def weight(browser, hosted, book):  # noqa: F811 (fixtures imported above)
    """weight(path): what the page at ``path`` transfers on a cold cache, weighed once."""
    weights = {}

    def weighed(path):
        if path not in weights:
            weights[path] = weigh(browser, hosted + path, path, book.html)
        return weights[path]

    return weighed


@pytest.mark.parametrize("path", CHAPTERS)
def test_chapter_page_transfers_at_most_the_budget_on_a_cold_cache(weight, path):
    assert weight(path).total <= CHAPTER_BUDGET


@pytest.fixture
def text_and_image(tmp_path):
    """A site of one page and one image."""
    (tmp_path / "page.html").write_text("<p>Add &amp; Norm</p>" * 100)
    (tmp_path / "plot.webp").write_bytes(b"RIFF" + bytes(range(256)) * 4)
    return tmp_path


def fetch(url, **headers):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as response:
        return response.headers.get("Content-Encoding"), response.read()


def test_host_gzips_text_for_a_browser_that_accepts_gzip(text_and_image):
    with served(text_and_image, GzipHandler) as base:
        encoding, body = fetch(base + "page.html", **{"Accept-Encoding": "gzip, deflate, br"})
    assert encoding == "gzip"
    assert gzip.decompress(body) == (text_and_image / "page.html").read_bytes()
    assert len(body) < (text_and_image / "page.html").stat().st_size / 10


def test_host_sends_images_and_text_to_a_browser_without_gzip_as_they_are(text_and_image):
    with served(text_and_image, GzipHandler) as base:
        image = fetch(base + "plot.webp", **{"Accept-Encoding": "gzip"})
        page = fetch(base + "page.html")
    assert image == (None, (text_and_image / "plot.webp").read_bytes())
    assert page == (None, (text_and_image / "page.html").read_bytes())


@pytest.mark.parametrize("path", CHAPTERS)
def test_chapter_page_loads_every_asset_from_this_site(weight, path):
    weighed = weight(path)
    assert (weighed.failed, weighed.outside) == ([], [])


@pytest.mark.parametrize("path", CHAPTERS)
def test_chapter_page_loads_no_font_awesome_javascript(weight, path):
    assert "fontawesome.js" not in weight(path).files


@pytest.mark.parametrize("path", CHAPTERS)
def test_chapter_page_loads_no_search_index(weight, path):
    assert not {"searchindex.js", "searchtools.js", "language_data.js"} & weight(path).files


@pytest.mark.parametrize("path", CHAPTERS)
def test_chapter_page_loads_mathjax_without_its_contextual_menu(weight, path):
    assert "startup.js" in weight(path).files
    assert not {"tex-chtml.js", "menu.js"} & weight(path).files


@pytest.mark.parametrize("edition", ["", "zh/"])
def test_header_search_field_leads_to_results_on_the_search_page(visit, edition):  # noqa: F811
    page = visit(f"{edition}chapters/05_rmsnorm.html").page
    page.keyboard.press("Control+k")
    page.keyboard.type("RMSNorm")
    page.keyboard.press("Enter")
    page.wait_for_url("**/search.html?q=RMSNorm*")
    results = page.locator("#search-results ul.search li a")
    results.first.wait_for()
    assert any("05_rmsnorm" in href for href in results.evaluate_all("links => links.map(a => a.href)"))


ICONS = """() => [...document.querySelectorAll(':is(i, span)[class*="fa-"]')]
  .map(icon => [icon.className, getComputedStyle(icon, '::before').content])"""


@pytest.fixture(scope="module")
def icon_font_code_points(book):
    """Every code point the book's cut-down icon fonts hold."""
    fonts = [TTFont(book.html / "_static" / "icons" / name) for name in ("solid.woff", "brands.woff")]
    return set().union(*(font.getBestCmap() for font in fonts))


@pytest.mark.parametrize("edition", ["", "zh/"])
def test_every_icon_of_a_chapter_page_is_drawn_from_the_icon_fonts(
        opened, icon_font_code_points, edition):  # noqa: F811
    """Sidebar toggle, search, launch, GitHub, download and its menu, full screen, colour mode, contents, ..."""
    icons = opened(f"{edition}chapters/02_layer_normalization.html").page.evaluate(ICONS)
    assert len(icons) >= 15
    assert [name for name, content in icons if content in ("none", "normal")] == []  # each has its glyph's rule
    glyphs = {name: content.split('"')[1] for name, content in icons}  # '"\uf09b" / ""': glyph, alternative text
    assert [name for name, glyph in glyphs.items() if ord(glyph) not in icon_font_code_points] == []


@pytest.mark.parametrize("edition", ["", "zh/"])
def test_icons_add_nothing_to_the_names_of_their_links_and_buttons(opened, edition):  # noqa: F811
    """As the theme's script hid its SVG icons: "Previous Residual connections", not "\uf104 Previous ..."."""
    page = opened(f"{edition}chapters/02_layer_normalization.html").page
    controls = page.locator(":is(a, button):has(:is(i, span, svg)[class*='fa-'])")
    read = [controls.nth(i).aria_snapshot() for i in range(controls.count())]
    assert len([name for name in read if name]) >= 8
    assert [name for name in read if re.search("[\ue000-\uf8ff]", name)] == []


@pytest.mark.parametrize("edition", ["", "zh/"])
def test_chapter_formulas_are_typeset_each_with_mathml_for_screen_readers(opened, edition):  # noqa: F811
    page = opened(f"{edition}chapters/02_layer_normalization.html").page
    page.evaluate(SETTLED)
    formulas = page.locator("mjx-container")
    assert formulas.count() > 100
    assert page.locator("mjx-container mjx-assistive-mml math").count() == formulas.count()


def test_chinese_chapter_opened_as_a_file_loads_the_shared_assets(book, browser):  # noqa: F811
    """Opened from disk (file://), a Chinese page finds what it shares in the English site's _static."""
    context = browser.new_context()
    page = context.new_page()
    failed = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.goto((book.html / "zh" / "chapters" / "02_layer_normalization.html").as_uri(), wait_until="load")
    page.evaluate(SETTLED)
    typeset = page.locator("mjx-container").count()
    themed = page.evaluate("getComputedStyle(document.body).getPropertyValue('--pst-color-primary')")
    context.close()
    assert failed == []
    assert typeset > 100
    assert themed.strip()  # the theme's stylesheet applies


def test_chinese_static_folder_holds_only_files_that_differ_from_the_english_one(book):
    english, chinese = book.html / "_static", book.html / "zh" / "_static"
    identical = [path.relative_to(chinese).as_posix() for path in chinese.rglob("*") if path.is_file()
                 and (english / path.relative_to(chinese)).is_file()
                 and path.read_bytes() == (english / path.relative_to(chinese)).read_bytes()]
    assert identical == []
    assert any(chinese.rglob("*.js"))  # what does differ is still there (the Chinese interface strings)


@pytest.fixture
def two_sites(tmp_path):
    """A main site and an edition inside it (``zh/``), each with a _static that is partly the same."""
    files = {
        "_static/same.css": "p {}", "_static/fonts/icon.woff": "font",
        "_static/own.js": "let language = 'en';",
        "zh/_static/same.css": "p {}", "zh/_static/fonts/icon.woff": "font",
        "zh/_static/own.js": "let language = 'zh';",
        "zh/_static/own.css": "@font-face { src: url(fonts/icon.woff) } div { background: url('data:,') }",
        "zh/index.html": '<link href="_static/same.css"><link href="_static/own.css"><script src="_static/own.js">',
        "zh/chapters/one.html": '<link href="../_static/same.css?v=1"><script src="../_static/own.js"></script>',
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_edition_pages_use_the_main_sites_copy_of_every_identical_static_file(two_sites):
    assert share_static(two_sites, two_sites / "zh") == ["fonts/icon.woff", "same.css"]
    zh = two_sites / "zh"
    assert sorted(p.relative_to(zh).as_posix() for p in (zh / "_static").rglob("*")) == [
        "_static/own.css", "_static/own.js"]
    assert (zh / "index.html").read_text() == (
        '<link href="../_static/same.css"><link href="_static/own.css"><script src="_static/own.js">')
    assert (zh / "chapters" / "one.html").read_text() == (
        '<link href="../../_static/same.css?v=1"><script src="../_static/own.js"></script>')
    assert (zh / "_static" / "own.css").read_text() == (
        "@font-face { src: url(../../_static/fonts/icon.woff) } div { background: url('data:,') }")
