"""Keep the built book self-contained: no script or stylesheet from the network.

Jupyter Book always loads sphinx-thebe, which embeds the address of thebe's
JavaScript on a CDN even when live code is switched off (as it is here). This
extension drops thebe's assets from every page and turns any other external
script or stylesheet into a build warning, so the strict build (-W) fails
rather than ship a page that needs the network.
"""

from sphinx.util import logging

logger = logging.getLogger(__name__)

THEBE_MARKERS = ("THEBE_JS_URL", "sphinx-thebe.js")


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


def setup(app):
    # Run after sphinx-book-theme and sphinx-thebe have added their assets.
    app.connect("html-page-context", keep_assets_local, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
