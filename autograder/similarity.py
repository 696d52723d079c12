"""``python -m autograder similarity``: which students' answers look alike, ranked, in one HTML page.

Nothing here runs student code. Each notebook is read as JSON (bounded as ``load`` bounds it), and split
into the student's code (the code cells that are not the release's own) and their written answers (the
Markdown cells that are not the release's own, such as ex3's ``written_answer``). Every pair of students is
compared with copydetect (the winnowing of MOSS: fingerprints of token k-grams, variable and function names
replaced by placeholders, comments and whitespace dropped), code and prose separately:

- the release's code and text are boilerplate: a passage every student was given is never a match;
- the reference solution and PyTorch's own decompositions of the exercise are known sources: each student
  is compared with them, and what two students share with a known source is left out of their pair, so a
  student close to the reference is listed once against it, not against everyone else who is close to it.

A high similarity is a reason to read two answers side by side, not a finding of copying: short answers to
one precise exercise converge, and the page says so.
"""

from __future__ import annotations

import ast
import copy
import html
import importlib.util
import io
import json
import re
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autograder import load

# Code: k-grams of 25 characters of copydetect's filtered code (names become V/F/O, strings S, comments and
# whitespace dropped). Every k-gram is kept (the guarantee threshold equals the noise threshold, a winnowing
# window of 1): a larger window keeps fewer hashes, but which ones depends on Python's per-process salt of
# str hashes, so the same class would get slightly different figures on every run.
CODE_NOISE = CODE_GUARANTEE = 25
# Prose: copydetect's filtering is for code (its Python lexer would turn English into names), and its raw mode
# compares characters as typed, so a re-wrapped line or a capital letter would break a match. Written answers
# are compared as words instead: lower case, every run of punctuation and whitespace one space (``prose``),
# then copydetect's unfiltered fingerprints of 40 characters (about seven words: two independent answers to one
# question share phrases such as "the running statistics", rarely seven words in a row).
TEXT_NOISE = TEXT_GUARANTEE = 40
# A pair is marked "look" at 70 %. Measured on tests/honest_corpus.py (independent honest solutions of all six
# exercises): two of them share at most 51 % (ex4), one shares at most 55 % with the reference (ex6); planted
# copies (tests/test_similarity.py) share 80 % (two lines rewritten) to 100 % (renamed, reordered, recommented).
HIGHLIGHT = 0.7
MIN_OVERLAP = 60  # characters of filtered code (or normalized text): less than this is never marked
MAX_COMPARED_CHARS = 100_000  # of each student's code and of their text: a course answer is a few thousand
MAX_RESULT_BYTES = 64 * 2**20  # a result file read for which notebook counted: the grader's are far smaller
MAX_LISTED = 40  # pairs listed in each table, with their passages
CONTEXT_LINES = 3  # lines shown around each matching passage

SOLUTION_MARKS = re.compile(r"^\s*#{2,3} (BEGIN|END) SOLUTION\s*$", re.M)

# PyTorch's own Python for what each exercise asks (torch/_refs and torch/_decomp are the decompositions the
# compiler uses; ex4's blocks are torch.nn.TransformerEncoderLayer's). Read from the installed torch as text.
TORCH_SOURCES: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "ex2_layernorm": (("_refs/__init__.py", ("_normalize", "native_layer_norm")),
                      ("_decomp/decompositions.py", ("native_layer_norm_backward",))),
    "ex3_batchnorm": (("_decomp/decompositions.py", ("native_batch_norm_helper",)),),
    "ex4_prepost": (("nn/modules/transformer.py",
                     ("TransformerEncoderLayer.forward", "TransformerEncoderLayer._sa_block",
                      "TransformerEncoderLayer._ff_block")),),
    "ex5_rmsnorm": (("_decomp/decompositions.py", ("_fused_rms_norm",)),),
    "ex6_beyond_norm": (("_decomp/decompositions.py", ("native_batch_norm_helper", "native_batch_norm_backward")),),
}


class Problem(Exception):
    """Why no report can be written (no notebooks, one student only): printed without a traceback."""


