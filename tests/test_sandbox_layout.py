"""What the sandbox's bubblewrap command makes visible to a worker."""

import os
import sys

from autograder.sandbox import PACKAGE, bwrap_command


def command():
    return bwrap_command(os.path.realpath(sys.executable))


def bound_sources(args):
    return [args[i + 1] for i, arg in enumerate(args) if arg in ("--ro-bind", "--bind")]


def test_tmp_is_mounted_before_any_bind_so_binds_below_tmp_stay_visible():
    args = command()
    tmpfs = args.index("--tmpfs")
    assert args[tmpfs + 1] == "/tmp"
    assert all(i > tmpfs for i, arg in enumerate(args) if arg in ("--ro-bind", "--bind"))


def test_every_bind_is_read_only():
    assert "--bind" not in command()


def test_only_the_sandboxed_folder_of_the_package_is_bound():
    sources = bound_sources(command())
    assert [s for s in sources if s.startswith(str(PACKAGE))] == [str(PACKAGE / "sandboxed")]


def test_a_seccomp_program_is_passed_when_given():
    args = bwrap_command(os.path.realpath(sys.executable), seccomp_fd=9)
    assert args[args.index("--seccomp") + 1] == "9"


def test_the_network_and_process_tree_are_unshared():
    args = command()
    assert {"--unshare-net", "--unshare-pid", "--die-with-parent"} <= set(args)
