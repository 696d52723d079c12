"""Which of several notebooks in one student's folder counts (``several.ranked``): the policy's order.

The whole path (each notebook graded, the best one's result written, the others listed) is played with
real notebooks in ``test_lateness.py``; here is only the order, on results as the grader writes them.
"""

import pytest

from autograder import several

EX2 = "ex2_layernorm"


@pytest.mark.parametrize("notebooks, counted", [
    ({"blank.ipynb": 0, "mine.ipynb": 10}, "mine.ipynb"),  # the highest score
    ({f"{EX2}.ipynb": 3, "zzz.ipynb": 7}, "zzz.ipynb"),  # even over the one named after the assignment
    ({f"{EX2}.ipynb": 7, "zzz.ipynb": 7}, f"{EX2}.ipynb"),  # a tie: the one named after the assignment
    ({"a.ipynb": 7, "b.ipynb": 7, "c.ipynb": 2}, "b.ipynb"),  # a tie, neither named so: the later file name
])
def test_the_highest_score_counts_then_the_name_of_the_assignment_then_the_later_name(notebooks, counted):
    graded = [(name, {"score": score}) for name, score in notebooks.items()]
    assert several.ranked(EX2, graded)[0][0] == counted


def test_a_notebook_held_for_review_competes_with_what_its_tests_measured():
    """Held: 3 points counted so far, 4 more measured and waiting; a draft's 5 must not hide it from the review."""
    held = {"score": 3, "extra_data": {"parts": {"batch_norm": {"score": 0, "held": 4.0}, "BatchNorm1d": {"score": 3}}}}
    draft = {"score": 5, "extra_data": {"parts": {"batch_norm": {"score": 2}, "BatchNorm1d": {"score": 3}}}}
    assert several.ranked(EX2, [("draft.ipynb", draft), ("final.ipynb", held)])[0][0] == "final.ipynb"
