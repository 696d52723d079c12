"""The book's two editions, English and Simplified Chinese, and what ties them together.

Every page of the English book (``intro.md``, ``chapters/*.md``) has a twin under ``zh/`` with the
same path. A page is read as alternating *prose segments* and *code cells*: the front matter, then
segment 0, code cell 1, segment 1, ... . The front matter and every code cell (fence, metadata and
source) are byte-identical in both twins, so both editions run one notebook and paste the same
measurements; the prose segments are each edition's own text.

``zh/sources.json`` records, for every page, a short hash of each English segment as it was when
its Chinese segment was last brought up to date. When the English text changes, the segments whose
hash no longer matches are listed as stale, the way gettext marks a changed message as fuzzy.

    python -m tools.editions check [PAGE...]      # list every difference; exit 1 if there is one
    python -m tools.editions sync-code [PAGE...]  # copy the English code cells into the Chinese pages
    python -m tools.editions stamp PAGE...        # record PAGE's English segments as translated

PAGE is a path such as ``chapters/02_layer_normalization.md`` (or its ``zh/`` twin); without one,
every page of ``_toc.yml``.
"""

import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ZH = ROOT / "zh"
SOURCES = ZH / "sources.json"

FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n.*?^```\n", re.M | re.S)
LABEL = re.compile(r"^\(([\w-]+)\)=$", re.M)
HEADING = re.compile(r"^(#{1,6}) ", re.M)
GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([\w-]+)")
GLUE_DIRECTIVE = re.compile(r"^```\{glue(?::\w+)?\} ([\w-]+)", re.M)
FIGURE_NAME = re.compile(r"^```\{(?:glue:)?figure\}.*?^:name: ([\w-]+)$", re.M | re.S)
QUIZ = re.compile(r"^:::\{quiz\}\n(.*?)^:::$", re.M | re.S)
GLUE_TEXT_CALL = re.compile(r"glue_text\(\s*(f?)\"([^\"]+)\"")
CJK = re.compile(r"[\u4e00-\u9fff]")
ZH_SUFFIX = "_zh"


