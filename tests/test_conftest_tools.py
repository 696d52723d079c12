"""A missing system tool skips the tests that need it, with a one-line reason; in CI it fails them."""

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, in_ci, missing_tool


@pytest.mark.parametrize("value, expected", [("true", True), ("1", True), ("yes", True), ("", False),
                                             ("false", False), ("0", False), ("False", False)])
def test_ci_is_any_value_of_ci_but_an_empty_or_false_one(monkeypatch, value, expected):
    monkeypatch.setenv("CI", value)
    assert in_ci() is expected


def test_outside_ci_a_missing_tool_skips_with_one_line_saying_how_to_install_it(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        missing_tool("Chromium is not installed", "Debian's chromium package")
    reason = str(skipped.value)
    assert "\n" not in reason
    assert reason.startswith("Chromium is not installed: install with `sudo bash tools/install_system_packages.sh`")


def test_in_ci_a_missing_tool_fails_the_test_instead(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        missing_tool("bubblewrap is not installed", "Debian's bubblewrap package")
    assert "CI skips nothing" in str(failed.value)


PROBE = '''
import pytest
from tests.conftest import say


@pytest.fixture
def slow_step(request):
    say(request.config, "[probe] a line from inside a fixture")


def test_probe(slow_step):
    pass
'''


def test_a_progress_line_said_in_a_fixture_reaches_the_terminal_despite_capture(tmp_path):
    (tmp_path / "test_probe.py").write_text(PROBE)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(tmp_path / "test_probe.py")],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO / "_ext")})
    assert done.returncode == 0, done.stdout[-2000:]
    assert "\n[probe] a line from inside a fixture\n" in done.stdout
