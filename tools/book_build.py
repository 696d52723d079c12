"""Run a strict Jupyter Book build and read what it reports.

Shared by the tests (which need one clean build) and the build benchmark.
"""

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
STRICT_FLAGS = ("-W", "-n", "--keep-going")
EXECUTED = re.compile(r"^(?P<path>\S+): Executed notebook in (?P<seconds>[0-9.]+) seconds", re.M)


@dataclass
class BookBuild:
    returncode: int
    log: str
    seconds: float
    output: Path  # the folder that holds _build/

    @property
    def html(self) -> Path:
        return self.output / "_build" / "html"

    @property
    def executed(self) -> Path:
        return self.output / "_build" / "jupyter_execute"

    def execution_seconds(self) -> dict[str, float]:
        """Seconds each notebook took to execute in this build (cached ones are absent)."""
        return {Path(m["path"]).stem: float(m["seconds"]) for m in EXECUTED.finditer(self.log)}


def build_book(source: Path = ROOT, output: Path | None = None) -> BookBuild:
    """Build ``source`` strictly (-W -n --keep-going) into ``output``/_build."""
    output = output or source
    start = time.perf_counter()
    proc = subprocess.run(
        [str(JUPYTER_BOOK), "build", str(source), "--path-output", str(output), *STRICT_FLAGS],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    return BookBuild(proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - start, output)
