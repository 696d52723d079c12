"""Write the .ipynb twin of every text notebook, or check that they are current.

The MyST Markdown file is the one source of truth; the .ipynb beside it exists for Colab and
Binder (chapters of both editions) and for nbgrader (exercise solutions), which open notebooks,
not Markdown. Twins carry no outputs: the book build executes the chapters. Their code cells are
the source's, as jupytext reads them. tools/release_exercises.py calls this module for the solutions.

A chapter's twin is written for a reader in plain Jupyter or Colab, where no MyST extension runs,
so its Markdown cells are rewritten into plain Markdown:

- every pasted measurement (``{glue:text}``, ``{glue:md}``, ``{glue}``) becomes the text the book
  shows, taken from ``chapters/measured.json``: the values the last book build glued, collected by
  ``--measure``; a note in the first Markdown cell says so;
- a ``{quiz}`` becomes its question and answers, with the right answer and the explanations
  folded into a ``<details>`` block;
- a ``{figure}`` becomes an image attached to its cell (so it shows offline and in Colab, which
  fetches no other file), its alt text and its numbered caption; a ``{glue:figure}`` becomes its
  caption, which says that the code cell above draws it;
- admonitions become block quotes; ``{numref}``, ``{ref}`` and ``{doc}`` become their text (a
  link when ``_config.yml`` sets ``html.baseurl``); ``(label)=`` lines go; ``{download}`` becomes
  a link to the file in the learner's copy of ``_config.yml`` (``learner_copy``; the twin is read
  there), or in its ``repository`` when it names no copy; ``{literalinclude}`` becomes
  the included code; links to other chapters' ``.md`` files point to their twins.

Markup it does not know stops it with an error that names the chapter, rather than a twin that
shows raw MyST. Math and code spans are left as they are.

    python -m tools.sync_notebooks            # write the twins
    python -m tools.sync_notebooks --measure  # collect the last build's values, then write the twins
    python -m tools.sync_notebooks --check    # exit 1 if a twin is stale or a value is missing
"""

import argparse
import ast
import base64
import hashlib
import importlib.metadata
import importlib.util
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import jupytext
import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
TEXT_NOTEBOOKS = ("chapters/*.md", "zh/chapters/*.md", "solutions/*/*.md")
MEASURED = Path("chapters") / "measured.json"  # relative to the book's top folder
EXECUTED = Path("_build") / "jupyter_execute"  # where the book build leaves the executed chapters

SYNC = "python -m tools.sync_notebooks"
BUILD = "python -m tools.book_build"

# Glued values that are wall-clock timings, by chapter: they differ from run to run and from
# machine to machine. The twins say so, and the test that compares chapters/measured.json with a
# fresh build leaves them out (it also checks that these patterns match exactly the values glued
# by cells that read a clock).
TIMINGS = {
    "05_rmsnorm": re.compile(r"(time_rms|time_ln|ratio|speed_word)_(handwritten|builtin)_\w+|speed_table(_zh)?"),
}


class TwinError(Exception):
    """A chapter cannot be turned into its twin; the message says why and what to run."""


# ---- which files, which twin ------------------------------------------------------------------


def text_notebooks(root: Path = ROOT) -> list[Path]:
    return sorted(p for pattern in TEXT_NOTEBOOKS for p in root.glob(pattern))


def twin_of(source: Path) -> Path:
    return source.with_suffix(".ipynb")


def is_chapter(source: Path) -> bool:
    """Chapters (both editions) get reader-ready twins; solutions get jupytext's plain conversion."""
    return source.parent.name == "chapters"


def edition_of(source: Path) -> str:
    return "zh" if source.parent.parent.name == "zh" else "en"


def top_folder(source: Path) -> Path:
    """The book's top folder: the one that holds chapters/ (and zh/chapters/)."""
    return source.parents[2] if edition_of(source) == "zh" else source.parents[1]


def is_timing(stem: str, name: str) -> bool:
    pattern = TIMINGS.get(stem)
    return bool(pattern and pattern.fullmatch(name))


# ---- the words a twin adds, in each edition's language ----------------------------------------

