"""The monitor's seal: a patch to the monitor, its modes or its module that outlives a request shows.

The worker's loop calls ``unchanged()`` after every request; here it is called in this process, on a monitor
made for the test. The seal compares objects by identity, never by ``==``, which an object of the learner's
could answer as it likes.
"""

import pytest

from autograder.sandboxed import guard


class EqualToEverything:
    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


@pytest.fixture
def monitor():
    made = guard.Monitor()
    return made, made.seal()


def test_an_untouched_monitor_is_unchanged(monitor):
    _, unchanged = monitor
    assert unchanged()
    assert unchanged()


@pytest.mark.parametrize("target, name", [
    (guard.Monitor, "record"),
    (guard.Monitor, "saw_function"),
    (guard, "tag_of"),
    (guard, "BUILTINS"),
])
def test_replacing_a_function_or_table_shows(monitor, monkeypatch, target, name):
    _, unchanged = monitor
    monkeypatch.setattr(target, name, lambda *args, **kwargs: None)
    assert not unchanged()


def test_an_object_that_claims_equality_with_everything_does_not_pass_for_the_original(monitor, monkeypatch):
    _, unchanged = monitor
    monkeypatch.setattr(guard.Monitor, "record", EqualToEverything())
    assert not unchanged()


def test_a_mode_handler_replaced_on_its_class_shows(monitor, monkeypatch):
    made, unchanged = monitor
    monkeypatch.setattr(type(made.functions), "__torch_function__", lambda *args, **kwargs: None)
    assert not unchanged()


def test_an_attribute_added_to_the_monitor_or_a_cache_swapped_shows(monitor):
    made, unchanged = monitor
    made.functions_seen = {}
    assert not unchanged()


def test_a_fresh_used_set_is_no_change(monitor):
    """The loop replaces ``used`` every request: that alone is not tampering."""
    made, unchanged = monitor
    made.used = set()
    assert unchanged()


def test_a_patch_undone_before_the_check_is_not_seen(monitor, monkeypatch):
    """What the seal cannot see (the README says so): a patch made and undone inside one request."""
    _, unchanged = monitor
    original = guard.Monitor.record
    guard.Monitor.record = lambda *args: None
    guard.Monitor.record = original
    assert unchanged()
