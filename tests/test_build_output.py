"""What `python -m tools.book_build` prints: a line per chapter as it runs, every warning, no false alarm, and
one line, never a traceback, when the browser that prints the PDFs is missing or cannot start.

The build's lines below are as jupyter-book and Sphinx print them (colours included); the browsers are stand-ins.
"""

import io
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tools import book_pdf
from tools.book_build import Progress

KERNEL_WARNING = ("[IPKernelApp] WARNING | Kernel is running over TCP without encryption. All communication "
                  "(including code and outputs) is sent in plain text and is susceptible to eavesdropping.\n")


def shown(lines: list[str]) -> str:
    out = io.StringIO()
    progress = Progress(root=REPO, out=out)
    for line in lines:
        progress(line)
    progress.close()
    return out.getvalue()


def test_each_chapter_gets_a_line_with_its_seconds():
    printed = shown([
        "\x1b[01mreading sources... \x1b[39;49;00m[ 10%] \x1b[35mchapters/01_residual_connections\x1b[39;49;00m\n",
        f"{REPO}/chapters/01_residual_connections.md: Executing notebook using local CWD [mystnb]\n",
        KERNEL_WARNING,
        f"{REPO}/chapters/01_residual_connections.md: Executed notebook in 23.41 seconds [mystnb]\n",
        f"{REPO}/chapters/02_layer_normalization.md: Executing notebook using local CWD [mystnb]\n",
        f"{REPO}/chapters/02_layer_normalization.md: Executed notebook in 40.02 seconds [mystnb]\n",
    ])
    assert printed == ("  running chapters/01_residual_connections.md ... 23 s\n"
                       "  running chapters/02_layer_normalization.md ... 40 s\n")


def test_the_kernels_transport_warning_and_sphinxs_chatter_are_not_shown():
    printed = shown([KERNEL_WARNING, "\x1b[01mcopying images... \x1b[39;49;00m[ 86%] figure.png\n",
                     "\x1b[01mbuild succeeded.\x1b[39;49;00m\n", "dumping search index in Chinese (code: zh)... done\n"])
    assert printed == ""


def test_a_warning_is_shown_as_it_comes_on_a_line_of_its_own():
    printed = shown([
        f"{REPO}/chapters/03_batchnorm_vs_layernorm.md: Executing notebook using local CWD [mystnb]\n",
        f"\x1b[91m{REPO}/chapters/03_batchnorm_vs_layernorm.md:12: WARNING: undefined label: 'nowhere'\x1b[39;49;00m\n",
        f"{REPO}/chapters/03_batchnorm_vs_layernorm.md: Executed notebook in 9.6 seconds [mystnb]\n",
    ])
    assert printed.splitlines() == [
        "  running chapters/03_batchnorm_vs_layernorm.md ...",
        f"  {REPO}/chapters/03_batchnorm_vs_layernorm.md:12: WARNING: undefined label: 'nowhere'",
        "  chapters/03_batchnorm_vs_layernorm.md: 10 s",
    ]


def test_a_failing_chapter_and_a_crash_are_shown():
    printed = shown([
        f"{REPO}/chapters/broken.md: WARNING: Executing notebook failed: CellExecutionError [mystnb.exec]\n",
        "Traceback (most recent call last):\n",
    ])
    assert "Executing notebook failed" in printed and "Traceback" in printed


@pytest.fixture
def site(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<!doctype html><title>built</title>")
    return tmp_path / "site"


@pytest.fixture
def broken_chromium(tmp_path):
    """A browser that cannot start, as a Chromium missing a library fails."""
    browser = tmp_path / "chromium"
    browser.write_text("#!/bin/sh\necho 'chromium: error while loading shared libraries: libnss3.so: cannot open "
                       "shared object file' >&2\nexit 127\n")
    browser.chmod(0o755)
    return browser


def print_pdfs(site, chromium) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.book_pdf", "--site", str(site), "--chromium", str(chromium)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def test_a_browser_that_cannot_start_is_one_line_naming_it_and_what_it_said(site, broken_chromium):
    done = print_pdfs(site, broken_chromium)
    assert done.returncode == 1
    output = (done.stdout + done.stderr).strip()
    assert len(output.splitlines()) == 1, output
    assert f"Chromium at {broken_chromium} could not start" in output
    assert "libnss3.so" in output and "exit status 127" in output
    assert "install_system_packages.sh" in output
    assert "Traceback" not in output


def test_a_missing_browser_is_one_line_saying_how_to_install_it(site, tmp_path):
    done = print_pdfs(site, tmp_path / "no-such-chromium")
    output = (done.stdout + done.stderr).strip()
    assert done.returncode == 1
    assert output.splitlines() == [output]
    assert "Chromium is not installed" in output and "install_system_packages.sh" in output


def test_after_a_build_a_missing_browser_leaves_the_editions_and_exit_status_0(site, tmp_path, capsys):
    assert book_pdf.main(["--site", str(site), "--chromium", str(tmp_path / "none")], after_build=True) == 0
    printed = capsys.readouterr().out
    assert "PDFs not printed" in printed and "Both editions are built" in printed
