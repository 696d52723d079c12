"""Grade an exercise's reference, blank release and catalogue entries in-process (developer aid).

    python -m tools.try_suite ex2_layernorm            # reference, blank, every catalogue entry
    python -m tools.try_suite ex2_layernorm -v         # also each failing test's message
"""

import argparse
import time

from tests.catalogue import catalogue, variants
from tests.grading import blank, grade_in_process, max_scores, reference, with_cell


def show(label, assignment, notebook, verbose):
    start = time.perf_counter()
    scores = grade_in_process(assignment, notebook)
    print(f"{label:40s} {time.perf_counter() - start:5.2f}s " + "  ".join(f"{s.name}={s.score:g}/{s.max_score:g}" for s in scores))
    if verbose:
        for s in scores:
            for o in s.outcomes:
                if not o.passed:
                    print(f"    {s.name}.{o.name}: {o.status}: {o.message}")
    return {s.name: s.score for s in scores}


def main():
    import torch

    torch.set_num_threads(1)
    parser = argparse.ArgumentParser()
    parser.add_argument("assignment")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    full = max_scores(args.assignment)
    show("reference", args.assignment, reference(args.assignment), args.verbose)
    show("blank release", args.assignment, blank(args.assignment), args.verbose)
    for right in variants():
        if right.assignment == args.assignment:
            got = show("RIGHT " + right.what, args.assignment,
                       with_cell(right.assignment, right.cell, right.source), args.verbose)
            print("    " + ("ok" if got == full else "PROBLEM: a correct variant lost points"))
    for wrong in catalogue():
        if wrong.assignment == args.assignment:
            got = show(wrong.what, args.assignment, with_cell(wrong.assignment, wrong.cell, wrong.source),
                       args.verbose)
            ok = got.get(wrong.loses, 0) < full.get(wrong.loses, 0) and all(
                got[p] == full[p] for p in full if p != wrong.loses)
            print("    " + ("ok" if ok else f"PROBLEM: expected a loss on {wrong.loses} only"))


if __name__ == "__main__":
    main()
