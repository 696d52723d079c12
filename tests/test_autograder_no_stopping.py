"""No submission stops or slows a class: whatever it says, names itself or leaves, the others are graded.

Three ways one submission stopped a whole class before (issue 33), each with fresh variants:

1. Text no file can hold: a lone surrogate or a control character in an error message, a printed line, a
   finding, a file name. The result is written with every such character escaped, and the class goes on.
2. A grading process that dies while it grades (here: made to die by the test, for marked submissions): it
   is replaced, the submission is graded once more, and a submission that kills two gets ``grader_error``
   while everyone after it is graded.
3. A flood of findings: code compiled at run time, each source different, each name 64 KB long. What the
   grader keeps is bounded, in number and size, and the time it spends reading it is the submission's.

Plus a Hypothesis fuzz of the whole path from what a worker sends to the files on disk.
"""

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder import load, report, run, scoring
from autograder.checks import Submission
from autograder.sandbox import Limits
from autograder.sandboxed import wire
from tests.grading import max_scores, part_scores, reference, results_of, run_grader, with_cell, write_class
from tests.test_autograder_spillover import ASSIGNMENT, LAYER_NORM

# name -> what the layer_norm cell does after defining a correct layer_norm
ODD_TEXT = {
    "raises-a-lone-surrogate": "raise ValueError('\\ud800')",
    "raises-every-surrogate-kind": "raise KeyError('\\udcff\\udfff\\ud83d')",
    "prints-a-lone-surrogate": "print('\\ud800' * 10)\nraise RuntimeError('printed \\udfff')",
    "raises-control-characters": "raise ValueError('\\x1b[31m\\x00\\x07\\u202e\\r')",
    "an-exception-named-with-a-surrogate": "raise type('E\\ud800', (Exception,), {})('x')",
}
# Code compiled at run time, 60 different sources a graded call, each naming a 64 KB identifier.
FLOOD = """
def layer_norm(x, weight, bias, eps=1e-5):
    for i in range(60):
        name = 'n' * 65536 + str(i) + str(id(x))
        compile(f'{name} = 1\\nimport ctypes\\n', '<flood>', 'exec')
    m = x.mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + eps) * weight + bias
"""


@pytest.fixture(scope="module")
def odd_class(tmp_path_factory, bubblewrap):
    """One class: honest references between the submissions with odd text and the flood, one named with bytes
    that are not UTF-8. Graded by ``python -m autograder grade``."""
    folder = tmp_path_factory.mktemp("odd")
    notebooks = {"00-honest": reference(ASSIGNMENT)}
    for number, (name, code) in enumerate(ODD_TEXT.items(), start=1):
        notebooks[f"{number:02d}-{name}"] = with_cell(ASSIGNMENT, "layer_norm", LAYER_NORM + code)
        notebooks[f"{number:02d}-honest-after"] = reference(ASSIGNMENT)
    notebooks["90-flood"] = with_cell(ASSIGNMENT, "layer_norm", FLOOD)
    notebooks["99-honest-last"] = reference(ASSIGNMENT)
    write_class(folder / "class", notebooks)
    undecodable = os.fsencode(folder / "class") + b"/91-bytes-\xff\xfe-\x1b.ipynb"
    with open(undecodable, "w") as file:
        json.dump(reference(ASSIGNMENT), file)
    done = run_grader("grade", ASSIGNMENT, folder / "class", "--results", folder / "results", "--jobs", 2,
                      timeout=600)
    return done, folder / "results"


@pytest.mark.slow
def test_a_class_with_odd_text_is_graded_to_the_end(odd_class):
    done, results = odd_class
    assert done.returncode == 0, done.stderr[-2000:]
    graded = results_of(results)
    assert len(graded) == 2 * len(ODD_TEXT) + 4


@pytest.mark.slow
def test_every_honest_submission_in_it_keeps_full_marks_and_status_ok(odd_class):
    graded = results_of(odd_class[1])
    honest = [result for name, result in graded.items() if "honest" in name or "bytes" in name]
    assert [(part_scores(r), r["extra_data"]["status"]) for r in honest] == \
        [(max_scores(ASSIGNMENT), "ok")] * (len(ODD_TEXT) + 3)


@pytest.mark.slow
@pytest.mark.parametrize("name", ODD_TEXT)
def test_odd_text_is_written_escaped_in_the_result_and_the_feedback(odd_class, name):
    results = odd_class[1]
    student = next(path.stem for path in results.glob("*.json") if name in path.stem)
    text = (results / f"{student}.json").read_text(encoding="utf-8")
    feedback = (results / "feedback" / f"{student}.md").read_text(encoding="utf-8")
    for written in (text, feedback):
        assert not report.UNSAFE.search(written.replace("\\\\", "/")), "an unescaped character reached the disk"
    assert "\\\\u" in text or "\\\\x" in text, "the odd characters should show, escaped"


@pytest.mark.slow
def test_a_file_name_that_is_not_utf_8_is_named_with_its_bytes_escaped(odd_class):
    names = [path.name for path in odd_class[1].glob("*.json")]
    assert "91-bytes-\\xff\\xfe-\\x1b.json" in names


@pytest.mark.slow
def test_a_flood_of_findings_keeps_the_grader_small_and_its_result_short(odd_class):
    results = odd_class[1]
    flood = json.loads((results / "90-flood.json").read_text())
    assert (results / "90-flood.json").stat().st_size < 200_000
    assert flood["extra_data"]["grader_peak_rss_mb"] < 300
    assert all(len(note) < 1000 for note in flood["extra_data"]["instructor_notes"])


