"""Keep the built book self-contained and light: no script or stylesheet from the network, and no
more on a page than the page uses.

Jupyter Book always loads sphinx-thebe, which embeds the address of thebe's JavaScript on a CDN
even when live code is switched off (as it is here). This extension drops thebe's assets from every
page and turns any other external script or stylesheet into a build warning, so the strict build
(-W) fails rather than ship a page that needs the network.

It also makes pages lighter for a reader on a cold cache:

- ``templates/layout.html`` overrides two blocks of the theme's page: no Font Awesome JavaScript
  (the theme's stylesheet draws the same icons from its web fonts), and Sphinx's search index only
  on the search page;
- those web fonts (0.27 MB) are cut down to the icons the built pages and the theme's scripts name
  (``fa-github``, ``fa-bars``, ...): ``_static/icons.css`` declares the two font faces again, after
  the theme's stylesheet, from the subsets this extension writes to ``_static/icons/`` when the build
  has finished; and the theme's stylesheet keeps the rules of those icons only (it names 1,834, in
  85 kB), each giving its glyph an empty alternative text, as the script's SVG icons were hidden
  from screen readers;
- MathJax (served from ``_static/mathjax`` by sphinx-mathjax-offline) is loaded as the components a
  page with formulas needs, TeX in and CommonHTML out plus the hidden MathML that screen readers
  read, rather than ``tex-chtml.js``, which also bundles MathJax's contextual menu (0.4 MB, and it
  puts every formula in the Tab order). Formulas are typeset by the same input and output code, in
  the same fonts. Pages without formulas load no MathJax at all (Sphinx's own rule);
- the figures (matplotlib's PNGs) are shown as lossless WebP, about half the bytes for the same
  pixels: when the build has finished, every PNG under ``_images/`` that a page shows is re-encoded,
  the pages' ``src`` rewritten, and the PNG deleted unless a page still names it (a download link).
"""

import re
import time
from pathlib import Path

from fontTools import subset
from PIL import Image
from sphinx.util import logging

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
THEBE_MARKERS = ("THEBE_JS_URL", "sphinx-thebe.js")
MATHJAX_STARTUP = "mathjax/startup.js"  # MathJax's loader; it fetches the components below and what they need
MATHJAX_COMPONENTS = ["input/tex", "output/chtml", "a11y/assistive-mml"]
ICON_FONTS = {"fa-solid-900.ttf": "solid.woff", "fa-brands-400.ttf": "brands.woff"}  # as _static/icons.css names them
ICON_NAME = re.compile(r"\bfa-[a-z0-9-]+")
ICON_SELECTOR = re.compile(r"\.fa-[a-z0-9-]+:before")
ICON_RULE = re.compile(  # .fa-bars:before{content:"\f0c9"}, or as keep_icon_rules() leaves it
    r'(?<=[{}])([^{}]+)\{content:"\\([0-9a-f]+)"(?:;content:"\\[0-9a-f]+"/"")?\}')


def _is_thebe(asset) -> bool:
    text = f"{asset.filename or ''} {asset.attributes.get('body', '')}"
    return any(marker in text for marker in THEBE_MARKERS)


def _is_external(asset) -> bool:
    name = asset.filename or ""
    return name.startswith(("http://", "https://", "//"))


def keep_assets_local(app, pagename, templatename, context, doctree):
    for key in ("script_files", "css_files"):
        assets = [a for a in context.get(key, []) if not _is_thebe(a)]
        for asset in assets:
            if _is_external(asset):
                logger.warning(
                    "page %s loads %s from the network; vendor it under _static/",
                    pagename,
                    asset.filename,
                    type="offline",
                )
        context[key] = assets


def load_less(app, config):
    """The lighter page template, and MathJax as the components pages need."""
    templates = str(HERE / "templates")
    if templates not in config.templates_path:
        config.templates_path.append(templates)
    config.mathjax_path = MATHJAX_STARTUP
    mathjax = dict(config.mathjax3_config or {})
    loader = dict(mathjax.get("loader", {}))
    loader["load"] = [*loader.get("load", []), *(c for c in MATHJAX_COMPONENTS if c not in loader.get("load", []))]
    mathjax["loader"] = loader
    config.mathjax3_config = mathjax