@dataclass
class Work:
    """What one student wrote (or a known source holds): their code cells and their prose cells."""

    name: str
    path: Path | None = None
    code_cells: list[str] = field(default_factory=list)
    text_cells: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source: bool = False  # a known source rather than a student

    @property
    def code(self) -> str:
        """The code cells as one document, what copydetect compares and the page shows."""
        return "\n\n".join(self.code_cells)

    @property
    def text(self) -> str:
        return "\n\n".join(self.text_cells)

    def cells(self, kind: str) -> list[str]:
        return self.code_cells if kind == "code" else self.text_cells


@dataclass
class Pair:
    kind: str  # "code" or "text"
    left: Work
    right: Work
    similarity: tuple[float, float]  # share of the left's and of the right's compared part that matches
    overlap: int  # matching characters of filtered code / normalized text, on the left
    slices: tuple[np.ndarray, np.ndarray]  # matching passages, as character ranges of left and right

    @property
    def score(self) -> float:
        """What the pair is ranked by: the larger share for two students (a short answer copied into a longer
        one shows on the short side), the student's share against a known source (the source is not theirs)."""
        return self.similarity[0] if self.right.source else max(self.similarity)

    @property
    def marked(self) -> bool:
        return self.score >= HIGHLIGHT and self.overlap >= MIN_OVERLAP


@dataclass
class Report:
    assignment: str
    students: list[Work]
    skipped: list[tuple[str, str]]  # (name, reason)
    sources: list[Work]
    missing_sources: list[str]
    code: list[Pair]  # ranked, student pairs and student-source pairs together
    text: list[Pair]
    seconds: float = 0.0
    with_text: int = 0


# --- reading --------------------------------------------------------------------------------------------------

def _source_text(cell: dict) -> str | None:
    source = cell.get("source", "")
    if type(source) is list and all(type(s) is str for s in source):
        source = "".join(source)
    return source if type(source) is str else None


def _key(cell_type: str, source: str) -> tuple[str, str]:
    return cell_type, "\n".join(line.rstrip() for line in source.strip().splitlines())


def notebook_cells(path: Path) -> list:
    """The cells of the notebook at ``path``, outputs dropped; raises Problem with the reason it cannot be read."""
    if path.is_symlink():
        raise Problem("it is a symbolic link, not a notebook file")
    if not path.is_file():
        raise Problem("no notebook file was found")
    with path.open("rb") as file:
        raw = file.read(load.MAX_NOTEBOOK_BYTES + 1)
    if len(raw) > load.MAX_NOTEBOOK_BYTES:
        raise Problem(f"it is bigger than {load.MAX_NOTEBOOK_BYTES // 2**20} MB (stored outputs?)")
    if not raw.strip():
        raise Problem("the file is empty")
    try:
        data = json.loads(raw.decode("utf-8", errors="replace"), object_hook=load.without_outputs)
    except (ValueError, RecursionError) as error:
        where = f" (line {error.lineno}, column {error.colno})" if hasattr(error, "lineno") else ""
        raise Problem(f"it is not valid JSON{where}, so not a notebook") from None
    if type(data) is not dict or type(data.get("cells", data.get("worksheets"))) is not list:
        raise Problem("it is JSON but not a Jupyter notebook (it has no cells)")
    if data.get("nbformat") == 3:
        try:
            import nbformat  # as load does: only for old notebooks

            data = json.loads(json.dumps(nbformat.convert(nbformat.from_dict(data), 4)))
        except Exception:
            raise Problem("it uses the old notebook format 3 and could not be converted") from None
    elif data.get("nbformat") != 4:
        raise Problem(f"unsupported notebook format {data.get('nbformat')!r}")
    cells = data.get("cells")
    if type(cells) is not list:
        raise Problem("its cells are not a list")
    if len(cells) > load.MAX_CELLS:
        raise Problem(f"it has {len(cells):,} cells (at most {load.MAX_CELLS:,} are read)")
    return cells


