"""``python -m autograder similarity`` ranks pairs of students whose answers look alike, in one HTML page.

The class is the honest corpus of one exercise (``tests/honest_corpus.py``: independent implementations,
each in a style real code uses) plus what a copier hands in: copies of one honest notebook with the
variables renamed, the functions reordered, the comments rewritten or removed and the blank lines changed;
a copy of the reference solution; and, for ex3's written answer, a paragraph copied with a few words
changed. The planted pairs must rank above every honest pair, the honest pairs must stay below the
report's mark, and the copy of the reference must be listed against the reference alone.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from autograder import similarity
from tests.grading import blank, reference, write_class
from tests.honest_corpus import CORPUS, EX2_LLMC
from tests.conftest import REPO

EX2, EX3 = "ex2_layernorm", "ex3_batchnorm"
HOSTILE = '</pre><script>alert("code")</script>'
HOSTILE_NAME = "copy-comments<b onmouseover=alert(1)>"  # a file name holds no "/"


def answer(notebook: dict, grade_id: str) -> dict:
    return next(c for c in notebook["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)


def renamed(source: str, names: dict[str, str]) -> str:
    """``source`` with its variables renamed (attributes and methods, after a dot, keep their names)."""
    for old, new in names.items():
        source = re.sub(rf"(?<![.\w]){re.escape(old)}\b", new, source)
    return source


def planted(notebook: dict, edit) -> dict:
    """A copy of ``notebook`` with every answer cell passed through ``edit``."""
    notebook = copy.deepcopy(notebook)
    for cell in notebook["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution") and cell["cell_type"] == "code":
            cell["source"] = edit(cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"]))
    return notebook


LLMC_NAMES = {"xshift": "centred", "rstd": "inv_sigma", "mean": "mu", "var": "sigma2", "norm": "x_hat",
              "dnorm": "g", "dnorm_mean": "g_avg", "dnorm_norm_mean": "gx_avg", "C": "features", "db": "grad_b",
              "dw": "grad_w", "dx": "grad_x", "cache": "saved"}


def swap_functions(source: str) -> str:
    """The cell's top-level definitions in reverse order."""
    blocks = re.split(r"\n(?=def |class )", source.strip())
    return "\n\n\n".join(reversed([b.strip() for b in blocks]))


def other_comments(source: str) -> str:
    source = re.sub(r"#[^\n]*", "# my own note", source)
    return re.sub(r'"""[^"]*"""', f'"""{HOSTILE} <img src=x onerror=alert(1)>"""', source)


def no_comments_other_spacing(source: str) -> str:
    lines = [re.sub(r"\s*#.*$", "", line) for line in source.splitlines()]
    lines = [re.sub(r" = ", "=", line).replace(", ", ",") for line in lines if line.strip()]
    return "\n\n".join(lines)


def edited(source: str) -> str:
    """Renamed, two lines rewritten and a print added: a copier who also changed what they understood."""
    source = renamed(source, LLMC_NAMES)
    source = source.replace("(sigma2 + eps) ** -0.5", "torch.rsqrt(sigma2 + eps)")
    source = source.replace("    features = x.size(-1)\n", "    features = x.shape[-1]\n    print(x.shape)\n", 1)
    return source


def the_class() -> dict[str, dict]:
    """The ex2 class: the honest corpus, three planted copies of one entry, a copy of the reference, a hostile name."""
    honest = {entry.name: entry.notebook() for entry in CORPUS if entry.assignment == EX2}
    original = honest[EX2_LLMC.name]
    planted_copies = {
        "copy-renamed": planted(original, lambda s: renamed(s, LLMC_NAMES)),
        "copy-reordered-renamed": planted(original, lambda s: swap_functions(renamed(s, LLMC_NAMES))),
        HOSTILE_NAME: planted(original, other_comments),
        "copy-spacing": planted(original, no_comments_other_spacing),
        "copy-edited": planted(original, edited),
    }
    def from_reference(names):
        return planted(reference(EX2), lambda s: re.sub(r"#{3} (BEGIN|END) SOLUTION\n", "", renamed(s, names)))

    return {**honest, **planted_copies, "copy-of-reference": from_reference({"mean": "m", "var": "v", "g": "grad"}),
            "copy-of-reference-too": from_reference({"x_hat": "xn", "inv_std": "r"})}


