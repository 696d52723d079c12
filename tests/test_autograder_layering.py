"""The autograder's folders and imports show its trust boundary, and keep showing it.

- ``autograder/sandboxed/`` is all that is bound into the sandbox; its modules import
  nothing of the package outside that folder.
- The trusted modules import from ``sandboxed/`` only the wire format and the fixtures
  (plain model definitions both sides build); ``kernel.py``, the nbgrader mode, where
  both sides share the student's kernel by nbgrader's design, is the one exception.
- The suites import only ``checks`` and their own package; scoring knows no transport.
- No module imports another that (directly or not) imports it back.
"""

import ast
from pathlib import Path

import pytest

from autograder.sandbox import PACKAGE

SHARED = {"autograder.sandboxed.wire", "autograder.sandboxed.fixtures"}
PACKAGES = {"autograder", "autograder.sandboxed", "autograder.suites"}  # docstrings only: importing them is naming a folder
# Which package modules each trusted module may import (beyond SHARED).
ALLOWED = {
    "autograder.checks": set(),
    "autograder.load": {"autograder.report", "autograder.scan"},
    "autograder.scan": set(),
    "autograder.scoring": {"autograder.checks"},
    "autograder.launch": {"autograder.sandboxed.seccomp"},
    "autograder.sandbox": {"autograder.checks", "autograder.launch"},
    "autograder.evidence": set(),
    "autograder.run": {"autograder.evidence", "autograder.report", "autograder.scan", "autograder.scoring",
                       "autograder.checks", "autograder.sandbox"},
    "autograder.report": set(),
    "autograder.gradebook": set(),
    "autograder.gradescope": {"autograder.load", "autograder.report", "autograder.run", "autograder.scoring",
                              "autograder.sandbox"},
    "autograder.cli": {"autograder.gradescope", "autograder.gradebook", "autograder.launch", "autograder.lms",
                       "autograder.load", "autograder.report", "autograder.run", "autograder.scoring",
                       "autograder.course", "autograder.lateness", "autograder.several",
                       "autograder.similarity", "autograder.handback"},
    "autograder.course": set(),
    "autograder.lateness": {"autograder.course", "autograder.lms", "autograder.report"},
    "autograder.several": {"autograder.load", "autograder.report"},
    "autograder.collect": {"autograder.course"},
    "autograder.similarity": {"autograder.load"},
    "autograder.handback": {"autograder.gradebook", "autograder.lms", "autograder.report"},
    "autograder.lms": {"autograder.gradebook", "autograder.report"},
    "autograder.__main__": {"autograder.cli"},
    "autograder": set(),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every autograder module the file imports, at any depth in the file (lazy imports count)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    known = {module_name(p) for p in PACKAGE.rglob("*.py")} - PACKAGES
    return {name for name in found if name in known}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return {module_name(path): imports_of(path) - {module_name(path)} for path in PACKAGE.rglob("*.py")}


def test_sandboxed_modules_import_nothing_outside_their_folder(graph):
    outside = {name: sorted(i for i in imported if not i.startswith("autograder.sandboxed"))
               for name, imported in graph.items() if name.startswith("autograder.sandboxed")}
    assert {name: found for name, found in outside.items() if found} == {}


def test_trusted_modules_import_only_the_wire_format_and_fixtures_from_the_sandbox(graph):
    reaching = {name: sorted(i for i in imported if i.startswith("autograder.sandboxed") and i not in SHARED)
                for name, imported in graph.items()
                if not name.startswith(("autograder.sandboxed", "autograder.suites")) and name != "autograder.kernel"}
    allowed = {"autograder.launch": ["autograder.sandboxed.seccomp"]}
    assert {name: found for name, found in reaching.items() if found} == allowed


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_trusted_module_imports_only_its_neighbours(graph, module):
    assert graph[module] - SHARED <= ALLOWED[module]


def test_every_trusted_module_is_placed_in_the_layering(graph):
    trusted = {name for name in graph if not name.startswith(("autograder.sandboxed", "autograder.suites"))}
    assert trusted - set(ALLOWED) == {"autograder.kernel"}


def test_suites_import_only_checks_and_their_own_package(graph):
    for name, imported in graph.items():
        if name.startswith("autograder.suites."):
            assignment = ".".join(name.split(".")[:3])
            assert all(i == "autograder.checks" or i in SHARED or i.startswith(assignment) for i in imported), name


def test_no_module_imports_itself_back(graph):
    def reaches(start: str, target: str, seen: set) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == target or (nxt not in seen and not seen.add(nxt) and reaches(nxt, target, seen)):
                return True
        return False

    assert [name for name in graph if reaches(name, name, set())] == []


def test_the_layering_check_sees_an_import_made_inside_a_function(tmp_path):
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from autograder.sandboxed import executor\n")
    assert "autograder.sandboxed.executor" in imports_of(lazy)


def test_the_command_line_starts_without_pytorch_so_the_zygotes_warm_up_while_it_imports():
    import subprocess
    import sys

    probe = "import sys, autograder.cli, autograder.launch; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert result.stdout.strip() == "False", result.stderr