def names_in_use(outdir: Path) -> set[str]:
    """The Font Awesome classes (``fa-github``, ...) that the built pages and the theme's scripts name."""
    names = set()
    for path in [*outdir.rglob("*.html"), *(outdir / "_static" / "scripts").glob("*.js")]:
        names |= set(ICON_NAME.findall(path.read_text(encoding="utf-8", errors="ignore")))
    return names


def keep_icon_rules(css: str, names: set[str]) -> tuple[str, set[int]]:
    """``css`` without the rules of icons not in ``names``, and the code points of those in it.

    The rules kept give their glyph an empty alternative text (``content: "\\f09b" / ""``), after
    the plain ``content`` for a browser that does not know that syntax.
    """
    used = {f".{name}" for name in names}
    codes = set()

    def keep(rule):
        selectors = [s.strip() for s in rule[1].split(",")]
        if not all(ICON_SELECTOR.fullmatch(s) for s in selectors):
            return rule[0]  # not an icon's rule
        if any(s.removesuffix(":before") in used for s in selectors):
            codes.add(int(rule[2], 16))
            # The glyph with an empty alternative text, so that it adds nothing to the name a screen
            # reader gives its link or button (the theme's script drew it as an aria-hidden SVG).
            return f'{rule[1]}{{content:"\\{rule[2]}";content:"\\{rule[2]}"/""}}'
        return ""

    return ICON_RULE.sub(keep, css), codes


def subset_icon_fonts(app, exception):
    """Keep only the icons in use: in _static/icons/{solid,brands}.woff, and in the theme's stylesheet."""
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    theme_css = outdir / "_static" / "styles" / "pydata-sphinx-theme.css"
    css, codes = keep_icon_rules(theme_css.read_text(encoding="utf-8"), names_in_use(outdir))
    theme_css.write_text(css, encoding="utf-8")
    webfonts = outdir / "_static" / "vendor" / "fontawesome" / "webfonts"  # as the theme ships them
    (outdir / "_static" / "icons").mkdir(exist_ok=True)
    options = subset.Options(flavor="woff", layout_features=[], name_IDs=["*"], notdef_outline=True)
    for source, name in ICON_FONTS.items():
        font = subset.load_font(str(webfonts / source), options)
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=codes)
        subsetter.subset(font)
        subset.save_font(font, str(outdir / "_static" / "icons" / name), options)


SHOWN_PNG = re.compile(r"""(<img\b[^>]*?\bsrc=")((?:\.\./)*_images/[^"/]+)\.png(?=")""")
WEBP = {"lossless": True, "exact": True, "method": 4, "quality": 80}  # 3% above method 6, in 1/20 of its time


def to_webp(png: Path) -> Path:
    """``png`` re-encoded as lossless WebP next to it (done again only if the PNG is newer)."""
    webp = png.with_suffix(".webp")
    if not webp.exists() or webp.stat().st_mtime < png.stat().st_mtime:
        with Image.open(png) as image:
            image.save(webp, "WEBP", **WEBP)
    return webp


def webp_figures(app, exception):
    """Show every PNG of _images/ that a page shows as lossless WebP; keep a PNG only if a page names it still."""
    if exception is not None or app.builder.format != "html":
        return
    start = time.perf_counter()
    outdir = Path(app.outdir)
    images = outdir / "_images"
    shown, pages = set(), list(outdir.rglob("*.html"))

    def rewrite(match):
        png = images / f"{match[2].rsplit('/', 1)[-1]}.png"
        if not png.is_file():
            return match[0]
        to_webp(png)
        shown.add(png.name)
        return f"{match[1]}{match[2]}.webp"

    texts = {}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        converted = SHOWN_PNG.sub(rewrite, text)
        if converted != text:
            page.write_text(converted, encoding="utf-8")
        texts[page] = converted
    for name in shown:
        if not any(name in text for text in texts.values()):
            (images / name).unlink()
    logger.info("figures as lossless WebP: %d in %.1f s", len(shown), time.perf_counter() - start)


def setup(app):
    # After sphinx-mathjax-offline's setup() has set mathjax_path to its tex-chtml.js.
    app.connect("config-inited", load_less, priority=900)
    # Run after sphinx-book-theme and sphinx-thebe have added their assets.
    app.connect("html-page-context", keep_assets_local, priority=900)
    app.connect("build-finished", subset_icon_fonts)
    app.connect("build-finished", webp_figures)
    app.add_css_file("icons.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
