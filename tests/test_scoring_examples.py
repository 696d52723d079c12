"""A suite's Hypothesis tests run the examples Hypothesis draws, drawn once per process."""

import pytest
from hypothesis import given, strategies as st

from autograder import scoring
from autograder.checks import SETTINGS


@pytest.fixture
def calls():
    return []


@pytest.fixture
def sample(calls):
    """A derandomized test, as the suites write them, that notes each example it is given."""

    @given(n=st.integers(0, 10_000), scale=st.sampled_from([0.1, 1.0, 30.0]))
    @SETTINGS
    def test_sample(sub, shape, n, scale):
        calls.append((shape, n, scale))
        assert scale < 30.0 or sub != "strict", "a large scale"

    return test_sample


def test_the_examples_are_the_ones_hypothesis_draws_in_its_order(sample, calls):
    sample(sub="lenient", shape=3)
    hypothesis_drew = list(calls)
    calls.clear()
    scoring.drawn_once(sample, [{"shape": 3}])(sub="lenient", shape=3)
    assert calls == hypothesis_drew and len(calls) == 12


def test_each_case_gets_every_example(sample, calls):
    run = scoring.drawn_once(sample, [{"shape": 3}, {"shape": 5}])
    run(sub="lenient", shape=5)
    assert [shape for shape, _, _ in calls] == [5] * 12


def test_the_run_stops_at_the_first_failing_example_without_running_it_again(sample, calls):
    run = scoring.drawn_once(sample, [{"shape": 3}])
    first_large = next(i for i, example in enumerate(run.examples) if example["scale"] == 30.0)
    with pytest.raises(AssertionError, match="a large scale"):
        run(sub="strict", shape=3)
    assert len(calls) == first_large + 1


def test_a_test_without_hypothesis_is_kept_as_it_is(calls):
    def test_plain(sub):
        calls.append(sub)

    assert scoring.drawn_once(test_plain, [{}]) is test_plain


def test_every_suite_test_written_with_hypothesis_runs_drawn_examples():
    drawn = [test for assignment in scoring.assignments() for part in scoring.collect(assignment)
             for test in part.tests if hasattr(test.func, "examples")]
    assert len(drawn) >= 12 and all(test.func.examples for test in drawn)