WORDS = {
    "en": {
        "figure": "Fig. {number}",  # as {numref} shows it
        "caption": "**Fig. {number}.** {caption}",
        "table": "Table {number}",
        "table_caption": "**Table {number}.** {caption}",
        "drawn_above": "{caption} *(The code cell above draws this figure when you run it.)*",
        "drawn_elsewhere": (
            "{caption} *(The code cell that calls `show_figure(\"{name}\")` draws this figure when you run it.)*"),
        "figure_description": "Description of the figure",
        "question": "**{heading}.** {question}",
        "quiz_summary": "Answer and explanations",
        "quiz_right_answer": "The right answer is **{letter}**.",
        "quiz_explanation": "- **{letter}** ({verdict}): {why}",
        "right": "right",
        "wrong": "wrong",
        "note_title": "About the numbers in this notebook.",
        "note_measured": (
            "The values quoted in the text (numbers, verdicts and tables) are the ones the book shows: they were "
            "measured when the book was built{versions}. Every experiment sets its own seed (in its code), and the cells "
            "print the values the text quotes, so running them computes the values again; another PyTorch version "
            "or processor can change the last digits."
        ),
        "note_versions": ", with Python {python} and PyTorch {torch}",
        "note_timings": " The timings in {sections} depend on the machine and its load: they change from run to run.",
        "note_figures": " The plots appear when you run the cells that draw them.",
        "one_section": "the section “{title}”",
        "sections": "the sections {titles}",
        "title": "“{title}”",
        "and": " and ",
    },
    "zh": {
        "figure": "图 {number}",
        "caption": "**图 {number}**　{caption}",
        "table": "表 {number}",
        "table_caption": "**表 {number}**　{caption}",
        "drawn_above": "{caption}（此图由上方的代码单元格绘制，运行该单元格后显示。）",
        "drawn_elsewhere": "{caption}（此图由调用 `show_figure(\"{name}\")` 的代码单元格绘制，运行该单元格后显示。）",
        "figure_description": "图的文字描述",
        "question": "**{heading}**　{question}",
        "quiz_summary": "答案与解析",
        "quiz_right_answer": "正确答案是 **{letter}**。",
        "quiz_explanation": "- **{letter}**（{verdict}）：{why}",
        "right": "正确",
        "wrong": "错误",
        "note_title": "关于本笔记本中的数字。",
        "note_measured": (
            "正文引用的测量值（数字、结论和表格）与书中显示的相同：它们是在构建本书时测得的{versions}。每个实验都在代码中设定自己的"
            "随机种子，代码单元格也会打印正文引用的值，所以运行这些单元格会重新算出这些值；换用其他版本的 PyTorch 或其他处理器，"
            "末几位数字可能不同。"
        ),
        "note_versions": "（Python {python}，PyTorch {torch}）",
        "note_timings": "{sections}中的计时取决于机器及其负载，每次运行都会不同。",
        "note_figures": "图在运行绘制它们的单元格后显示。",
        "one_section": "“{title}”一节",
        "sections": "{titles}各节",
        "title": "“{title}”",
        "and": "和",
    },
}

# Sphinx's own titles of the admonitions (its zh_CN catalogue for the Chinese edition).
ADMONITIONS = {
    "attention": ("Attention", "注意"),
    "caution": ("Caution", "小心"),
    "danger": ("Danger", "危险"),
    "error": ("Error", "错误"),
    "hint": ("Hint", "提示"),
    "important": ("Important", "重要"),
    "note": ("Note", "备注"),
    "seealso": ("See also", "参见"),
    "tip": ("Tip", "小技巧"),
    "warning": ("Warning", "警告"),
}


def _quiz_module():
    """``_ext/quiz.py``, the book's own parser of ``{quiz}`` blocks, loaded from its file.

    Sphinx loads the book's extensions as top-level modules from ``_ext/``; the parser needs
    nothing from its neighbours, so the file is loaded on its own, without touching ``sys.path``.
    """
    if "quiz" in sys.modules:  # pytest has _ext/ on its pythonpath: the same module, once
        return sys.modules["quiz"]
    spec = importlib.util.spec_from_file_location("quiz", ROOT / "_ext" / "quiz.py")
    quiz = sys.modules["quiz"] = importlib.util.module_from_spec(spec)  # dataclasses look their module up
    spec.loader.exec_module(quiz)
    return quiz


def _format_plain_text(text: str, fmt_spec: str) -> str:
    """What ``{glue:text}`name:fmt_spec``` shows: myst-nb's own formatting, imported when needed."""
    from myst_nb.core.variables import format_plain_text

    return format_plain_text(text, fmt_spec)


# ---- the measured values -------------------------------------------------------------------------

ROLE = re.compile(r"\{(?P<role>[a-z][\w:-]*)\}`(?P<content>[^`]*)`")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|:{3,})(?P<info>.*)$")
DIRECTIVE = re.compile(r"^\{(?P<name>[a-z][\w:-]*)\}\s*(?P<argument>.*)$")
GLUE_ROLES = {"glue", "glue:any", "glue:text", "glue:md"}
GLUE_DIRECTIVES = {"glue", "glue:any", "glue:md"}  # {glue:figure} pastes an image the twin does not carry


@dataclass(frozen=True)
class GlueRef:
    """One place a chapter pastes a glued value: ``kind`` is the role or directive."""

    kind: str
    name: str
    fmt: str = ""

    @classmethod
    def from_role(cls, role: str, content: str) -> "GlueRef":
        if role == "glue:text":  # name:format, split at the last colon as myst-nb does
            name, fmt = content.rsplit(":", 1) if ":" in content else (content, "s")
            return cls(role, name.strip(), fmt)
        if role == "glue:md":
            return cls(role, content.rsplit(":", 1)[0].strip())
        return cls(role, content.strip())

    def render(self, values: dict) -> str:
        """The Markdown the book shows here; ``values`` maps glue names to their mime data."""
        data = values[self.name]
        if self.kind == "glue:text":
            if "text/plain" not in data:
                raise TwinError(f"`{self.name}` has no plain-text value to paste with {{glue:text}}")
            try:
                return markdown_text(_format_plain_text(data["text/plain"], self.fmt))
            except (ValueError, TypeError) as error:
                raise TwinError(f"`{self.name}` cannot be formatted as `{self.fmt}`: {error}") from None
        if "text/markdown" in data:
            return data["text/markdown"]
        if self.kind in ("glue:md",) or "text/plain" not in data:
            raise TwinError(f"`{self.name}` has no Markdown value to paste with {{{self.kind}}}")
        return markdown_text(data["text/plain"])


