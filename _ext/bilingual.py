"""The book's two editions: English at the site's root, Simplified Chinese under ``zh/``.

Every page gets a link to the same page in the other edition, in the article's header bar next
to the theme's buttons, and a ``<link rel="alternate" hreflang>`` for search engines. Both editions
have the same page names (``tools/editions.py`` checks it), so the link is the page's own path
with the other edition's root in front.

The ``{glossary-table}`` directive renders ``zh/glossary.yml``, the terms the Chinese edition
uses, as a table: English first in the English edition, Chinese first in the Chinese one.
"""

from pathlib import Path

import yaml
from docutils import nodes
from sphinx.util.docutils import SphinxDirective

HERE = Path(__file__).resolve().parent
GLOSSARY = HERE.parent / "zh" / "glossary.yml"

EDITIONS = {
    # language of this build: (prefix from this edition's root to the other's, its lang, label, title)
    "en": ("zh/", "zh-CN", "中文", "本页的中文版"),
    "zh_CN": ("../", "en", "English", "This page in English"),
}


def is_chinese(config) -> bool:
    return (config.language or "en").startswith("zh")


def add_switch(app, pagename, templatename, context, doctree):
    prefix, hreflang, label, title = EDITIONS["zh_CN" if is_chinese(app.config) else "en"]
    # A page of this edition only (the Chinese glossary) links to the other edition's first page.
    target = app.config.root_doc if pagename in app.config.bilingual_only_here else pagename
    href = "../" * pagename.count("/") + prefix + target + ".html"
    context["edition_switch"] = {"href": href, "hreflang": hreflang, "label": label, "title": title}
    context["metatags"] = context.get("metatags", "") + f'\n<link rel="alternate" hreflang="{hreflang}" href="{href}" />'


def add_header_component(app, config):
    config.templates_path.append(str(HERE / "templates"))
    options = config.html_theme_options
    end = options.get("article_header_end", ["article-header-buttons.html"])
    end = [end] if isinstance(end, str) else list(end)
    options["article_header_end"] = ["edition-switch.html", *end]


def load_glossary() -> list[dict]:
    """The glossary's entries: ``en``, ``zh`` and optionally ``avoid`` (wordings not to use) and ``note``."""
    return yaml.safe_load(GLOSSARY.read_text(encoding="utf-8"))["terms"]


class GlossaryTable(SphinxDirective):
    def run(self):
        self.env.note_dependency(str(GLOSSARY))
        chinese = is_chinese(self.config)
        heads = ("中文", "English", "说明") if chinese else ("English", "中文", "Note")
        table = nodes.table(classes=["glossary-table"])
        group = nodes.tgroup(cols=3)
        table += group
        group.extend(nodes.colspec(colwidth=width) for width in (3, 3, 6))
        head, body = nodes.thead(), nodes.tbody()
        group += [head, body]
        head += self.row(heads)
        for term in load_glossary():
            note = term.get("note_zh" if chinese else "note_en", "")
            body += self.row((term["zh"], term["en"], note) if chinese else (term["en"], term["zh"], note))
        return [table]

    def row(self, cells):
        row = nodes.row()
        for text in cells:
            entry = nodes.entry()
            paragraph = nodes.paragraph()
            inline, messages = self.state.inline_text(text, self.lineno)
            paragraph.extend(inline)
            entry += [paragraph, *messages]
            row += entry
        return row


def setup(app):
    app.add_config_value("bilingual_only_here", [], "html")  # pages the other edition does not have
    app.connect("config-inited", add_header_component)
    app.connect("html-page-context", add_switch)
    app.add_directive("glossary-table", GlossaryTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