PLANTED = {EX2_LLMC.name, "copy-renamed", "copy-reordered-renamed", HOSTILE_NAME, "copy-spacing", "copy-edited"}
HONEST = {entry.name for entry in CORPUS if entry.assignment == EX2}


@pytest.fixture(scope="module")
def ex2_class(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ex2") / "submissions"
    write_class(folder, {**the_class(), "broken": "{ this is not a notebook"})
    return folder


@pytest.fixture(scope="module")
def ex2_report(ex2_class) -> similarity.Report:
    return similarity.similarity_report(EX2, [ex2_class], [])


def cli(*args, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "similarity", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def ex2_page(ex2_class, tmp_path_factory):
    """The report written by the real command line: (the finished process, the page)."""
    page = tmp_path_factory.mktemp("page") / "similarity.html"
    done = cli(EX2, ex2_class, "-o", page)
    assert done.returncode == 0, done.stderr
    return done, page.read_text()


def student_pairs_of(pairs):
    return [p for p in pairs if not p.right.source]


def student_pairs(report):
    return student_pairs_of(report.code)


def names(pair) -> set[str]:
    return {pair.left.name, pair.right.name}


def test_planted_copies_rank_above_every_honest_pair(ex2_report):
    ranked = student_pairs(ex2_report)
    planted_pairs = [i for i, p in enumerate(ranked) if names(p) <= PLANTED]
    assert len(planted_pairs) == len(PLANTED) * (len(PLANTED) - 1) // 2
    assert planted_pairs == list(range(len(planted_pairs)))  # the first fifteen, whatever their order
    assert all(p.marked for p in ranked[:len(planted_pairs)])


def test_every_planted_copy_shares_most_of_the_original(ex2_report):
    against_original = [p for p in student_pairs(ex2_report) if EX2_LLMC.name in names(p) and names(p) <= PLANTED]
    assert len(against_original) == len(PLANTED) - 1
    assert min(p.score for p in against_original) >= 0.8


def test_independent_honest_pairs_stay_below_the_mark(ex2_report):
    honest = [p for p in student_pairs(ex2_report) if names(p) <= HONEST]
    assert honest  # pairs that share nothing are not listed
    assert max(p.score for p in honest) < similarity.HIGHLIGHT
    assert not any(p.marked for p in honest)


@pytest.mark.parametrize("assignment", ["ex1_residual", "ex3_batchnorm", "ex4_prepost", "ex5_rmsnorm",
                                        "ex6_beyond_norm"])
def test_independent_honest_pairs_of_every_other_exercise_stay_below_the_mark(assignment, tmp_path):
    folder = write_class(tmp_path, {e.name: e.notebook() for e in CORPUS if e.assignment == assignment})
    report = similarity.similarity_report(assignment, [folder], [])
    assert not any(p.marked for p in report.code if not p.right.source)


@pytest.mark.parametrize("student", ["copy-of-reference", "copy-of-reference-too"])
def test_a_copy_of_the_reference_is_listed_against_the_reference_alone(ex2_report, student):
    mine = [p for p in ex2_report.code if student in names(p)]
    assert mine[0].right.name == "reference solution" and mine[0].right.source
    assert mine[0].score >= 0.9 and mine[0].marked
    assert not any(p.marked for p in mine[1:])  # not against the other copy, nor anyone else


def test_pytorchs_decompositions_are_known_sources(ex2_report):
    assert [s.name for s in ex2_report.sources] == [
        "reference solution", "PyTorch: _normalize, native_layer_norm", "PyTorch: native_layer_norm_backward"]
    assert not ex2_report.missing_sources
    assert "def native_layer_norm(" in ex2_report.sources[1].code


def test_stubs_handed_in_as_given_are_not_paired(tmp_path):
    """Students who kept the release's stubs (only its "# YOUR CODE HERE" deleted) share nothing of their own."""
    def stubs_only():
        notebook = planted(blank(EX2), lambda s: s.replace("# YOUR CODE HERE\n", ""))
        return notebook
    report = similarity.similarity_report(EX2, [write_class(tmp_path, {"ada": stubs_only(), "ben": stubs_only()})], [])
    assert 'raise NotImplementedError("not written yet: replace this line with your code")' in report.students[0].code
    assert report.code == []


def test_an_nbgrader_course_folder_is_read_like_grade_reads_it(tmp_path):
    for student, notebook in {"ada": reference(EX2), "ben": EX2_LLMC.notebook()}.items():
        write_class(tmp_path / "submitted" / student / EX2, {EX2: notebook})
    report = similarity.similarity_report(EX2, [tmp_path], [])
    assert [w.name for w in report.students] == ["ada", "ben"]
    assert report.code[0].left.name == "ada" and report.code[0].right.name == "reference solution"


def several_notebooks_class(course: Path) -> Path:
    """ada hands in EX2_LLMC's notebook; chen the blank release beside a renamed copy of it (mine.ipynb)."""
    write_class(course / "submitted" / "ada" / EX2, {EX2: EX2_LLMC.notebook()})
    copied = planted(EX2_LLMC.notebook(), lambda s: renamed(s, LLMC_NAMES))
    write_class(course / "submitted" / "chen" / EX2, {EX2: blank(EX2), "mine": copied})
    return course


def test_a_student_with_several_notebooks_is_compared_by_the_one_that_counted(tmp_path, monkeypatch):
    course = several_notebooks_class(tmp_path)
    result = course / "results" / EX2 / "chen.json"
    result.parent.mkdir(parents=True)
    result.write_text('{"extra_data": {"notebooks": [{"name": "ex2_layernorm.ipynb", "score": 0, "status": "ok", '
                      '"counted": false}, {"name": "mine.ipynb", "score": 10, "status": "ok", "counted": true}]}}')
    monkeypatch.chdir(course)  # the results are read where `grade` writes them: results/<assignment>/
    report = similarity.similarity_report(EX2, [course], [])
    assert names(student_pairs(report)[0]) == {"ada", "chen"}
    chen = next(work for work in report.students if work.name == "chen")
    assert "2 notebooks submitted; compared: mine.ipynb (the one that counted)" in chen.notes


def test_a_student_with_several_notebooks_and_no_result_is_compared_by_the_first_and_told_to_grade(tmp_path,
                                                                                                   monkeypatch):
    course = several_notebooks_class(tmp_path)
    monkeypatch.chdir(course)
    report = similarity.similarity_report(EX2, [course], [])
    chen = next(work for work in report.students if work.name == "chen")
    assert f"2 notebooks submitted; compared: {EX2}.ipynb (no result says which counted: grade first, then run " \
           "this again)" in chen.notes


def test_the_release_code_is_left_out(ex2_report):
    blank = next(w for w in ex2_report.students if w.name == EX2_LLMC.name)
    assert "import torch" not in blank.code  # the release's imports cell, unchanged
    assert "Self-check" not in blank.code and "BEGIN HIDDEN TESTS" not in blank.code


def test_the_page_escapes_what_students_wrote(ex2_page):
    _, page = ex2_page
    soup = BeautifulSoup(page, "html.parser")
    assert soup.find_all("script") == [] and soup.find_all("img") == []
    assert not [(tag.name, a) for tag in soup.find_all(True) for a in tag.attrs if a.lower().startswith("on")]
    assert HOSTILE in soup.get_text() and HOSTILE_NAME in soup.get_text()  # shown as text
    assert "<img src=x onerror=alert(1)>" in soup.get_text()


def test_the_page_is_accessible_html(ex2_page):
    _, page = ex2_page
    soup = BeautifulSoup(page, "html.parser")
    assert soup.html["lang"] == "en" and soup.title.string and soup.h1
    tables = soup.find_all("table")
    assert tables and all(t.caption and t.find("th", scope="col") for t in tables)
    assert not soup.find_all(["link", "iframe"]) and "<style>" in page


def test_the_page_shows_matching_passages_side_by_side(ex2_page):
    _, page = ex2_page
    soup = BeautifulSoup(page, "html.parser")
    first = soup.find(id="code-1").find_parent("section")
    marks = [m.get_text() for m in first.find_all("mark")]
    assert len(first.find_all("figure")) == 2 and marks
    assert any("mean" in m or "mu" in m for m in marks)


def test_the_command_prints_a_ranked_summary_and_lists_the_unreadable_notebook(ex2_page, ex2_class):
    done, _ = ex2_page
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{EX2}: compared {len(the_class())} students") and "skipped 1" in lines[0]
    assert "<- look" in lines[2]
    assert any(line.startswith("  skipped broken: ") and "not valid JSON" in line for line in lines)
    assert lines[-1].startswith("  report: ")
    assert "Traceback" not in done.stderr


# --- written answers (ex3) -------------------------------------------------------------------------------------

WRITTEN = {
    "ana": """BatchNorm computes one mean and one variance per channel over the batch dimension. In a Transformer
the tensor is (B, T, C), so every token of every sequence in the batch is pooled into the statistics of a
feature. The output for my sentence then depends on which other sentences happen to be in the same batch.
Padding makes this worse, because the padded positions are counted as if they were real tokens.""",
    "bo": """Think about what gets averaged: with activations shaped (B, T, C) a batch normalization layer
mixes all B*T positions for each of the C features. Variable length inputs are padded, and the pad tokens
leak into those averages unless masked. At inference we generate one token at a time and there is no batch to
speak of, so the layer must fall back on running estimates collected during training, a mismatch LayerNorm
avoids since it only looks at the features of one token.""",
    "chen": """Layer normalization normalizes each position on its own. Batch normalization instead couples the
examples: during training a sequence's output changes when you swap the other sequences of the minibatch.
Small per-device batches give noisy estimates. Running averages are used at evaluation time, so the network
is evaluated with a different function from the one it learned with.""",
    "dara": """Three problems. (1) Statistics across the batch: BN averages over B and T, so positions that
have nothing to do with each other share a normalization. (2) Sequences differ in length; the zeros added as
padding change the mean and variance. (3) Train and test differ: the moving averages replace the batch
statistics when we evaluate, which is awkward for autoregressive decoding with a single sequence.""",
}
COPIED_FROM = "bo"
COPIED = """Think about what is averaged: with activations of shape (B, T, C) a batch normalisation layer
mixes all B*T positions for each of the C features.

Variable length inputs are padded, and the padding tokens leak into those averages unless they are masked. At
inference we generate one token at a time and there is no batch to speak of, so the layer has to fall back on
running estimates collected while training, a mismatch LayerNorm avoids since it only looks at the features
of one token."""


def with_written(entry, text: str) -> dict:
    notebook = entry.notebook()
    answer(notebook, "written_answer")["source"] = text
    return notebook


@pytest.fixture(scope="module")
def ex3_report(tmp_path_factory) -> similarity.Report:
    honest = [e for e in CORPUS if e.assignment == EX3]
    students = {name: with_written(entry, text) for (name, text), entry in zip(WRITTEN.items(), honest)}
    students["eli-copied"] = with_written(honest[len(WRITTEN)], COPIED)  # code of their own, the text bo's
    students["fay-model-answer"] = blank(EX3)  # no code; the reference's model answer as the written answer
    model = "".join(answer(reference(EX3), "written_answer")["source"])
    answer(students["fay-model-answer"], "written_answer")["source"] = re.sub(r"### (BEGIN|END) SOLUTION\n?", "", model)
    folder = write_class(tmp_path_factory.mktemp("ex3") / "submissions", students)
    return similarity.similarity_report(EX3, [folder], [])


def test_a_copied_written_answer_with_words_changed_ranks_first_among_students(ex3_report):
    first = student_pairs_of(ex3_report.text)[0]
    assert names(first) == {COPIED_FROM, "eli-copied"}
    assert first.marked and first.score >= 0.7


def test_the_model_answer_pasted_is_listed_against_the_reference(ex3_report):
    fay = [p for p in ex3_report.text if "fay-model-answer" in names(p)]
    assert fay[0].right.name == "reference solution" and fay[0].marked
    assert not any(p.marked for p in fay[1:])


def test_independent_written_answers_stay_below_the_mark(ex3_report):
    honest = [p for p in ex3_report.text if names(p) <= set(WRITTEN)]
    assert all(p.score < similarity.HIGHLIGHT for p in honest)  # most share no seven words in a row at all


def test_the_question_is_left_out_of_the_written_answers(tmp_path):
    """Students who paste the question above a short answer of their own are not paired by the question."""
    question = next(c for c in blank(EX3)["cells"] if "".join(c["source"]).startswith("## Task 3"))
    quoting = {name: with_written(entry, "".join(question["source"]) + "\n\n" + text.split(".")[0] + ".")
               for (name, text), entry in zip(WRITTEN.items(), [e for e in CORPUS if e.assignment == EX3])}
    report = similarity.similarity_report(EX3, [write_class(tmp_path, quoting)], [])
    assert not any(p.marked for p in report.text)


# --- bad input ---------------------------------------------------------------------------------------------------

def test_no_notebooks_is_an_error_naming_what_was_looked_for(tmp_path):
    (tmp_path / "empty").mkdir()
    done = cli(EX2, tmp_path / "empty", "-o", tmp_path / "out.html")
    assert done.returncode == 2
    assert "error: no notebooks were found under" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out.html").exists()


def test_one_readable_student_is_an_error_naming_the_skipped_ones(tmp_path):
    write_class(tmp_path / "class", {"ada": reference(EX2), "ben": b"\x00\x01 not json"})
    done = cli(EX2, tmp_path / "class", "-o", tmp_path / "out.html")
    assert done.returncode == 2
    assert "error: only 1 readable submission (ada)" in done.stderr
    assert "skipped ben: " in done.stderr and "not valid JSON" in done.stderr and "Traceback" not in done.stderr


DAMAGED = {
    "empty": b"",
    "not-utf8": b"\xff\xfe{",
    "deep": "[" * 100_000,
    "no-cells": {"nbformat": 4, "metadata": {}},
    "cells-not-a-list": {"nbformat": 4, "cells": "oops"},
    "format-2": {"nbformat": 2, "cells": []},
    "odd-cells": {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        1, [], {"cell_type": ["code"]}, {"cell_type": "code", "source": 7},
        {"cell_type": "code", "source": ["x = 1", 2], "metadata": []},
        {"cell_type": "code", "source": "y = 2", "metadata": {"nbgrader": {"grade_id": ["a"]}}},
        {"cell_type": "markdown", "source": "\x00<script>", "metadata": {"nbgrader": "solution"}}]},
}


def test_damaged_notebooks_are_skipped_with_their_reason(tmp_path):
    folder = write_class(tmp_path, {"ada": reference(EX2), "ben": EX2_LLMC.notebook(), **DAMAGED})
    report = similarity.similarity_report(EX2, [folder], [])
    skipped = dict(report.skipped)
    assert sorted(skipped) == sorted(set(DAMAGED) - {"odd-cells"})
    assert "empty" in skipped["empty"] and "not valid JSON" in skipped["deep"]
    assert "no cells" in skipped["no-cells"] and "format 2" in skipped["format-2"]
    odd = next(w for w in report.students if w.name == "odd-cells")
    assert "y = 2" in odd.code and odd.text == "\x00<script>"
    assert "<script>" not in similarity.render(report)


def test_an_unknown_assignment_is_an_error(tmp_path):
    assert similarity.command("ex9_nothing", [tmp_path], None) == 2
