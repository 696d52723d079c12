"""What the book changes in the HTML of myst-nb and MathJax so that every page meets WCAG 2.1 AA.

- The code-cell toggles (myst-nb's ``hide-input``): myst-nb gives their ``<summary>`` the name
  "Toggle hidden content" while it shows "Show code cell source" (or the edition's
  ``nb_code_prompt_show``). A name that differs from the visible words fails WCAG 2.5.3 (Label
  in Name): here the summary has no ``aria-label``, so its name is the words it shows, in either
  language.
- Formulas out of the Tab order: MathJax 3 makes every formula focusable (for its menu), which put
  108 Tab stops before the explorer of chapter 2. Its menu stays on a right click.

- Copy buttons only on code a reader would copy: sphinx-copybutton put one on every printed output
  too, each one more Tab stop.
- Tables: the first column of every table names its row, so its cells are row headers
  (``<th scope="row">``), and a ✔ or ✘ cell also says "yes" or "no" (是/否) in words a screen
  reader reads (WCAG 1.3.1 Info and Relationships, 1.1.1 Non-text Content). Captions are not made
  here: every table of the chapters sits in MyST's ``{table}`` directive (a glued one too: myst-nb
  pastes a glued table of the same page while parsing), and ``{glossary-table}`` writes its own.

The theme's Search and colour-mode buttons get the same treatment from the templates in
``templates/`` (``search-button-field.html``, ``theme-switcher.html``), and ``_static/a11y.css``
draws a focus ring on every control.
"""

from html import escape

from docutils import nodes
from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.writers.html5 import HTML5Translator

MATHJAX_OPTIONS = {"menuOptions": {"settings": {"inTabOrder": False}}}
# sphinx-copybutton's default is "div.highlight pre"; a cell's printed output sits in a div.output.
COPYBUTTON_SELECTOR = "div:not(.output) > div.highlight pre"


def visit_hide_cell_input(self, node):
    """myst-nb's own visitor without the ``aria-label``: the summary is named by the text it shows."""
    classes = " ".join(node["classes"])
    self.body.append(
        f'<details class="admonition hide {classes}">\n<summary>\n'
        f'<p class="collapsed admonition-title">{escape(node["prompt_show"])}</p>\n'
        f'<p class="expanded admonition-title">{escape(node["prompt_hide"])}</p>\n'
        "</summary>\n"
    )


MARKS = {"✔": {"en": "yes", "zh": "是"}, "✘": {"en": "no", "zh": "否"}}


class TableHeaders(SphinxPostTransform):
    """First columns as row headers; ✔ and ✘ with words. Late, after myst-nb has put glued tables in."""

    default_priority = 900
    formats = ("html",)

    def run(self, **kwargs):
        from bilingual import is_chinese  # loaded by Sphinx from _ext/, as in quiz.py

        language = "zh" if is_chinese(self.config) else "en"
        for table in self.document.findall(nodes.table):
            for tgroup in table.findall(nodes.tgroup):
                colspecs = [child for child in tgroup.children if isinstance(child, nodes.colspec)]
                if len(colspecs) > 1:
                    colspecs[0]["stub"] = 1
            for text in list(table.findall(nodes.Text)):
                mark = text.astext().strip()
                if mark in MARKS:
                    html = (f'<span aria-hidden="true">{mark}</span>'
                            f'<span class="addnorm-sr-only">{MARKS[mark][language]}</span>')
                    text.parent.replace(text, nodes.raw("", html, format="html"))


def visit_entry(self, node):
    """docutils' cell, with ``scope="row"`` on the header cell of a body row."""
    HTML5Translator.visit_entry(self, node)
    if not isinstance(node.parent.parent, nodes.thead) and self.body[-1].startswith("<th "):
        self.body[-1] = '<th scope="row" ' + self.body[-1][len("<th "):]


def fewer_tab_stops(app, config):
    """MathJax's ``inTabOrder: false``, added to whatever ``mathjax3_config`` Jupyter Book sets; no copy
    button on outputs."""
    mathjax = dict(config.mathjax3_config or {})
    options = dict(mathjax.get("options", {}))
    menu = dict(options.get("menuOptions", {}))
    menu["settings"] = {**menu.get("settings", {}), **MATHJAX_OPTIONS["menuOptions"]["settings"]}
    options["menuOptions"] = menu
    mathjax["options"] = options
    config.mathjax3_config = mathjax
    config.copybutton_selector = COPYBUTTON_SELECTOR


def setup(app):
    app.add_node(HideCodeCellNode, override=True, html=(visit_hide_cell_input, depart_HideCellInput))
    app.add_node(nodes.entry, override=True, html=(visit_entry, HTML5Translator.depart_entry))
    app.add_post_transform(TableHeaders)
    app.connect("config-inited", fewer_tab_stops, priority=400)  # before sphinx-copybutton reads its selector
    return {"parallel_read_safe": True, "parallel_write_safe": True}