class Release:
    """What the course gave every student: its cells (left out), and the boilerplate that copydetect ignores."""

    def __init__(self, assignment: str):
        path = load.REPO / "exercises" / assignment / f"{assignment}.ipynb"
        cells = json.loads(path.read_text())["cells"]
        self.owned = load.course_cells(assignment)[0]  # grade cells and locked self-checks, by grade_id
        self.given = {_key(c["cell_type"], _source_text(c) or "") for c in cells}
        self.code_cells = [_source_text(c) or "" for c in cells if c["cell_type"] == "code"]
        self.text_cells = [_source_text(c) or "" for c in cells if c["cell_type"] == "markdown"]
        self.path = path

    def cells(self, kind: str) -> list[str]:
        return self.code_cells if kind == "code" else self.text_cells

    def answers(self, cells: list, work: Work) -> Work:
        """Fill ``work`` with the code and prose of ``cells`` that the release did not hold."""
        code, text = [], []
        for index, cell in enumerate(cells):
            if type(cell) is not dict or cell.get("cell_type") not in ("code", "markdown"):
                continue
            meta = cell.get("metadata") if type(cell.get("metadata")) is dict else {}
            nbgrader = meta.get("nbgrader") if type(meta.get("nbgrader")) is dict else {}
            grade_id = nbgrader.get("grade_id") if type(nbgrader.get("grade_id")) is str else None
            source = _source_text(cell)
            if grade_id in self.owned or source is None or not source.strip():
                continue
            if _key(cell["cell_type"], source) in self.given:
                continue  # the release's own cell, as given
            if cell["cell_type"] == "code":
                label = f"cell {index + 1}" + (f", {grade_id}" if grade_id else "")
                code.append(f"# [{label}]\n{source.strip(chr(10))}")
            else:
                text.append(source.strip())
        work.code_cells, work.text_cells = _bounded(code, work, "code"), _bounded(text, work, "written answers")
        return work


def _bounded(cells: list[str], work: Work, what: str) -> list[str]:
    """The first cells up to MAX_COMPARED_CHARS in all (a note in ``work`` says when some were cut)."""
    kept, total = [], 0
    for cell in cells:
        if total + len(cell) > MAX_COMPARED_CHARS:
            kept.append(cell[:MAX_COMPARED_CHARS - total])
            work.notes.append(f"only the first {MAX_COMPARED_CHARS:,} characters of the {what} were compared")
            break
        kept.append(cell)
        total += len(cell)
    return kept