# --- 2. a grading process that dies -------------------------------------------------------------------------------

def dies_on(marks: set[str], original):
    """``grade_one`` that ends the grading process (as a crash in the grader would) for marked submissions."""
    def grade_one(assignment, entry, sandbox, slot, limits):
        if any(mark in entry.student_id for mark in marks):
            os._exit(3)
        return original(assignment, entry, sandbox, slot, limits)
    return grade_one


@pytest.fixture(scope="module", params=[1, 2], ids=["jobs-1", "jobs-2"])
def dying_class(request, tmp_path_factory, bubblewrap):
    folder = tmp_path_factory.mktemp(f"dying-{request.param}")
    notebooks = {f"{number:02d}-honest": reference(ASSIGNMENT) for number in range(0, 8, 2)}
    notebooks["01-kills-its-process"] = reference(ASSIGNMENT)
    notebooks["05-kills-its-process-too"] = reference(ASSIGNMENT)
    write_class(folder / "class", notebooks)
    entries = [load.read(ASSIGNMENT, entry) for entry in load.find(ASSIGNMENT, [folder / "class"])]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run, "grade_one", dies_on({"kills"}, run.grade_one))
        run.grade_all(ASSIGNMENT, entries, folder / "results", Limits(), request.param, "auto")
    return results_of(folder / "results")


@pytest.mark.slow
def test_a_submission_that_kills_its_grading_process_twice_gets_grader_error(dying_class):
    for name in ("01-kills-its-process", "05-kills-its-process-too"):
        extra = dying_class[name]["extra_data"]
        assert extra["status"] == "grader_error"
        assert any("ended while grading this submission, twice" in p for p in extra["problems"])


@pytest.mark.slow
def test_everyone_graded_after_a_dead_grading_process_keeps_full_marks(dying_class):
    honest = [result for name, result in dying_class.items() if "honest" in name]
    assert len(honest) == 4
    assert [(part_scores(r), r["extra_data"]["status"]) for r in honest] == [(max_scores(ASSIGNMENT), "ok")] * 4


def test_a_result_that_cannot_be_written_becomes_a_grader_error_result(tmp_path, monkeypatch):
    entry = load.Entry("student", tmp_path / "student.ipynb")
    data = report.result(ASSIGNMENT, "student", "", "ok", scoring.zero(ASSIGNMENT, "ok", "x"), [], 0.0, "none")
    writes = []

    def refuse_first(results, data, durable=False):
        writes.append(data["extra_data"]["status"])
        if len(writes) == 1:
            raise OSError("disk says no")
        return saved(results, data, durable)

    saved = report.save
    monkeypatch.setattr(report, "save", refuse_first)
    run.save_or_fail(tmp_path, data, ASSIGNMENT, entry)
    written = json.loads((tmp_path / "student.json").read_text())
    assert writes == ["ok", "grader_error"]
    assert written["extra_data"]["problems"] == ["grader error: the result could not be written (OSError)"]


# --- 3. the whole path from a worker to the disk, fuzzed ----------------------------------------------------------

any_text = st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=40)
any_number = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True))
any_value = st.recursive(st.one_of(st.none(), st.booleans(), any_text, any_number),
                         lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                 st.dictionaries(any_text, inner, max_size=4)), max_leaves=12)


def worker_saying(answer: dict, attempts: list[str], compiled: list[str], used: list[str], total: int):
    """A transport that answers every request with what a (hostile) worker would send: ``answer`` encoded as a
    frame and a trailer, decoded as the grader decodes them."""
    session = run.Session(None, 0, [], Limits())

    def transport(request):
        decoded = wire.decode(wire.encode(answer))
        trailer = wire.decode_trailer(wire.encode_trailer(1, used, False, attempts, compiled, total))
        session.note(trailer)
        decoded["monitor"] = trailer["monitor"]
        return decoded

    return transport, session


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(error=st.fixed_dictionaries({"type": any_text, "message": any_text}), value=any_value,
       attempts=st.lists(any_text, max_size=5), compiled=st.lists(any_text, max_size=3),
       used=st.lists(any_text, max_size=3), total=st.integers(-2**40, 2**40), name=any_text.filter(bool))
def test_whatever_a_worker_sends_the_result_is_written_and_reads_back(tmp_path, error, value, attempts, compiled,
                                                                      used, total, name):
    answer = {"error": error} if error["type"] else {"value": value}
    transport, session = worker_saying(answer, attempts, compiled, used, total)
    parts = scoring.grade(ASSIGNMENT, Submission(transport))
    problems = [f"cell 1 raised {error['type']}: {error['message']}", *session.attempts]
    data = report.result(ASSIGNMENT, report.safe_text(name, name=True), "", "cell_errors", parts, problems, 0.0,
                         "none")
    data["extra_data"]["instructor_notes"] = [finding.what for finding in session.findings]
    report.save(tmp_path, data)
    written = json.loads((tmp_path / f"{data['extra_data']['student_id']}.json").read_text(encoding="utf-8"))
    assert 0 <= written["score"] <= sum(max_scores(ASSIGNMENT).values())
    assert (tmp_path / "feedback" / f"{data['extra_data']['student_id']}.md").read_text(encoding="utf-8")
