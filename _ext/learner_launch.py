"""Colab and Binder buttons that open the learner's copy, not the course's repository.

sphinx-book-theme builds a chapter's launch buttons from ``repository.url`` and ``branch``, the
same values its repository and issues buttons use. Those two stay on the course's repository; the
notebooks a learner should open live in the learner's copy (``python -m tools.learner_copy``),
named once by ``learner_copy`` in the English edition's ``_config.yml``, which the Chinese edition
reads too. The copy keeps every notebook at its path in the repository, so only the repository part
of each launch address changes. An address in an unexpected form is a warning, which fails the
strict build, rather than a button that opens the wrong repository.

The chapters' own Colab, Binder and fetch links are written out in the pages; one that names
another repository than the copy is a warning too, which says to run ``--relink``.
"""

import sys
from pathlib import Path
from urllib.parse import urlparse

from sphinx.util import logging

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's top folder, for tools/
from tools.learner_copy import RELINK, copy_repository, links_elsewhere  # noqa: E402

logger = logging.getLogger(__name__)


def repository_parts(url: str, branch: str, copy: tuple[str, str]) -> list[tuple[str, str]]:
    """(course's form, learner copy's form) of the repository part of a Binder and a Colab address."""
    repo = urlparse(url).path.strip("/")
    copy_repo, copy_branch = copy
    return [
        (f"/v2/gh/{repo}/{branch}?", f"/v2/gh/{copy_repo}/{copy_branch}?"),  # Binder
        (f"/github/{repo}/blob/{branch}/", f"/github/{copy_repo}/blob/{copy_branch}/"),  # Colab
    ]


def point_to_learner_copy(app, pagename, templatename, context, doctree):
    groups = [b for b in context.get("header_buttons", []) if b.get("label") == "launch-buttons"]
    if not groups:
        return
    options = app.config.html_theme_options
    # the theme's own default branch when none is configured
    parts = repository_parts(options["repository_url"], options.get("repository_branch") or "master",
                             copy_repository())
    for button in groups[0]["buttons"]:
        if button.get("type") != "link":
            continue
        old = button["url"]
        for course, copy in parts:
            button["url"] = button["url"].replace(course, copy)
        if button["url"] == old:
            logger.warning(f"{pagename}: the {button['text']} button opens {old}, "
                           "not the learner's copy (_ext/learner_launch.py knows Binder and Colab only)")


def check_links(app, docname, source):
    for link in links_elsewhere(source[0]):
        logger.warning(f"{link}... is not the learner's copy (learner_copy in _config.yml): run {RELINK}",
                       location=docname)


def setup(app):
    app.connect("source-read", check_links)
    # The theme adds its launch buttons at priority 501; rewrite them once they are there.
    app.connect("html-page-context", point_to_learner_copy, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
