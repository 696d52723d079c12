"""The verdict's rules (autograder/evidence.py): what holds a part, what is only reported.

Fast: findings and part records are made by hand, as the scan and the worker would make them.
"""

import pytest

from autograder import evidence
from autograder.scan import Finding
from autograder.scoring import PartScore

BACKWARD_RULE = frozenset({"layer_norm", "autograd"})
FROM_SCRATCH = frozenset({"layer_norm"})


def finding(group: str, cell: str | None = "5", line: int | None = 3, kind: str = "tampering") -> Finding:
    return Finding(kind, line, f"cell {cell}, line {line}: something ({group})", group, cell, "x = y.grad_fn")


def part(ran=(), evidence_tags=(), tampered=False, score=5.0) -> PartScore:
    return PartScore("p", "Task 3", score, 5.0, [], tampered=tampered, evidence=frozenset(evidence_tags),
                     ran=tuple(ran))


@pytest.mark.parametrize("ran, held", [(["5:1:4"], True), (["5:4:9"], False), (["6:1:4"], False), ([], False)])
def test_a_construct_holds_a_part_only_where_its_calls_ran_that_line(ran, held):
    assert bool(evidence.hold_reasons(part(ran), BACKWARD_RULE, [finding("autograd")])) is held


@pytest.mark.parametrize("group, rule, held", [
    ("autograd", BACKWARD_RULE, True), ("autograd", FROM_SCRATCH, False),
    ("torch", FROM_SCRATCH, True), ("introspection", FROM_SCRATCH, True),
    ("processes", BACKWARD_RULE, False), ("native", BACKWARD_RULE, False), ("grader", BACKWARD_RULE, False),
    ("unpickling", BACKWARD_RULE, False), ("torch", frozenset(), False),
])
def test_only_constructs_with_no_honest_use_under_the_parts_rule_hold_it(group, rule, held):
    assert bool(evidence.hold_reasons(part(["5:1:9"]), rule, [finding(group)])) is held


@pytest.mark.parametrize("group", ["lookup", "code", "introspection"])
def test_a_review_finding_never_holds_a_part(group):
    assert evidence.hold_reasons(part(["5:1:9"]), BACKWARD_RULE, [finding(group, kind="review")]) == []


def test_code_compiled_at_run_time_counts_against_every_part_with_that_rule():
    assert evidence.hold_reasons(part([]), BACKWARD_RULE, [finding("autograd", cell=None, line=None)])


def test_a_subclass_handler_in_the_parts_calls_holds_it():
    assert "tensor subclass" in evidence.hold_reasons(part(evidence_tags={"subclass"}), FROM_SCRATCH, [])[0]


def test_a_changed_monitor_holds_the_part():
    assert "monitor" in evidence.hold_reasons(part(tampered=True), FROM_SCRATCH, [])[0]


def test_a_part_without_a_rule_is_never_held():
    assert evidence.hold_reasons(part(["5:1:9"], {"subclass"}, True), frozenset(), [finding("torch")]) == []


@pytest.mark.parametrize("ran", [["5:x:9"], ["5:9"], [":1:2"], ["5:1:-2"], [7], ["5:1:2:3:4"]])
def test_malformed_spans_from_the_worker_tie_nothing(ran):
    assert evidence.hold_reasons(part(ran), BACKWARD_RULE, [finding("autograd", cell="5", line=1)]) == []


def test_a_cell_label_with_colons_is_read_from_the_right():
    assert evidence.spans(["a:b:3:7"]) == [evidence.Span("a:b", 3, 7)]


def test_the_reason_quotes_the_line():
    assert "`x = y.grad_fn`" in evidence.hold_reasons(part(["5:1:4"]), BACKWARD_RULE, [finding("autograd")])[0]


def test_what_is_not_held_is_reported_and_what_is_held_is_not_reported_twice():
    held_one, other = finding("autograd"), finding("processes", line=8)
    reasons = evidence.hold_reasons(part(["5:1:4"]), BACKWARD_RULE, [held_one, other])
    assert evidence.reported([held_one, other], reasons) == [f"{other.what} (`x = y.grad_fn`)"]