def markdown_text(text: str) -> str:
    """``text`` escaped so that Markdown shows it as it is (the book pastes it as plain text)."""
    return re.sub(r"([\\`*_<$])", r"\\\1", text)


def glue_references(text: str) -> list[GlueRef]:
    """Every glued value a chapter's prose pastes: the directives, then the roles."""
    prose = _without_code_cells(text)
    found = []
    for line in prose.splitlines():
        fence = FENCE.match(line)
        directive = fence and DIRECTIVE.match(fence["info"].strip())
        if directive and directive["name"] in GLUE_DIRECTIVES:
            found.append(GlueRef(directive["name"], directive["argument"].strip()))
    for match in ROLE.finditer(prose):
        if match["role"] in GLUE_ROLES:
            found.append(GlueRef.from_role(match["role"], match["content"]))
    return found


def _without_code_cells(text: str) -> str:
    return re.sub(r"^```\{code-cell\}.*?^```$", "", text, flags=re.M | re.S)


def measured_path(root: Path = ROOT) -> Path:
    return root / MEASURED


def load_measured(root: Path = ROOT) -> dict:
    """``chapters/measured.json``: {"environment": {...}, "chapters": {stem: {name: {mime: text}}}}."""
    path = measured_path(root)
    if not path.exists():
        return {"environment": {}, "chapters": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def _code_cells(notebook) -> list[str]:
    return [_text(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code"]


def _glued_in(executed_notebook: Path) -> dict[str, dict[str, str]]:
    """name -> mime data of every value an executed chapter glued (its .glue.json, else its outputs)."""
    glue_file = executed_notebook.with_suffix(".glue.json")
    if glue_file.exists():
        entries = json.loads(glue_file.read_text(encoding="utf-8"))
        return {name: {mime: _text(text) for mime, text in entry["data"].items()} for name, entry in entries.items()}
    glued = {}
    for cell in json.loads(executed_notebook.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                glued[name] = {mime: _text(text) for mime, text in output.get("data", {}).items()}
    return glued


def measure(executed: Path | None = None, root: Path = ROOT) -> dict:
    """The measured values the chapters of both editions paste, read from the build's executed notebooks.

    Refuses a build whose code is not the chapters' code (a stale ``_build``) and a pasted name the
    build did not glue, naming the chapter and what to run.
    """
    executed = executed or root / EXECUTED
    sources: dict[str, list[Path]] = {}
    for source in text_notebooks(root):
        if is_chapter(source):
            sources.setdefault(source.stem, []).append(source)
    chapters, python = {}, None
    for stem, editions in sorted(sources.items()):
        notebook_path = executed / "chapters" / f"{stem}.ipynb"
        if not notebook_path.exists():
            raise TwinError(f"no executed notebook for chapter {stem} in {executed}: build the book first ({BUILD})")
        executed_notebook = json.loads(notebook_path.read_text(encoding="utf-8"))
        python = python or executed_notebook["metadata"].get("language_info", {}).get("version")
        code = _code_cells(jupytext.read(editions[0], fmt="md:myst"))
        if _code_cells(executed_notebook) != code:
            raise TwinError(
                f"the build in {executed} ran other code than {editions[0].relative_to(root)}: it is older than the "
                f"chapter. Build the book again ({BUILD}), then run {SYNC} --measure"
            )
        glued = _glued_in(notebook_path)
        values = {}
        for source in editions:
            for ref in glue_references(source.read_text(encoding="utf-8")):
                if ref.name not in glued:
                    raise TwinError(
                        f"{source.relative_to(root)} pastes `{ref.name}`, which its chapter's code does not glue")
                values[ref.name] = {mime: text for mime, text in glued[ref.name].items()
                                    if mime in ("text/plain", "text/markdown")}
        chapters[stem] = dict(sorted(values.items()))
    environment = {"python": python, "torch": _installed("torch")}
    return {"environment": environment, "chapters": chapters}


def _installed(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def write_measured(measured: dict, root: Path = ROOT) -> Path:
    """Write ``measured`` as JSON with one line per glued value, so that a changed value is a one-line diff."""

    def line(value) -> str:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)

    def chapter(stem, values) -> str:
        return f"  {line(stem)}: {{\n" + ",\n".join(f"   {line(k)}: {line(v)}" for k, v in values.items()) + "\n  }"

    chapters = ",\n".join(chapter(stem, values) for stem, values in sorted(measured["chapters"].items()))
    text = f'{{\n "environment": {line(measured["environment"])},\n "chapters": {{\n{chapters}\n }}\n}}\n'
    path = measured_path(root)
    path.write_text(text, encoding="utf-8")
    return path


# ---- what the rest of the book tells a chapter: figure numbers, labels, links ----------------


@dataclass
class Target:
    page: str  # the page's path without extension, relative to its edition's top folder
    title: str  # a section's heading or a figure's caption
    number: int | None = None  # a figure's or table's number
    kind: str = "figure"  # or "table": Sphinx numbers each kind on its own


@dataclass
class Book:
    """What converting one chapter needs to know about the rest of its edition."""

    root: Path
    edition: str
    values: dict  # glue name -> mime data, for this chapter
    environment: dict
    repository: dict | None  # {"url", "branch"} from _config.yml
    baseurl: str | None
    learner_copy: dict | None = None  # {"url", "branch"}: where learners get the twins (tools/learner_copy.py)
    targets: dict[str, Target] = field(default_factory=dict)
    quizzes: int = 0  # quizzes converted so far: the book numbers them through the page

    @classmethod
    def of(cls, source: Path) -> "Book":
        root, edition = top_folder(source), edition_of(source)
        config_path = root / "_config.yml"
        config = yaml.safe_load(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
        repository = (config or {}).get("repository")
        baseurl = ((config or {}).get("html") or {}).get("baseurl") or None
        measured = load_measured(root)
        book = cls(root, edition, measured.get("chapters", {}).get(source.stem), measured.get("environment", {}),
                   repository if repository and repository.get("url") else None,
                   baseurl.rstrip("/") if baseurl else None)
        copy = (config or {}).get("learner_copy")
        book.learner_copy = copy if copy and copy.get("url") else None
        book.targets = _targets(root / "zh" if edition == "zh" else root, source)
        return book

    def page_url(self, page: str, anchor: str = "") -> str | None:
        """The address of ``page`` in the online book, when _config.yml gives one."""
        if not self.baseurl:
            return None
        prefix = "zh/" if self.edition == "zh" else ""
        return f"{self.baseurl}/{prefix}{page}.html" + (f"#{anchor}" if anchor else "")

    def download_url(self, path: Path) -> str | None:
        """The address GitHub serves ``path`` from in the learner's copy, which holds the twins
        (in the course's repository when _config.yml names no copy).

        Symbolic links are followed first (``zh/exercises`` is one): GitHub serves a link as its target's name.
        """
        return self._github("https://raw.githubusercontent.com/{repo}/{branch}/{path}", path,
                            self.learner_copy or self.repository)

    def blob_url(self, path: Path) -> str | None:
        """The page GitHub shows the file ``path`` on, when _config.yml names a repository."""
        return self._github("https://github.com/{repo}/blob/{branch}/{path}", path)

    def _github(self, template: str, path: Path, repository: dict | None = None) -> str | None:
        repository = repository or self.repository
        if not repository:
            return None
        relative = path.resolve().relative_to(self.root.resolve()).as_posix()
        repo = urlparse(repository["url"]).path.strip("/")
        return template.format(repo=repo, branch=repository.get("branch", "main"), path=relative)


LABEL_LINE = re.compile(r"^\s*\((?P<label>[^()\s]+)\)=\s*$")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")


def _pages(edition_root: Path, source: Path) -> list[Path]:
    """The pages of an edition in the book's order (the chapter alone when there is no _toc.yml)."""
    toc_path = edition_root / "_toc.yml"
    if not toc_path.exists():
        return [source]
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    names = [toc["root"]] + [entry["file"] for part in toc.get("parts", []) for entry in part["chapters"]]
    names += [entry["file"] for entry in toc.get("chapters", [])]
    pages = [edition_root / f"{name}.md" for name in names]
    return [page for page in pages if page.exists()] or [source]


def _targets(edition_root: Path, source: Path) -> dict[str, Target]:
    """Every label of the edition: sections (with their headings), figures and tables (numbered as Sphinx does).

    Sphinx numbers the figures that have a name and a caption, through the whole book in its order, and
    the tables the same way with numbers of their own (a {table}'s caption is its argument).
    """
    targets, number, tables = {}, 0, 0
    for page in _pages(edition_root, source):
        name = page.with_suffix("").relative_to(edition_root).as_posix()
        lines = page.read_text(encoding="utf-8").splitlines()
        label = None  # a (label)= line waiting for the heading below it
        for index, line in enumerate(lines):
            if match := LABEL_LINE.match(line):
                label = match["label"]
                continue
            if label and line.strip():
                if heading := HEADING.match(line):
                    targets[label] = Target(name, heading["title"])
                label = None
            fence = FENCE.match(line)
            directive = fence and DIRECTIVE.match(fence["info"].strip())
            if directive and directive["name"] in ("figure", "glue:figure"):
                options, content = _split_options(lines[index + 1:_closing_fence(lines, index, fence["fence"])])
                caption = _first_paragraph(content)
                if "name" in options and caption:
                    number += 1
                    targets[options["name"]] = Target(name, caption, number)
            if directive and directive["name"] == "table":
                options, _ = _split_options(lines[index + 1:_closing_fence(lines, index, fence["fence"])])
                if "name" in options and directive["argument"].strip():
                    tables += 1
                    targets[options["name"]] = Target(name, directive["argument"].strip(), tables, "table")
    return targets


def _closing_fence(lines: list[str], start: int, fence: str) -> int:
    closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
    for index in range(start + 1, len(lines)):
        if closing.match(lines[index]):
            return index
    return len(lines)


def _split_options(body: list[str]) -> tuple[dict[str, str], list[str]]:
    """A directive's ``:key: value`` options (or YAML block between ``---`` lines), and its content."""
    if body[:1] == ["---"]:
        end = body.index("---", 1)
        return {k: str(v) for k, v in (yaml.safe_load("\n".join(body[1:end])) or {}).items()}, body[end + 1:]
    options, index = {}, 0
    while index < len(body) and (option := re.match(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$", body[index])):
        options[option["key"]] = option["value"].strip()
        index += 1
    return options, body[index:]


def _first_paragraph(content: list[str]) -> str:
    text = "\n".join(content).strip()
    return re.split(r"\n\s*\n", text, maxsplit=1)[0] if text else ""


# ---- converting a chapter's Markdown --------------------------------------------------------------


@dataclass
class Cell:
    """One Markdown cell being converted: where it comes from, and the images it attaches."""

    source: Path
    book: Book
    follows_cell: str | None  # the source of the code cell just above, if any
    attachments: dict = field(default_factory=dict)
    missing: list = field(default_factory=list)  # glue names without a measured value

    @property
    def words(self) -> dict:
        return WORDS[self.book.edition]

    def where(self) -> str:
        try:
            return self.source.relative_to(self.book.root).as_posix()
        except ValueError:
            return str(self.source)

    def error(self, message: str) -> TwinError:
        return TwinError(f"{self.where()}: {message}")


def convert_markdown(text: str, cell: Cell) -> str:
    """The plain Markdown of a MyST Markdown cell (fenced blocks first, then the inline markup)."""
    lines, out, index, prose = text.split("\n"), [], 0, []

    def flush():
        if prose:
            out.append(convert_inline("\n".join(prose), cell))
            prose.clear()

    while index < len(lines):
        line = lines[index]
        fence = FENCE.match(line)
        if fence:
            end = _closing_fence(lines, index, fence["fence"])
            directive = DIRECTIVE.match(fence["info"].strip())
            flush()
            if directive:
                out.append(convert_directive(directive["name"], directive["argument"].strip(),
                                             lines[index + 1:end], cell))
            else:
                out.extend(lines[index:end + 1])  # a plain code block: as it is
            index = end + 1
            continue
        if not LABEL_LINE.match(line):
            prose.append(line)
        index += 1
    flush()
    return "\n".join(out)


INLINE = re.compile(
    r"(?P<role>\{(?P<name>[a-z][\w:-]*)\}`(?P<content>[^`]*)`)"
    r"|(?P<code>(?P<ticks>`+).+?(?P=ticks))"
    r"|(?P<display>\$\$.+?\$\$)"
    r"|(?P<math>\$(?!\$)(?:\\.|[^$\\])+?\$)"
    r"|(?P<link>\]\((?P<target>[^)\s#:]+\.md)(?:#[^)\s]*)?\))",
    re.S,
)


def convert_inline(text: str, cell: Cell) -> str:
    """Roles rendered, links to other pages made to work; code spans and math untouched."""

    def replace(match: re.Match) -> str:
        if match["role"]:
            return convert_role(match["name"], match["content"], cell)
        if match["link"]:
            target = cell.source.parent / match["target"]
            if target.exists() and is_chapter(target):  # the chapter's own twin, beside this one
                return f"]({match['target'][:-3]}.ipynb)"
            if target.exists() and (url := cell.book.blob_url(target)):
                return f"]({url})"
        return match[0]

    return INLINE.sub(replace, text)


def convert_role(role: str, content: str, cell: Cell) -> str:
    book = cell.book
    if role in GLUE_ROLES:
        return paste(GlueRef.from_role(role, content), cell)
    text, label = _text_and_target(content)
    if role == "numref":
        target = book.targets.get(label)
        if target is None or target.number is None:
            raise cell.error(f"{{numref}}`{content}` names no numbered figure or table of this edition")
        shown = cell.words[target.kind].format(number=target.number)
        if text:
            shown = text.replace("%s", str(target.number)).replace("{number}", str(target.number))
        return _link(shown, book.page_url(target.page, label))
    if role == "ref":
        target = book.targets.get(label)
        if target is None:
            raise cell.error(f"{{ref}}`{content}` names no label of this edition")
        return _link(text or target.title, book.page_url(target.page, label))
    if role == "doc":
        page = (cell.source.parent / label).with_suffix(".md")
        if not page.exists():
            raise cell.error(f"{{doc}}`{content}` names no page")
        title = text or next((m["title"] for line in page.read_text(encoding="utf-8").splitlines()
                              if (m := HEADING.match(line))), page.stem)
        edition_root = book.root / "zh" if book.edition == "zh" else book.root
        name = page.resolve().relative_to(edition_root.resolve()).with_suffix("").as_posix()
        return _link(title, book.page_url(name))
    if role == "download":
        path = cell.source.parent / label
        if not path.exists():
            raise cell.error(f"{{download}}`{content}`: there is no file {label}")
        return _link(text or Path(label).name, book.download_url(path) or label)
    if role == "math":
        return f"${content}$"
    raise cell.error(f"the role {{{role}}} has no plain-Markdown form yet: teach tools/sync_notebooks.py to write it")


def _text_and_target(content: str) -> tuple[str, str]:
    """``text <target>`` or ``target`` alone, as MyST roles write them."""
    match = re.fullmatch(r"(?P<text>.*?)\s*<(?P<target>[^<>]+)>", content.strip(), re.S)
    if match:
        return " ".join(match["text"].split()), match["target"].strip()
    return "", content.strip()


def _link(text: str, url: str | None) -> str:
    return f"[{text}]({url})" if url else text


def paste(ref: GlueRef, cell: Cell) -> str:
    if "::" in ref.name:
        raise cell.error(f"`{ref.name}` pastes a value of another page, which a twin cannot hold")
    values = cell.book.values or {}
    if ref.name not in values:
        cell.missing.append(ref.name)
        return ""
    try:
        return ref.render(values)
    except TwinError as error:
        raise cell.error(str(error)) from None


def convert_directive(name: str, argument: str, body: list[str], cell: Cell) -> str:
    if name == "quiz":
        return convert_quiz("\n".join(body), cell)
    options, content = _split_options(body)
    inner = convert_markdown("\n".join(content).strip("\n"), cell)
    if name in ADMONITIONS or name == "admonition":
        if name == "admonition":
            title = convert_inline(argument, cell)
        else:
            title = ADMONITIONS[name][1 if cell.book.edition == "zh" else 0]
            if argument:  # the first line of a {note} is already its text
                inner = convert_inline(argument, cell) + ("\n" + inner if inner else "")
        quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in inner.split("\n"))
        return f"> **{title}**\n>\n{quoted}"
    if name == "figure":
        return convert_figure(argument, options, inner, cell)
    if name == "glue:figure":
        return convert_glue_figure(argument, options, inner, cell)
    if name in GLUE_DIRECTIVES:
        return paste(GlueRef(name, argument), cell)
    if name == "literalinclude":
        return convert_literalinclude(argument, options, cell)
    if name == "table":
        return convert_table(argument, options, inner, cell)
    raise cell.error(
        f"the directive {{{name}}} has no plain-Markdown form yet: teach tools/sync_notebooks.py to write it")


def _figure_number(options: dict, cell: Cell) -> int | None:
    target = cell.book.targets.get(options.get("name", ""))
    return target.number if target else None


def _numbered(caption: str, options: dict, cell: Cell) -> str:
    number = _figure_number(options, cell)
    return cell.words["caption"].format(number=number, caption=caption) if number else caption


def convert_figure(path: str, options: dict, caption: str, cell: Cell) -> str:
    """An image file becomes an attachment of its cell: Colab and an offline Jupyter show it as it is."""
    image = cell.source.parent / path
    if not image.is_file():
        raise cell.error(f"the figure {path} does not exist (looked for {image})")
    mime = {".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}.get(
        image.suffix.lower())
    if mime is None:
        raise cell.error(f"the figure {path} is not an SVG, PNG or JPEG image")
    bundle = {mime: base64.b64encode(image.read_bytes()).decode("ascii")}
    key = image.name
    while cell.attachments.get(key, bundle) != bundle:  # two images of one name in one cell
        key = "_" + key
    cell.attachments[key] = bundle
    alt = re.sub(r"([\\\[\]*_`])", r"\\\1", options.get("alt", ""))
    image_line = f"![{alt}](attachment:{key})"
    return f"{image_line}\n\n{_numbered(caption, options, cell)}" if caption else image_line


def convert_glue_figure(name: str, options: dict, caption: str, cell: Cell) -> str:
    """A plot the chapter's code draws: its caption, and which cell draws it (with the alt text, folded)."""
    words = cell.words
    above = bool(cell.follows_cell and re.search(rf"show_figure\(\s*['\"]{re.escape(name)}['\"]", cell.follows_cell))
    text = (words["drawn_above"] if above else words["drawn_elsewhere"]).format(caption=caption, name=name)
    parts = [_numbered(text, options, cell)]
    if options.get("alt"):
        summary = words["figure_description"]
        parts.append(f"<details><summary>{summary}</summary>\n\n{markdown_text(options['alt'])}\n\n</details>")
    return "\n\n".join(parts)


def convert_table(caption: str, options: dict, table: str, cell: Cell) -> str:
    """A captioned table: its numbered caption on a line of its own above it, as the book shows it."""
    target = cell.book.targets.get(options.get("name", ""))
    caption = convert_inline(caption, cell)
    if target and target.kind == "table":
        caption = cell.words["table_caption"].format(number=target.number, caption=caption)
    return f"{caption}\n\n{table}" if caption else table


def convert_literalinclude(path: str, options: dict, cell: Cell) -> str:
    """The included code itself, as a code block: the twin has no file to include it from."""
    included = cell.source.parent / path
    if not included.is_file():
        raise cell.error(f"{{literalinclude}} {path}: there is no such file")
    unknown = set(options) - {"language", "pyobject", "lines", "caption", "name"}
    if unknown:
        raise cell.error(f"{{literalinclude}} {path}: the options {sorted(unknown)} have no plain-Markdown form yet")
    text = included.read_text(encoding="utf-8")
    if "pyobject" in options:
        text = _python_object(text, options["pyobject"])
        if text is None:
            raise cell.error(f"{{literalinclude}} {path}: it defines no {options['pyobject']}")
    if "lines" in options:
        text = "\n".join(_chosen_lines(text.splitlines(), options["lines"]))
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{options.get('language', '')}\n{text.rstrip()}\n{fence}"


def _chosen_lines(lines: list[str], spec: str) -> list[str]:
    """Sphinx's ``:lines:`` selection: ``3``, ``2-4``, ``5-`` and ``-2``, comma-separated, from 1."""
    chosen = []
    for part in spec.split(","):
        first, dash, last = part.strip().partition("-")
        start = int(first) if first else 1
        stop = (int(last) if last else len(lines)) if dash else start
        chosen += lines[start - 1:stop]
    return chosen


def _python_object(text: str, dotted: str) -> str | None:
    """The source of a top-level function or class of ``text``, or of ``Class.method``, decorators included."""
    body, node = ast.parse(text).body, None
    for part in dotted.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            return None
        body = node.body
    start = min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])
    return "\n".join(text.splitlines()[start - 1:node.end_lineno])


def convert_quiz(body: str, cell: Cell) -> str:
    """The question, the answers as a list, then the right answer and every explanation folded away."""
    quiz = _quiz_module()
    try:
        parsed = quiz.parse_quiz(body)
    except ValueError as error:
        raise cell.error(f"a {{quiz}} block is not valid: {error}") from None
    cell.book.quizzes += 1
    words, letters = cell.words, quiz.LETTERS
    heading = quiz.WORDS[cell.book.edition]["question"].format(number=cell.book.quizzes)
    right = next(index for index, answer in enumerate(parsed.answers) if answer.right)
    answers = [f"- **{letters[index]}.** {_indent(convert_inline(answer.text, cell))}"
               for index, answer in enumerate(parsed.answers)]
    explanations = [
        words["quiz_explanation"].format(letter=letters[index], verdict=words["right" if answer.right else "wrong"],
                                         why=_indent(convert_markdown(answer.why, cell)))
        for index, answer in enumerate(parsed.answers)
    ]
    return "\n".join([
        words["question"].format(heading=heading, question=convert_markdown(parsed.question, cell)),
        "",
        *answers,
        "",
        "<details>",
        f"<summary>{words['quiz_summary']}</summary>",
        "",
        words["quiz_right_answer"].format(letter=letters[right]),
        "",
        *explanations,
        "",
        "</details>",
    ])


def _indent(text: str) -> str:
    """Continuation lines of a list item, indented to stay inside it."""
    return text.replace("\n", "\n  ")


LEFTOVER = re.compile(r"(?P<role>\{[a-z][\w:-]*\}`[^`]*`)|(?P<ticks>`+).+?(?P=ticks)", re.S)
LEFTOVER_DIRECTIVE = re.compile(r"^ {0,3}(?:`{3,}|:{3,})\{.*$", re.M)
PLAIN_CODE_BLOCK = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?!\{).*?^ {0,3}(?P=fence)\s*$", re.M | re.S)


def _leftover_markup(text: str) -> str | None:
    """The first MyST role or directive that survived the conversion (outside code), if any."""
    prose = PLAIN_CODE_BLOCK.sub("", text)
    if directive := LEFTOVER_DIRECTIVE.search(prose):
        return directive[0]
    return next((match["role"] for match in LEFTOVER.finditer(prose) if match["role"]), None)


def measurement_note(source: Path, book: Book, text: str) -> str:
    """The note a chapter twin's first Markdown cell gets: where its numbers come from."""
    words = WORDS[book.edition]
    environment = book.environment or {}
    versions = (words["note_versions"].format(**environment)
                if environment.get("python") and environment.get("torch") else "")
    note = f"**{words['note_title']}** " + words["note_measured"].format(versions=versions)
    if sections := _timing_sections(source.stem, text):
        if len(sections) == 1:
            phrase = words["one_section"].format(title=sections[0])
        else:
            titles = [words["title"].format(title=title) for title in sections]
            joined = ", ".join(titles[:-1]) if book.edition == "en" else "、".join(titles[:-1])
            phrase = words["sections"].format(titles=joined + words["and"] + titles[-1])
        note += words["note_timings"].format(sections=phrase)
    if re.search(r"^```\{glue:figure\}", text, re.M):
        note += words["note_figures"]
    return "> " + note


def _timing_sections(stem: str, text: str) -> list[str]:
    """The headings of the sections that paste timings, in order."""
    titles, current = [], None
    for line in _without_code_cells(text).splitlines():
        if heading := re.match(r"^#{2,6}\s+(.+?)\s*$", line):
            current = heading[1]
        names = [GlueRef.from_role(m["role"], m["content"]).name
                 for m in ROLE.finditer(line) if m["role"] in GLUE_ROLES]
        fence = FENCE.match(line)
        if fence and (directive := DIRECTIVE.match(fence["info"].strip())) and directive["name"] in GLUE_DIRECTIVES:
            names.append(directive["argument"].strip())
        if current and current not in titles and any(is_timing(stem, name) for name in names):
            titles.append(current)
    return titles


def _with_note(markdown: str, note: str) -> str:
    """``note`` after the first heading of the cell (or first in it)."""
    lines = markdown.split("\n")
    for index, line in enumerate(lines):
        if HEADING.match(line):
            return "\n".join(lines[:index + 1] + ["", note] + lines[index + 1:])
    return note + "\n\n" + markdown


def convert_chapter(notebook, source: Path) -> None:
    """Rewrite the Markdown cells of a chapter's notebook in place into plain Markdown."""
    book = Book.of(source)
    text = source.read_text(encoding="utf-8")
    missing, found, first = [], [], True
    previous_code = None
    for cell in notebook.cells:
        if cell.cell_type == "code":
            previous_code = cell.source
            continue
        if cell.cell_type != "markdown":
            continue
        converting = Cell(source, book, previous_code)
        try:
            markdown = convert_markdown(cell.source, converting)
        except TwinError as error:
            found.append(str(error))
            continue
        missing += [name for name in converting.missing if name not in missing]
        if (leftover := _leftover_markup(markdown)) is not None:
            found.append(f"{converting.where()}: MyST markup left in the twin: {leftover!r}")
        if first:
            markdown = _with_note(markdown, measurement_note(source, book, text))
            first = False
        cell.source = markdown
        if converting.attachments:
            cell.attachments = converting.attachments
        previous_code = None
    if missing:
        where = Cell(source, book, None).where()
        found.append(
            f"{where} pastes values that {MEASURED.as_posix()} does not hold: {', '.join(missing)}. "
            f"Build the book ({BUILD}), then run {SYNC} --measure"
        )
    if found:
        raise TwinError("\n".join(found))


# ---- the twins ---------------------------------------------------------------------------------


def render_twin(source: Path) -> str:
    """The exact text the .ipynb twin of ``source`` must contain."""
    notebook = jupytext.read(source, fmt="md:myst")
    for index, cell in enumerate(notebook.cells):
        # jupytext draws random cell ids; derive them from the cell instead so
        # that the same source always gives the same file.
        digest = hashlib.sha1(f"{index}:{cell.source}".encode()).hexdigest()
        cell.id = digest[:8]
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    if is_chapter(source):
        convert_chapter(notebook, source)
    return nbformat.writes(notebook) + "\n"


def write_twin(source: Path) -> Path:
    """Write the .ipynb twin of ``source`` and return its path."""
    twin = twin_of(source)
    twin.write_text(render_twin(source), encoding="utf-8")
    return twin


def stale_twins(root: Path = ROOT) -> list[Path]:
    """The twins that differ from what their source gives (a TwinError when a source cannot give one)."""
    stale = []
    for source in text_notebooks(root):
        twin = twin_of(source)
        if not twin.exists() or twin.read_text(encoding="utf-8") != render_twin(source):
            stale.append(twin)
    return stale


def problems(root: Path = ROOT) -> list[str]:
    """Everything ``--check`` reports: stale twins, and sources that cannot give a twin."""
    found = []
    for source in text_notebooks(root):
        twin = twin_of(source)
        try:
            expected = render_twin(source)
        except TwinError as error:
            found.append(str(error))
            continue
        if not twin.exists() or twin.read_text(encoding="utf-8") != expected:
            found.append(f"stale: {twin.relative_to(root)} (run: {SYNC})")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale twins and missing values")
    parser.add_argument("--measure", action="store_true",
                        help=f"first collect the values the chapters paste from the last build into {MEASURED}")
    parser.add_argument("--executed", type=Path, default=None,
                        help=f"the build's executed notebooks (default: {EXECUTED})")
    args = parser.parse_args(argv)
    if args.check:
        found = problems(ROOT)
        print("\n".join(found) if found else "Every twin is current.")
        return 1 if found else 0
    if args.measure:
        executed = args.executed or ROOT / EXECUTED
        try:
            path = write_measured(measure(executed, ROOT), ROOT)
        except TwinError as error:
            print(error, file=sys.stderr)
            return 1
        print(f"wrote {path.relative_to(ROOT)} from {executed}")
    failed = False
    for source in text_notebooks(ROOT):
        try:
            print(f"wrote {write_twin(source).relative_to(ROOT)}")
        except TwinError as error:  # the other twins are still written
            print(error, file=sys.stderr)
            failed = True
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
