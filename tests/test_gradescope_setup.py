"""Gradescope's setup.sh fails loudly: a step that fails stops the build and says which step it was.

The script of a real zip is run in a folder laid out like Gradescope's container
(``AUTOGRADER_ROOT``), with stand-ins for ``apt-get`` and ``python3`` first on the ``PATH``: each
does nothing and succeeds, except the one step a test makes fail, the way a missing package, a
network outage or the wrong base image make it fail on Gradescope. Nothing is installed.
"""

import subprocess
import zipfile

import pytest

from tests.grading import run_grader

# The stand-ins read FAIL (a word of the command line that makes them fail) and PYTHON_VERSION.
APT_GET = """#!/bin/sh
case " $* " in *" $FAIL "*) echo "E: stand-in apt-get failed: $*" >&2; exit 100;; esac
"""
PYTHON3 = """#!/bin/sh
if [ "$1" = "-V" ]; then echo "Python $PYTHON_VERSION"; exit 0; fi
if [ "$1" = "-c" ]; then  # the version check: succeed for 3.11 and later
    case "$PYTHON_VERSION" in 3.1[1-9]*|3.[2-9][0-9]*) exit 0;; *) exit 1;; esac
fi
if [ "$1 $2" = "-m venv" ]; then
    mkdir -p "$3/bin"
    printf '#!/bin/sh\\ncase " $* " in *" $FAIL "*) echo "ERROR: stand-in pip failed" >&2; exit 1;; esac\\n' > "$3/bin/pip"
    chmod +x "$3/bin/pip"
    case " $* " in *" $FAIL "*) exit 1;; esac
fi
"""


@pytest.fixture(scope="module")
def setup_script(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gradescope_setup")
    done = run_grader("gradescope", "ex2_layernorm", "-o", folder / "ex2.zip")
    assert done.returncode == 0, done.stderr
    script = folder / "setup.sh"
    script.write_bytes(zipfile.ZipFile(folder / "ex2.zip").read("setup.sh"))
    return script


@pytest.fixture
def run_setup(setup_script, tmp_path):
    """run_setup(fail=WORD, python=VERSION): setup.sh with stand-ins on the PATH; the completed process."""
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    for name, text in (("apt-get", APT_GET), ("python3", PYTHON3)):
        (bin_folder / name).write_text(text)
        (bin_folder / name).chmod(0o755)
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)

    def run(fail="(nothing)", python="3.12.3"):
        env = {"PATH": f"{bin_folder}:/usr/bin:/bin", "AUTOGRADER_ROOT": str(root), "FAIL": fail,
               "PYTHON_VERSION": python}
        return subprocess.run(["bash", str(setup_script)], env=env, capture_output=True, text=True, timeout=60)

    return run


def test_setup_succeeds_when_every_step_does(run_setup):
    done = run_setup()
    assert done.returncode == 0, done.stderr
    assert "FAILED" not in done.stdout + done.stderr


@pytest.mark.parametrize("fail, named", [
    ("update", "apt-get update"),
    ("bubblewrap", "apt-get install bubblewrap python3-pip python3-venv"),
    ("venv", "python3 -m venv"),
    ("torch==2.13.0", "pip install torch==2.13.0"),
    ("requirements.txt", "pip install -r requirements.txt"),
])
def test_a_failing_step_stops_setup_with_its_exit_status_and_names_the_step(run_setup, fail, named):
    done = run_setup(fail=fail)
    assert done.returncode != 0
    (failed,) = [line for line in done.stderr.splitlines() if line.startswith("setup.sh: FAILED")]
    assert named in failed


def test_a_python_older_than_3_11_stops_setup_and_names_the_base_image_to_choose(run_setup):
    done = run_setup(python="3.10.12")
    assert done.returncode != 0
    assert "Python 3.10.12 is too old" in done.stderr and "Ubuntu 24.04" in done.stderr
    assert "setup.sh: python3 -m venv" not in done.stdout  # nothing after the check ran
