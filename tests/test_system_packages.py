"""tools/install_system_packages.sh installs chromium, bubblewrap, a CJK font and unzip when, and only when, they are missing.

The script runs against stand-in commands on a PATH of their own: a fake apt-get that
records its arguments, a fake id that says who runs it, and a fake dpkg-query that knows
whether the font package is installed.
"""

import subprocess

import pytest
from tests.conftest import REPO

SCRIPT = REPO / "tools" / "install_system_packages.sh"


@pytest.fixture
def fake_system(tmp_path):
    """make(installed=(), uid=0, sudo=False, env=None) -> run(): the script's result and the apt-get calls it made."""
    bin_dir, log = tmp_path / "bin", tmp_path / "apt-get.log"
    bin_dir.mkdir()

    def tool(name, body):
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)

    def make(installed=(), uid=0, sudo=False, env=None):
        tool("apt-get", f'echo "$*" >> {log}')
        tool("id", f"echo {uid}")
        if sudo:  # records what it was asked to run, as one line
            tool("sudo", f'echo "sudo $*" >> {log}')
        for name in installed:
            if name == "fonts-noto-cjk":
                tool("dpkg-query", 'echo "install ok installed"')
            else:
                tool(name, "exit 0")

        def run():
            result = subprocess.run(["/bin/bash", str(SCRIPT)], env={"PATH": str(bin_dir), **(env or {})},
                                    capture_output=True, text=True)
            calls = log.read_text().splitlines() if log.exists() else []
            return result, calls

        return run

    return make


def test_installs_every_package_when_all_are_missing(fake_system):
    result, calls = fake_system()()
    assert result.returncode == 0, result.stderr
    assert calls == ["update -q", "install -y -q --no-install-recommends chromium bubblewrap fonts-noto-cjk unzip"]


def test_installs_only_the_missing_package(fake_system):
    result, calls = fake_system(installed=["bwrap", "fonts-noto-cjk", "unzip"])()
    assert result.returncode == 0, result.stderr
    assert calls[-1] == "install -y -q --no-install-recommends chromium"


def test_installs_the_cjk_font_when_only_it_is_missing(fake_system):
    result, calls = fake_system(installed=["chromium", "bwrap", "unzip"])()
    assert result.returncode == 0, result.stderr
    assert calls[-1] == "install -y -q --no-install-recommends fonts-noto-cjk"


def test_does_nothing_when_everything_is_installed(fake_system):
    result, calls = fake_system(installed=["chromium", "bwrap", "fonts-noto-cjk", "unzip"])()
    assert result.returncode == 0
    assert calls == []


def test_a_user_with_sudo_rights_installs_through_sudo(fake_system):
    result, calls = fake_system(uid=1000, sudo=True)()
    assert result.returncode == 0, result.stderr
    assert calls == ["sudo DEBIAN_FRONTEND=noninteractive apt-get update -q",
                     "sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
                     "chromium bubblewrap fonts-noto-cjk unzip"]


def test_without_root_or_sudo_it_names_what_is_skipped_and_lets_the_book_and_the_suite_run(fake_system):
    result, calls = fake_system(uid=1000)()
    assert result.returncode == 0
    assert "is skipped (the book's PDFs, and the tests pytest names)" in result.stderr and "apt-get install chromium bubblewrap fonts-noto-cjk unzip" in result.stderr
    assert calls == []


@pytest.mark.parametrize("ci", ["true", "1"])
def test_without_root_or_sudo_in_ci_it_fails_because_ci_skips_nothing(fake_system, ci):
    result, calls = fake_system(uid=1000, env={"CI": ci})()
    assert result.returncode == 1
    assert "CI skips no test" in result.stderr
    assert calls == []


def test_ci_false_counts_as_not_ci(fake_system):
    result, _ = fake_system(uid=1000, env={"CI": "false"})()
    assert result.returncode == 0
