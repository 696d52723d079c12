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


def test_the_hidden_suites_and_the_trusted_modules_are_not_bound():
    sources = bound_sources(command())
    assert not [s for s in sources if s.startswith(str(PACKAGE / "suites"))]
    assert sorted(s for s in sources if s.startswith(str(PACKAGE))) == sorted(
        [str(PACKAGE / "__init__.py"), str(PACKAGE / "wire.py"), str(PACKAGE / "sandboxed")])


def test_the_network_and_process_tree_are_unshared():
    args = command()
    assert {"--unshare-net", "--unshare-pid", "--die-with-parent"} <= set(args)