def english_pages(root: Path = ROOT) -> list[Path]:
    """The English pages, as paths relative to the repository."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    names = [toc["root"]] + [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    return [Path(f"{name}.md") for name in names]


@dataclass
class Page:
    front_matter: str
    segments: list[str]  # prose; one more than there are code cells
    code_cells: list[str]

    @classmethod
    def read(cls, path: Path) -> "Page":
        text = path.read_text(encoding="utf-8")
        match = FRONT_MATTER.match(text)
        front = match.group(0) if match else ""
        body = text[len(front):]
        cells = [m.group(0) for m in CODE_CELL.finditer(body)]
        return cls(front, CODE_CELL.split(body), cells)

    def write(self, path: Path) -> None:
        parts = [self.front_matter, self.segments[0]]
        for cell, segment in zip(self.code_cells, self.segments[1:]):
            parts += [cell, segment]
        path.write_text("".join(parts), encoding="utf-8")

    @property
    def prose(self) -> str:
        return "".join(self.segments)


def segment_hash(segment: str) -> str:
    return hashlib.sha256(segment.strip().encode()).hexdigest()[:12]


def has_prose(segment: str) -> bool:
    """Whether a segment holds words a reader reads (not only labels, blank lines or fences)."""
    words = [line for line in LABEL.sub("", segment).splitlines() if not re.match(r"\s*(```|:[\w-]+:)", line)]
    return bool(re.search(r"[A-Za-z]{3,}.*[A-Za-z]{3,}", "\n".join(words)))


def readable(text: str) -> str:
    """The words of MyST prose a reader reads: without fence, directive-option, label and rule lines,
    and without math, code spans, roles, link targets and addresses."""
    lines = [line for line in text.splitlines() if not re.match(r"\s*(```|:::|:[\w-]+:|\(|---)", line)]
    return re.sub(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`|\{[\w:-]+\}|\]\([^)]*\)|https?://\S+", " ", "\n".join(lines),
                  flags=re.S)


def english_paragraphs(segment: str) -> list[str]:
    """Paragraphs of a Chinese segment that are still English prose (references excepted).

    A paragraph whose readable text holds six or more English words and no Chinese character is
    untranslated, unless it cites a year (an entry of a reference list, which stays in English).
    """
    found = []
    segment = re.sub(r"^```(?!\{).*?^```$", "", segment, flags=re.M | re.S)  # shell commands, listings
    for paragraph in re.split(r"\n\s*\n", segment):
        text = readable(paragraph)
        words = re.findall(r"[A-Za-z]{3,}", text)
        if len(words) >= 6 and not CJK.search(text) and not re.search(r"\b(19|20)\d\d\b", text):
            found.append(" ".join(text.split())[:60])
    return found


def glue_text_names(code_cells: list[str]) -> list[str]:
    """Patterns of the names glued by ``glue_text``: ``f"speed_{key}"`` gives ``speed_.+``."""
    return [re.sub(r"\\\{.*?\\\}", ".+", re.escape(name)) if is_f else re.escape(name)
            for is_f, name in GLUE_TEXT_CALL.findall("".join(code_cells))]


def glue_names(prose: str) -> list[str]:
    return GLUE_ROLE.findall(prose) + GLUE_DIRECTIVE.findall(prose)


def quiz_shapes(prose: str) -> list[tuple[int, int]]:
    """(number of answers, index of the right one) of every quiz, in order."""
    shapes = []
    for body in QUIZ.findall(prose):
        answers = yaml.safe_load(body)["answers"]
        right = [i for i, answer in enumerate(answers) if answer.get("right")]
        shapes.append((len(answers), right[0] if right else -1))
    return shapes


def code_differences(page: Path, en: Page, zh: Page) -> list[str]:
    """How the front matter and code cells of the two editions of ``page`` differ: they must not."""
    found = []
    if en.front_matter != zh.front_matter:
        found.append(f"{page}: the front matter differs (it chooses the kernel, so it must not)")
    if len(en.code_cells) != len(zh.code_cells):
        found.append(f"{page}: {len(en.code_cells)} code cells in English, {len(zh.code_cells)} in Chinese")
    for number, (a, b) in enumerate(zip(en.code_cells, zh.code_cells), start=1):
        if a != b:
            first = next((x for x, y in zip(a.splitlines(), b.splitlines()) if x != y), a.splitlines()[-1])
            found.append(f"{page}: code cell {number} differs (first differing English line: {first!r})")
    return found


def drifted_code(root: Path = ROOT) -> list[str]:
    """``code_differences`` of every page of the book under ``root`` (a missing Chinese page included)."""
    found = []
    for page in english_pages(root):
        twin = root / "zh" / page
        if not twin.exists():
            found.append(f"{page}: no Chinese page at zh/{page}")
        else:
            found += code_differences(page, Page.read(root / page), Page.read(twin))
    return found


def differences(page: Path, recorded: dict, root: Path = ROOT) -> list[str]:
    """Everything that keeps the Chinese twin of ``page`` from matching it.

    ``recorded`` holds the English segment hashes of each page's last translation (``zh/sources.json``).
    """
    twin = root / "zh" / page
    if not twin.exists():
        return [f"{page}: no Chinese page at zh/{page}"]
    en, zh = Page.read(root / page), Page.read(twin)
    found = code_differences(page, en, zh)
    if LABEL.findall(en.prose) != LABEL.findall(zh.prose):
        found.append(f"{page}: the labels differ: {LABEL.findall(en.prose)} != {LABEL.findall(zh.prose)}")
    if HEADING.findall(en.prose) != HEADING.findall(zh.prose):
        found.append(f"{page}: the headings differ in number or level")
    if FIGURE_NAME.findall(en.prose) != FIGURE_NAME.findall(zh.prose):
        found.append(f"{page}: the figures differ: {FIGURE_NAME.findall(en.prose)} != {FIGURE_NAME.findall(zh.prose)}")
    if quiz_shapes(en.prose) != quiz_shapes(zh.prose):
        found.append(f"{page}: the quizzes differ in number, answers or right answer")
    en_glue, zh_glue = set(glue_names(en.prose)), set(glue_names(zh.prose))
    patterns = glue_text_names(en.code_cells)
    translated = {name for name in zh_glue
                  if not name.endswith(ZH_SUFFIX) and any(re.fullmatch(p, name) for p in patterns)}
    if any(name.endswith(ZH_SUFFIX) for name in en_glue):
        found.append(f"{page}: the English page pastes a Chinese phrase: {sorted(n for n in en_glue if n.endswith(ZH_SUFFIX))}")
    if untranslated := sorted(translated):
        found.append(f"{page}: the Chinese page pastes English phrases; use {[n + ZH_SUFFIX for n in untranslated]}")
    zh_as_en = {name.removesuffix(ZH_SUFFIX) for name in zh_glue}
    if en_glue != zh_as_en:
        found.append(
            f"{page}: glued values pasted in one edition only: English only {sorted(en_glue - zh_as_en)}, "
            f"Chinese only {sorted(zh_as_en - en_glue)}"
        )
    if len(en.segments) == len(zh.segments):
        hashes = recorded.get(str(page))
        if hashes is None:
            found.append(f"{page}: never stamped as translated (python -m tools.editions stamp {page})")
        for number, (a, b) in enumerate(zip(en.segments, zh.segments)):
            if has_prose(a) and not CJK.search(b):
                found.append(f"{page}: prose segment {number} is not translated")
            elif left := english_paragraphs(b):
                found.append(f"{page}: prose segment {number} still has English paragraphs: {left}")
            elif hashes is not None and (number >= len(hashes) or hashes[number] != segment_hash(a)):
                first = next((line for line in a.strip().splitlines() if line.strip()), "")
                found.append(f"{page}: prose segment {number} is stale (English now starts {first[:60]!r})")
    return found


def load_recorded() -> dict:
    return json.loads(SOURCES.read_text()) if SOURCES.exists() else {}


def as_page(name: str) -> Path:
    path = Path(name)
    return path.relative_to("zh") if path.parts[:1] == ("zh",) else path


def check(pages: list[Path] | None = None) -> list[str]:
    recorded = load_recorded()
    return [line for page in pages or english_pages() for line in differences(page, recorded)]


def sync_code(pages: list[Path] | None = None, root: Path = ROOT) -> None:
    """Copy every English code cell and front matter into the Chinese twin, prose untouched."""
    for page in pages or english_pages(root):
        en, zh = Page.read(root / page), Page.read(root / "zh" / page)
        if len(en.code_cells) != len(zh.code_cells):
            sys.exit(f"{page}: {len(en.code_cells)} code cells in English, {len(zh.code_cells)} in Chinese; "
                     "add or remove the Chinese prose around the new cell by hand first")
        zh.front_matter, zh.code_cells = en.front_matter, en.code_cells
        zh.write(root / "zh" / page)


def stamp(pages: list[str], root: Path = ROOT) -> None:
    """Record the English segments of ``pages`` as the ones the Chinese text now translates."""
    sources = root / "zh" / "sources.json"
    recorded = json.loads(sources.read_text()) if sources.exists() else {}
    for page in map(as_page, pages):
        recorded[str(page)] = [segment_hash(s) for s in Page.read(root / page).segments]
    sources.write_text(json.dumps(dict(sorted(recorded.items())), indent=1) + "\n")


def main(argv: list[str]) -> int:
    pages = [as_page(name) for name in argv[1:]]
    if argv[:1] == ["check"]:
        found = check(pages)
        print("\n".join(found) if found else "The two editions match.")
        return 1 if found else 0
    if argv[:1] == ["sync-code"]:
        sync_code(pages)
        return 0
    if argv[:1] == ["stamp"] and argv[1:]:
        stamp(argv[1:])
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
