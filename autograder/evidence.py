"""What is held for the instructor, and what is only reported: the verdict's rules, in one place.

Points follow evidence. A part loses its points only when the monitor recorded, during that
part's graded calls, a use of what the part forbids (``scoring.grade_part``). This module
decides the rest, from two kinds of record:

- what the worker saw at run time, per part (``PartScore.evidence``): a tensor subclass's
  own handler ran during a graded call (``subclass``: PyTorch runs it with the monitor's
  function mode switched off, so what it did is out of sight), or the monitor was not the one
  the zygote sealed (``PartScore.tampered``);
- what the scan found in the source (``scan.Finding``, with its cell and line), and which
  lines of which cells each part's graded calls ran (``PartScore.ran``, from the worker's
  code recorder).

A part is **held** (its measured score kept for the instructor to release) when its calls
were handled by a subclass, when it was graded with the monitor changed, or when its calls
ran a line holding a construct with no honest use in a part with that rule (``HELD``):
PyTorch's dispatch internals and other frames or objects of the interpreter in any part with
a rule; autograd's recorded graph in a part that forbids autograd. Code compiled from a
string at run time has no cell: its constructs count against every part with that rule.

Everything else the scan finds is **reported** to the instructor, the line quoted, and
costs nothing. A variable's name is never evidence: a finding counts only where the graded
call ran the line it is on.
"""

from __future__ import annotations

from dataclasses import dataclass

NORM_TAGS = frozenset({"layer_norm", "batch_norm", "instance_norm", "rms_norm", "group_norm"})

# scan group -> the rule under which it has no honest use: "any" (a part forbids something) or a tag.
HELD = {"torch": "any", "introspection": "any", "autograd": "autograd"}


@dataclass(frozen=True)
class Span:
    """Lines ``first``..``last`` of cell ``cell``: one code object a graded call ran."""

    cell: str
    first: int
    last: int


def spans(ran) -> list[Span]:
    """The worker's ``"cell:first:last"`` strings, read defensively (the worker is not trusted)."""
    found = []
    for item in ran:
        cell, _, rest = str(item).rpartition(":")
        cell, _, first = cell.rpartition(":")
        if cell and first.isdigit() and rest.isdigit():
            found.append(Span(cell, int(first), int(rest)))
    return found


def applies(finding, forbidden) -> bool:
    """Does ``finding`` name a construct with no honest use in a part that forbids ``forbidden``?"""
    rule = HELD.get(finding.group) if finding.kind == "tampering" else None
    return bool(forbidden) and rule is not None and (rule == "any" or rule in forbidden)


def may_hold(finding) -> bool:
    """Can ``finding`` hold a part under some rule? (Only then does the worker record the lines calls run.)"""
    return finding.kind == "tampering" and finding.group in HELD


def ran_line(finding, ran: list[Span]) -> bool:
    """Did the graded calls run the line ``finding`` is on? (Code compiled at run time has no cell: yes.)"""
    if finding.cell is None:
        return True
    return finding.line is not None and any(span.cell == finding.cell and span.first <= finding.line <= span.last
                                            for span in ran)


def hold_reasons(part, forbidden, findings) -> list[str]:
    """Why ``part`` (a ``scoring.PartScore``) is held for review, in the learner's words; [] when it is not."""
    if not forbidden:
        return []
    reasons = []
    if part.tampered:
        reasons.append("the grader's monitor of PyTorch calls was changed while this task was graded")
    if "subclass" in part.evidence:
        reasons.append("a tensor subclass's own __torch_function__ or __torch_dispatch__ handled a call of this task, "
                       "where the grader cannot see what it does")
    if "reference" in part.evidence:
        reasons.append("a call of this task reached the grader's own reference implementation (kept from the check "
                       "of a module that calls it)")
    ran = spans(part.ran)
    reasons += [f"{finding.what} ({quoted(finding)}), in code this task's calls ran" for finding in findings
                if applies(finding, forbidden) and ran_line(finding, ran)]
    return reasons


def quoted(finding) -> str:
    return f"`{finding.quote}`" if finding.quote else "code compiled at run time"


def reported(findings, held: list[str]) -> list[str]:
    """What the instructor reads about findings that cost nothing (the held ones are in ``held``)."""
    notes = []
    for finding in findings:
        text = f"{finding.what} ({quoted(finding)})"
        if not any(text in reason for reason in held):
            notes.append(text)
    return notes
