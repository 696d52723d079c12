"""The book's two editions: English at the site's root, Simplified Chinese under ``zh/``.

Every page gets a link to the same page in the other edition, in the article's header bar next
to the theme's buttons, and a ``<link rel="alternate" hreflang>`` for search engines. Both editions
have the same page names (``tools/editions.py`` checks it), so the link is the page's own path
with the other edition's root in front. The two twins also have the same sections, and each Chinese
section takes its English twin's id (read from the English build's doctrees, which
``tools/book_build.py`` names in ``bilingual_twin_doctrees``), so a section's anchor is the same in
both editions and the switch can keep it (``templates/edition-switch.html``).

The ``{glossary-table}`` directive renders ``zh/glossary.yml``, the terms the Chinese edition
uses, as a table: English first in the English edition, Chinese first in the Chinese one.

Search finds the glossary's terms in both editions. The Chinese edition's search index splits
Chinese text into words with jieba (Sphinx's ``sphinx.search.zh``), given the glossary's terms as
a user dictionary so that 层归一化 or 前置归一化 stay whole words. A term with ``introduced_in``
gets invisible index entries on that page (its wording, and the other wordings readers type:
``also`` in Chinese, ``also_en`` in English), which Sphinx's search matches against the whole
query: 层规范化 leads to the layer-normalization chapter although the book never writes it.
"""

import logging
import pickle
import re
from pathlib import Path

import yaml
from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging as sphinx_logging
from sphinx.util.docutils import SphinxDirective

logger = sphinx_logging.getLogger(__name__)

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
    href = "../" * pagename.count("/") + prefix + pagename + ".html"
    context["edition_switch"] = {"href": href, "hreflang": hreflang, "label": label, "title": title}
    context["metatags"] = context.get("metatags", "") + f'\n<link rel="alternate" hreflang="{hreflang}" href="{href}" />'


# Sphinx writes a caption's number as numfig_format's "图 %s" and a space. A Chinese caption reads
# 图 3：…, but numfig_format cannot say so: {numref} would write 图 3： in the middle of a sentence.
CAPTION_NUMBER = re.compile(r'(<span class="caption-number">[^<]*?\d) </span>')


def number_captions(app, pagename, templatename, context, doctree):
    """Chinese edition: a figure's or table's caption starts 图 3：, the number set off by a full-width colon."""
    if is_chinese(app.config) and "body" in context:
        context["body"] = CAPTION_NUMBER.sub(r"\1：</span>", context["body"])


def take_twin_section_ids(app, doctree):
    """Chinese edition: every section's first id becomes its English twin's, so an anchor names one section in both."""
    folder = app.config.bilingual_twin_doctrees
    twin = Path(folder) / f"{app.env.docname}.doctree" if folder else None
    if twin is None or not twin.is_file():
        return
    app.env.note_dependency(str(twin))
    ours = list(doctree.findall(nodes.section))
    theirs = list(pickle.loads(twin.read_bytes()).findall(nodes.section))
    if len(ours) != len(theirs):
        logger.warning("%d sections here, %d in the English twin: they cannot share their anchors",
                       len(ours), len(theirs), location=app.env.docname)
        return
    anchors = [english["ids"][0] for english in theirs]
    for section, anchor in zip(ours, anchors):
        # An id made from a Chinese title ("更进一步：三明治归一化与 DeepNorm" gives "deepnorm") may be
        # another section's English anchor: it gives way.
        for clash in [i for i in section["ids"] if i in anchors and i != anchor]:
            section["ids"].remove(clash)
            doctree.ids.pop(clash, None)
    for section, anchor in zip(ours, anchors):
        if anchor in section["ids"]:
            section["ids"].remove(anchor)
        elif anchor in doctree.ids:
            continue  # another element of this page has that id
        section["ids"].insert(0, anchor)
        doctree.ids[anchor] = section


