"""``grade`` shows its progress on stderr with tqdm: a live bar on a terminal, plain lines in a log.

A class of empty notebooks is graded without a sandbox (each is ``invalid`` at once), so these
runs take a second or two and still go through ``run.grade_all``'s progress callback.
"""

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from tests.grading import REPO, run_grader, write_class

ASSIGNMENT = "ex2_layernorm"
CLASS_SIZE = 23
METER = re.compile(r"(\d+)/" + str(CLASS_SIZE) + r" \[")  # tqdm's "n/total [elapsed<remaining..." count


@pytest.fixture
def empty_class(tmp_path):
    return write_class(tmp_path / "class", {f"s{i:02d}": b"" for i in range(CLASS_SIZE)})


def test_a_log_gets_one_line_per_tenth_ending_at_n_of_n(empty_class, tmp_path):
    done = run_grader("grade", ASSIGNMENT, empty_class, "--results", tmp_path / "results")
    assert done.returncode == 0, done.stderr
    counts = [int(m.group(1)) for line in done.stderr.splitlines() if (m := METER.search(line))]
    assert counts[-1] == CLASS_SIZE
    assert len(counts) == 11 and counts == sorted(counts)  # the first submission, then every 10 %
    assert "\r" not in done.stderr


def test_quiet_shows_no_progress(empty_class, tmp_path):
    done = run_grader("grade", ASSIGNMENT, empty_class, "--results", tmp_path / "results", "--quiet")
    assert done.returncode == 0, done.stderr
    assert not METER.search(done.stderr)
    assert f"graded {CLASS_SIZE} submissions" in done.stdout  # the summary still ends the run


def test_a_terminal_gets_tqdms_live_bar_redrawn_in_place(empty_class, tmp_path):
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal 100 columns wide
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    grader = subprocess.Popen([sys.executable, "-m", "autograder", "grade", ASSIGNMENT, str(empty_class),
                               "--results", str(tmp_path / "results")], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=secondary)
    os.close(secondary)
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the terminal closed: the grader has exited
            break
        if not chunk:
            break
        seen += chunk
    os.close(primary)
    assert grader.wait(timeout=120) == 0
    text = seen.decode(errors="replace")
    assert "\r" in text and f"{CLASS_SIZE}/{CLASS_SIZE} [" in text