def known_sources(assignment: str) -> tuple[list[Work], list[str]]:
    """The reference solution's answers and PyTorch's own code for the exercise; and what could not be found."""
    sources, missing = [], []
    path = load.REPO / "solutions" / assignment / f"{assignment}.ipynb"
    if path.is_file():
        cells = json.loads(path.read_text())["cells"]
        answers = [c for c in cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
        code = [SOLUTION_MARKS.sub("", _source_text(c)) for c in answers if c["cell_type"] == "code"]
        text = [SOLUTION_MARKS.sub("", _source_text(c)).strip() for c in answers if c["cell_type"] == "markdown"]
        sources.append(Work("reference solution", Path("solutions") / assignment / path.name, code, text,
                            source=True))
    else:
        missing.append(f"the reference solution {path} (not found)")
    spec = importlib.util.find_spec("torch")  # finds the installed torch without importing it (seconds)
    torch_root = Path(spec.origin).parent if spec and spec.origin else None
    for relative, names in TORCH_SOURCES.get(assignment, ()):
        file = torch_root / relative if torch_root else None
        found, absent = _functions(file, names) if file and file.is_file() else ([], list(names))
        if found:
            sources.append(Work(f"PyTorch: {', '.join(n for n in names if n not in absent)}",
                                Path("torch") / relative, found, source=True))
        missing += [f"PyTorch's {name} in torch/{relative} (not found in the installed torch)" for name in absent]
    return sources, missing


def _functions(file: Path, names: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The source of the named functions (``Class.method`` for a method) of a Python file, and the names missing."""
    text = file.read_text()
    tree = ast.parse(text)
    lines = text.splitlines()
    found, missing = [], []
    for name in names:
        scope: list = tree.body
        node = None
        for part in name.split("."):
            node = next((n for n in scope if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
            scope = node.body if node is not None else []
        if node is None:
            missing.append(name)
        else:
            found.append(textwrap.dedent("\n".join(lines[node.lineno - 1:node.end_lineno])))
    return found, missing


def collect(assignment: str, paths: list[Path], warnings: list[str]) -> tuple[list[Work], list[tuple[str, str]]]:
    """Every readable submission's answers, and (name, reason) for each one that could not be read."""
    passed_over: list[str] = []
    found = load.find(assignment, paths, passed_over)
    warnings += [f"passed over {what}" for what in passed_over]
    if not found:
        raise Problem(load.describe_empty(paths))
    release = Release(assignment)
    works, skipped = [], []
    for entry in found:
        counted = counted_name(assignment, entry) if entry.others else None
        path = next((p for p in [entry.path, *entry.others] if p.name == counted), entry.path)
        try:
            cells = notebook_cells(path)
        except Problem as why:
            skipped.append((entry.student_id, f"{path}: {why}"))
            continue
        notes = list(entry.problems)
        if entry.others:
            notes.append(f"{len(entry.others) + 1} notebooks submitted; compared: {path.name}"
                         + (" (the one that counted)" if counted == path.name
                            else " (no result says which counted: grade first, then run this again)"))
        works.append(release.answers(cells, Work(entry.student_id, path, notes=notes)))
    return works, skipped


def counted_name(assignment: str, entry: load.Entry) -> str | None:
    """The name of the notebook that counted for a student who handed in several (``grade`` grades each and counts
    the best), from their result (``results/<assignment>/<student>.json``, ``extra_data.notebooks``), or None."""
    try:
        with (Path("results") / assignment / f"{entry.student_id}.json").open("rb") as file:
            raw = file.read(MAX_RESULT_BYTES + 1)
        listed = json.loads(raw)["extra_data"]["notebooks"] if len(raw) <= MAX_RESULT_BYTES else []
        names = [nb["name"] for nb in listed if type(nb) is dict and nb.get("counted") is True]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return names[0] if len(names) == 1 and type(names[0]) is str else None


# --- comparing ------------------------------------------------------------------------------------------------

def prose(text: str) -> tuple[str, np.ndarray]:
    """Words in lower case with one space between them, and copydetect's offsets back to ``text``.

    Each row of the offsets is (index in the result, characters of ``text`` dropped before it), the form
    ``copydetect.detector.compare_files`` uses to map a matching passage back to what the student wrote.
    """
    out, rows, removed = [], [[0, 0]], 0
    length = 0
    for match in re.finditer(r"\w+|\W+", text):
        piece = match.group()
        if piece[0].isalnum() or piece[0] == "_":
            lower = piece.lower()
            out.append(lower if len(lower) == len(piece) else piece)
            length += len(piece)
        else:
            out.append(" ")
            length += 1
            rows.append([length - 1, removed])
            removed += len(piece) - 1
    rows.append([length, removed])
    return "".join(out), np.array(rows)


def fingerprint(work: Work, kind: str):
    """copydetect's fingerprint of the code or the prose of ``work``: the hash of every k-gram of a cell.

    The cells are fingerprinted as one document (so a passage maps back to where it is on the page), less
    the k-grams that run from one cell into the next: two students who left the same cells untouched would
    otherwise share the seams between them.
    """
    from copydetect.detector import CodeFingerprint

    if kind == "code":
        printed = CodeFingerprint(f"{work.name}.py", CODE_NOISE, CODE_GUARANTEE - CODE_NOISE + 1, language="python",
                                  fp=io.StringIO(work.code))
    else:
        normalized, rows = prose(work.text)
        printed = CodeFingerprint(work.name, TEXT_NOISE, TEXT_GUARANTEE - TEXT_NOISE + 1, filter=False,
                                  fp=io.StringIO(normalized))
        printed.raw_code, printed.offsets = work.text, rows
    return restricted(printed, keep=all_hashes(work.cells(kind), kind))


def all_hashes(cells: list[str], kind: str) -> set:
    """The hash of every k-gram of each cell (no winnowing, none across two cells)."""
    from copydetect.detector import CodeFingerprint

    found: set = set()
    for cell in cells:
        if not cell.strip():
            continue
        if kind == "code":
            found.update(CodeFingerprint("cell.py", CODE_NOISE, 1, language="python", fp=io.StringIO(cell)).hashes)
        else:
            found.update(CodeFingerprint("cell", TEXT_NOISE, 1, filter=False, fp=io.StringIO(prose(cell)[0])).hashes)
    return found


def restricted(printed, drop: set = frozenset(), keep: set | None = None):
    """A copy of a fingerprint without the hashes in ``drop`` (and, given ``keep``, without those not in it).

    Done here rather than with CodeFingerprint's ``boilerplate`` argument: that one passes the document's
    hashes, which repeat, to ``np.intersect1d(assume_unique=True)``, which then also drops one occurrence of
    every repeated k-gram. The rule is the same (a hash in the boilerplate never matches) and the coverage is
    computed as copydetect computes it.
    """
    from copydetect.utils import get_token_coverage

    kept = copy.copy(printed)
    kept.hashes = {h for h in printed.hashes if h not in drop and (keep is None or h in keep)}
    kept.hash_idx = {h: i for h, i in printed.hash_idx.items() if h in kept.hashes}
    kept.token_coverage = get_token_coverage(kept.hash_idx, printed.k, len(printed.filtered_code))
    return kept


def compare(assignment: str, students: list[Work], sources: list[Work]) -> tuple[list[Pair], list[Pair]]:
    """Every pair of students, and every student against every known source, for code and for prose."""
    from copydetect.detector import compare_files

    release = Release(assignment)
    ranked = {}
    for kind in ("code", "text"):
        boilerplate = all_hashes(release.cells(kind), kind)
        have = [w for w in students if getattr(w, kind).strip()]
        origins = [w for w in sources if getattr(w, kind).strip()]
        printed = {id(w): restricted(fingerprint(w, kind), drop=boilerplate) for w in have + origins}
        known = set().union(*(all_hashes(w.cells(kind), kind) for w in origins))
        among = {id(w): restricted(printed[id(w)], drop=known) for w in have}  # what no known source holds
        pairs = []
        for i, left in enumerate(have):
            for right in have[i + 1:]:
                pairs.append(_pair(kind, left, right, among[id(left)], among[id(right)], compare_files))
            for right in origins:
                pairs.append(_pair(kind, left, right, printed[id(left)], printed[id(right)], compare_files))
        ranked[kind] = sorted((p for p in pairs if p.overlap > 0),
                              key=lambda p: (-p.marked, -p.score, -p.overlap, p.left.name, p.right.name))
    return ranked["code"], ranked["text"]


def _pair(kind, left, right, left_print, right_print, compare_files) -> Pair:
    if not left_print.hashes or not right_print.hashes:
        return Pair(kind, left, right, (0.0, 0.0), 0, (np.array([]), np.array([])))
    overlap, similarity, slices = compare_files(left_print, right_print)
    return Pair(kind, left, right, (float(similarity[0]), float(similarity[1])), int(overlap), slices)


def similarity_report(assignment: str, paths: list[Path], warnings: list[str]) -> Report:
    start = time.monotonic()
    students, skipped = collect(assignment, paths, warnings)
    if len(students) < 2:
        names = ", ".join(w.name for w in students) or "none"
        reasons = "".join(f"\n  skipped {name}: {why}" for name, why in skipped)
        raise Problem(f"only {len(students)} readable submission{'s' * (len(students) != 1)} ({names}): a similarity "
                      f"report compares at least two students{reasons}")
    sources, missing = known_sources(assignment)
    code, text = compare(assignment, students, sources)
    return Report(assignment, students, skipped, sources, missing, code, text, time.monotonic() - start,
                  sum(bool(w.text.strip()) for w in students))


# --- the page -------------------------------------------------------------------------------------------------

STYLE = """
:root { color-scheme: light; }
body { font: 16px/1.5 system-ui, sans-serif; color: #1a1a1a; background: #fff; margin: 0; }
main { max-width: 82rem; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.3rem; margin-top: 2.5rem; } h3 { font-size: 1.05rem; }
table { border-collapse: collapse; margin: 1rem 0; }
caption { text-align: left; font-weight: 600; padding-bottom: .4rem; }
th, td { border: 1px solid #8a8a8a; padding: .3rem .6rem; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
thead th { background: #e8e8e8; }
tr.look td { background: #fff4cc; font-weight: 600; }
a { color: #0b4f9c; } a:focus { outline: 3px solid #1a1a1a; outline-offset: 2px; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
@media (max-width: 50rem) { .sides { grid-template-columns: 1fr; } }
figure { margin: 0; min-width: 0; } figcaption { font-weight: 600; margin-bottom: .3rem; }
pre { background: #f6f6f6; border: 1px solid #8a8a8a; padding: .6rem; overflow-x: auto; font-size: .85rem;
      line-height: 1.4; white-space: pre-wrap; overflow-wrap: anywhere; }
mark { background: #ffd966; color: #1a1a1a; font-weight: 700; }  /* bold too: not by colour alone */
.gap { color: #555; font-style: italic; }
.note { color: #333; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _percent(share: float) -> str:
    return f"{share * 100:.0f}%"


def _ranges(slices, length: int) -> list[tuple[int, int]]:
    """copydetect's slices (starts row, ends row) as sorted, merged, clipped (start, end) ranges."""
    if len(slices) == 0 or len(slices[0]) == 0:
        return []
    merged: list[list[int]] = []
    for start, end in sorted(zip((int(s) for s in slices[0]), (int(e) for e in slices[1]))):
        start, end = max(0, min(start, length)), max(0, min(end, length))
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def passages(text: str, slices) -> str:
    """``text`` escaped, its matching passages in <mark>, lines far from any passage folded into one line."""
    ranges = _ranges(slices, len(text))
    lines, at = [], 0
    for line in text.split("\n"):
        lines.append((at, at + len(line)))
        at += len(line) + 1
    hit = [any(s < end + 1 and e > start for s, e in ranges) for start, end in lines]
    near = [any(hit[max(0, i - CONTEXT_LINES):i + CONTEXT_LINES + 1]) for i in range(len(lines))]
    out, folded = [], 0
    for (start, end), keep in zip(lines, near):
        if not keep:
            folded += 1
            continue
        if folded:
            out.append(f'<span class="gap">[{folded} line{"s" * (folded != 1)} without a match]</span>')
            folded = 0
        pieces, cursor = [], start
        for s, e in ranges:
            s, e = max(s, start), min(e, end)
            if e <= s:
                continue
            pieces.append(_e(text[cursor:s]) + "<mark>" + _e(text[s:e]) + "</mark>")
            cursor = e
        pieces.append(_e(text[cursor:end]))
        out.append("".join(pieces))
    if folded:
        out.append(f'<span class="gap">[{folded} line{"s" * (folded != 1)} without a match]</span>')
    return "\n".join(out)


def _table(pairs: list[Pair], kind: str, caption: str) -> str:
    what = "code" if kind == "code" else "written answer"
    rows = []
    for rank, pair in enumerate(pairs[:MAX_LISTED], 1):
        other = f"{_e(pair.right.name)} (known source)" if pair.right.source else _e(pair.right.name)
        rows.append(
            f'<tr{" class=look" if pair.marked else ""}><td class=n>{rank}</td><td>{_e(pair.left.name)}</td>'
            f"<td>{other}</td><td class=n>{_percent(pair.score)}</td>"
            f"<td class=n>{_percent(pair.similarity[0])}</td>"
            f"<td class=n>{'' if pair.right.source else _percent(pair.similarity[1])}</td>"
            f"<td class=n>{pair.overlap}</td><td>{'look' if pair.marked else ''}</td>"
            f'<td><a href="#{kind}-{rank}">passages</a></td></tr>')
    more = len(pairs) - MAX_LISTED
    return (f"<table><caption>{_e(caption)}</caption><thead><tr><th scope=col>Rank</th>"
            f"<th scope=col>Student</th><th scope=col>Compared with</th><th scope=col>Ranked by</th>"
            f"<th scope=col>Share of the student's {what}</th><th scope=col>Share of the other's</th>"
            f"<th scope=col>Overlap (tokens)</th><th scope=col>At or above {_percent(HIGHLIGHT)}</th>"
            f"<th scope=col>Passages</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
            + (f"<p>{more} more pair{'s' * (more != 1)} share less and are not listed.</p>" if more > 0 else ""))


def _sides(pairs: list[Pair], kind: str) -> str:
    out = []
    for rank, pair in enumerate(pairs[:MAX_LISTED], 1):
        part = "code" if kind == "code" else "text"
        left, right = getattr(pair.left, part), getattr(pair.right, part)
        other = f"{pair.right.name} (known source)" if pair.right.source else pair.right.name
        out.append(
            f'<section aria-labelledby="{kind}-{rank}"><h3 id="{kind}-{rank}">{rank}. {_e(pair.left.name)} and '
            f"{_e(other)}: {_percent(pair.similarity[0])} of the first"
            + ("" if pair.right.source else f", {_percent(pair.similarity[1])} of the second")
            + f", {pair.overlap} tokens</h3><div class=sides>"
            f"<figure><figcaption>{_e(pair.left.name)}</figcaption><pre>{passages(left, pair.slices[0])}</pre></figure>"
            f"<figure><figcaption>{_e(other)}</figcaption><pre>{passages(right, pair.slices[1])}</pre></figure>"
            "</div></section>")
    return "".join(out)


def render(report: Report) -> str:
    """The report as one self-contained HTML page: no script, inline CSS, every student's byte escaped."""
    a = report.assignment
    marked_code = sum(p.marked for p in report.code)
    marked_text = sum(p.marked for p in report.text)
    sources = "".join(f"<li>{_e(s.name)} ({_e(s.path)})</li>" for s in report.sources)
    sources += "".join(f"<li>{_e(m)}</li>" for m in report.missing_sources)
    skipped = "".join(f"<li>{_e(name)}: {_e(why)}</li>" for name, why in report.skipped)
    notes = "".join(f"<li>{_e(w.name)}: {_e(note)}</li>" for w in report.students for note in w.notes)
    body = [
        f"<h1>Similarity report: {_e(a)}</h1>",
        f"<p>{len(report.students)} students compared, {len(report.students) * (len(report.students) - 1) // 2} "
        f"pairs, in {report.seconds:.1f} s. Code: {marked_code} pair{'s' * (marked_code != 1)} at or above "
        f"{_percent(HIGHLIGHT)}. Written answers ({report.with_text} students wrote some): {marked_text} "
        f"pair{'s' * (marked_text != 1)} at or above {_percent(HIGHLIGHT)}."
        + (f" {len(report.skipped)} submission{'s' * (len(report.skipped) != 1)} could not be read "
           '(<a href="#skipped">skipped</a>).' if report.skipped else "") + "</p>",
        '<section aria-labelledby=reading><h2 id=reading>How to read this report</h2><ul>'
        "<li>Similarity is evidence to look at, not a verdict. Short answers to one precise exercise converge: "
        "independent honest solutions of the course's exercises share up to about half of their code here. "
        "Read the passages side by side, and talk with the students, before you conclude anything.</li>"
        "<li>Each pair shows two shares: how much of the first student's code (or text) matches the other's, "
        "and how much of the other's matches the first's. A short answer copied into a longer notebook shows a "
        "high share on one side only; pairs are ranked by the larger share. Against a known source, only the "
        "student's share counts.</li>"
        "<li>Code is compared as copydetect tokenizes it: names of variables, functions and classes become one "
        "placeholder each, strings another, comments and blank lines are dropped. Renaming, reordering "
        "functions and rewriting comments do not hide a copy. Overlap counts the matching tokens "
        "(characters of that placeholder code).</li>"
        "<li>Written answers are compared as words: case, punctuation and line breaks are ignored; about seven "
        "words in a row must agree to count.</li>"
        f"<li>Left out as the release's own: every cell of <code>{_e('exercises/' + a + '/' + a + '.ipynb')}</code> "
        "as it was handed out, the grade cells and self-checks, and any passage of the release's code or text "
        "(the answer cells' signatures and docstrings, the questions) inside what a student wrote.</li>"
        f"<li>Known sources (a student close to one is listed against it; what two students share with it is "
        f"left out of their pair): <ul>{sources}</ul></li>"
        f"<li>Marked rows (<q>look</q>, on a yellow background) share at least {_percent(HIGHLIGHT)} and at least "
        f"{MIN_OVERLAP} tokens. The first {MAX_LISTED} pairs of each kind are listed.</li></ul></section>",
        "<section aria-labelledby=code><h2 id=code>Code</h2>",
        _table(report.code, "code", f"Pairs of {a} submissions ranked by how much code they share")
        if report.code else "<p>No two submissions share any code beyond the release's.</p>",
        "</section><section aria-labelledby=text><h2 id=text>Written answers</h2>",
        _table(report.text, "text", f"Pairs of {a} submissions ranked by how much written text they share")
        if report.text else "<p>No two written answers share a passage.</p>",
        "</section>",
    ]
    if report.code or report.text:
        body.append("<section aria-labelledby=passages><h2 id=passages>Matching passages</h2>"
                    + _sides(report.code, "code") + _sides(report.text, "text") + "</section>")
    if skipped:
        body.append(f"<section aria-labelledby=skipped><h2 id=skipped>Skipped</h2><ul>{skipped}</ul></section>")
    if notes:
        body.append(f"<section aria-labelledby=notes><h2 id=notes>Notes</h2><ul>{notes}</ul></section>")
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            '<meta name=viewport content="width=device-width, initial-scale=1">'
            f"<title>Similarity report: {_e(a)}</title><style>{STYLE}</style></head><body><main>"
            + "\n".join(body) + "</main></body></html>\n")


def _plain(text) -> str:
    """``text`` for a terminal: a file name can hold escape sequences, which would act on the instructor's."""
    return "".join(c if c.isprintable() or c == "\n" else "?" for c in str(text))


def summary(report: Report, output: Path, shown: int = 5) -> list[str]:
    lines = [f"{report.assignment}: compared {len(report.students)} students in {report.seconds:.1f} s"
             + (f" ({report.with_text} with written answers)" if report.with_text else "")
             + (f"; skipped {len(report.skipped)}" if report.skipped else "")]
    for kind, pairs in (("code", report.code), ("written answers", report.text)):
        if not pairs:
            continue
        marked = sum(p.marked for p in pairs)
        lines.append(f"  {kind}: {marked} pair{'s' * (marked != 1)} at or above {_percent(HIGHLIGHT)}; most similar:")
        for pair in pairs[:max(shown, marked)][:MAX_LISTED]:
            other = _plain(pair.right.name) + (" (known source)" if pair.right.source else "")
            lines.append(f"    {_percent(pair.score):>4}  {pair.overlap:>5} tokens  {_plain(pair.left.name)} ~ {other}"
                         + ("  <- look" if pair.marked else ""))
    for name, why in report.skipped:
        lines.append(f"  skipped {_plain(name)}: {_plain(why)}")
    lines.append(f"  report: {output}")
    return lines


def command(assignment: str, paths: list[Path], output: Path | None) -> int:
    """``python -m autograder similarity``: write the page, print the summary; 2 with a message when it cannot."""
    import sys

    try:
        if not (load.REPO / "exercises" / assignment / f"{assignment}.ipynb").is_file():
            known = sorted(p.name for p in (load.REPO / "exercises").iterdir() if (p / f"{p.name}.ipynb").is_file())
            raise Problem(f"unknown assignment {assignment!r}; known: {', '.join(known)}")
        missing = [str(p) for p in paths if not p.exists() and not p.is_symlink()]
        if missing:
            raise Problem(f"no such file or folder: {', '.join(missing)}")
        warnings: list[str] = []
        try:
            report = similarity_report(assignment, paths, warnings)
        finally:
            for warning in warnings:
                print(f"warning: {_plain(warning)}", file=sys.stderr)
        output = output or Path("results") / assignment / "similarity.html"
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            partial = output.with_name(output.name + ".partial")
            partial.write_text(render(report), encoding="utf-8")
            partial.replace(output)
        except OSError as error:
            raise Problem(f"cannot write {output}: {error.strerror or error}") from None
    except Problem as problem:
        print(f"error: {_plain(problem)}", file=sys.stderr)
        return 2
    print("\n".join(summary(report, output)))
    return 0