def add_header_component(app, config):
    config.templates_path.append(str(HERE / "templates"))
    options = config.html_theme_options
    end = options.get("article_header_end", ["article-header-buttons.html"])
    end = [end] if isinstance(end, str) else list(end)
    options["article_header_end"] = ["edition-switch.html", *end]


def load_glossary() -> list[dict]:
    """The glossary's entries: ``en``, ``zh`` and optionally ``avoid`` (wordings not to use) and ``note``."""
    return yaml.safe_load(GLOSSARY.read_text(encoding="utf-8"))["terms"]


def wordings(text: str) -> list[str]:
    """The wordings of a glossary field: "均值 / 方差" is two, "(LayerNorm)" and the like are dropped."""
    return [part.strip() for part in re.sub(r"\s*\(.*?\)", "", text).split(" / ") if part.strip()]


def search_entries(term: dict, chinese: bool) -> list[str]:
    """What a search for this term may be typed as, in one edition: the term itself and its alternatives."""
    if chinese:
        return [*wordings(term["zh"]), *term.get("also", [])]
    return [*wordings(term["en"]), *term.get("also_en", [])]


def use_glossary_as_search_dictionary(app, config):
    """Chinese edition: jieba splits the pages into words for the search index, keeping the glossary's terms whole."""
    if not is_chinese(config):
        return
    import jieba  # without it Sphinx would silently leave every Chinese word out of the index

    jieba.setLogLevel(logging.WARNING)  # it announces loading its dictionary on stderr
    chinese_word = re.compile(r"[\u4e00-\u9fff]{2,}")
    words = sorted({w for term in load_glossary() for w in wordings(term["zh"]) if chinese_word.fullmatch(w)})
    dictionary = Path(app.doctreedir) / "jieba-glossary.txt"
    dictionary.parent.mkdir(parents=True, exist_ok=True)
    dictionary.write_text("".join(f"{word}\n" for word in words), encoding="utf-8")
    config.html_search_options = {**(config.html_search_options or {}), "dict": str(dictionary)}


def index_glossary_terms(app, doctree):
    """On the page that introduces a term, a main index entry for every wording of it, at the page's title."""
    if not GLOSSARY.is_file():
        return  # a book without the Chinese edition's glossary (the tests' small books)
    chinese = is_chinese(app.config)
    wordings_here = [wording for term in load_glossary() if term.get("introduced_in") == app.env.docname
                     for wording in search_entries(term, chinese)]
    app.env.note_dependency(str(GLOSSARY))
    section = next(iter(doctree.findall(nodes.section)), None)
    if wordings_here and section is not None:
        target = section["ids"][0]
        entries = [("single", wording, target, "main", None) for wording in wordings_here]
        section.insert(1, addnodes.index(entries=entries, inline=False))


GLOSSARY_CAPTION = {"en": "The terms of the Chinese edition, with the English each one translates",
                    "zh": "中文版使用的术语及其对应的英文"}


class GlossaryTable(SphinxDirective):
    """The table of zh/glossary.yml, captioned and numbered like every table of the book."""

    def run(self):
        self.env.note_dependency(str(GLOSSARY))
        chinese = is_chinese(self.config)
        heads = ("中文", "English", "说明") if chinese else ("English", "中文", "Note")
        table = nodes.table(classes=["glossary-table"], names=["table-glossary"])
        self.state.document.note_explicit_target(table, table)  # an id and a label, so Sphinx numbers it
        table += nodes.title("", GLOSSARY_CAPTION["zh" if chinese else "en"])
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
    app.add_config_value("bilingual_twin_doctrees", "", "env")  # the English build's doctrees (Chinese build only)
    app.connect("config-inited", add_header_component)
    app.connect("config-inited", use_glossary_as_search_dictionary)
    app.connect("doctree-read", take_twin_section_ids, priority=400)  # before Sphinx reads the page's sections
    app.connect("doctree-read", index_glossary_terms)
    app.connect("html-page-context", add_switch)
    app.connect("html-page-context", number_captions)
    app.add_directive("glossary-table", GlossaryTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
