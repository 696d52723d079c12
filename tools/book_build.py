"""Build the book's two editions strictly and read what the builds report.

The English edition is ``jupyter-book build`` of the top folder. The Chinese one (``zh/``) is built
after it with the same Sphinx entry point, reading the English build's execution cache: its code
cells are the English ones byte for byte (``tools/editions.py``), so every notebook is a cache hit
and nothing runs twice. It is built in ``_build/zh/`` and copied to ``_build/html/zh/``, so both
editions can be hosted side by side. In that copy the Chinese pages use the English site's
``_static/`` for every file that is the same in both (almost all of them): a reader who switches
edition downloads none of them again, and ``zh/_static/`` holds only the files that differ.

    python -m tools.book_build        # both editions, strictly, into _build/html and _build/html/zh,
                                      # then each edition's PDF (tools/book_pdf.py)

Shared by the tests (which need one clean build) and the build benchmark.
"""

import filecmp
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
STRICT_FLAGS = ("-W", "-n", "--keep-going")
# The chapters' numbers must not depend on the machine that builds them. PyTorch's CPU kernels and MKL's
# matrix products pick their instructions by processor (AVX-512 or AVX2, Intel or AMD), and training runs
# amplify the last-bit differences: one CI machine gave 0.377 where ours give 0.303. These pin both to their
# AVX2 code, which every x86-64 machine of the last ten years runs the same way, and one thread.
NUMERICS = {"PYTHONHASHSEED": "0", "ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT",
            "ONEDNN_MAX_CPU_ISA": "AVX2", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
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


def build_book(source: Path = ROOT, output: Path | None = None, show=None) -> BookBuild:
    """Build ``source`` strictly (-W -n --keep-going) into ``output``/_build.

    ``show(line)``, when given, sees each line of the build's output as it comes (``Progress``).
    """
    output = output or source
    start = time.perf_counter()
    returncode, log = _run([str(JUPYTER_BOOK), "build", str(source), "--path-output", str(output), *STRICT_FLAGS],
                           show)
    return BookBuild(returncode, log, time.perf_counter() - start, output)


def _run(command: list[str], show=None, cwd: Path | None = None) -> tuple[int, str]:
    """Run ``command`` with the pinned numerics; its exit status and everything it printed."""
    env = {**os.environ, **NUMERICS}
    if show is None:
        proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
        return proc.returncode, proc.stdout + proc.stderr
    lines = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd,
                          errors="replace") as proc:
        for line in proc.stdout:
            lines.append(line)
            show(line)
    return proc.returncode, "".join(lines)


# ipykernel warns, for every kernel a build starts, that it "is running over TCP without encryption ...
# susceptible to eavesdropping". The kernels listen on 127.0.0.1 only and every message is signed with a key
# that only this build holds: nothing is wrong, and a newcomer reading it would think something is.
KERNEL_TRANSPORT = "Kernel is running over TCP without encryption"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
STARTED = re.compile(r"^(?P<path>\S+): Executing notebook using")
WORTH_SHOWING = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b|Traceback|Exception occurred")


class Progress:
    """What a newcomer sees while an edition builds: a line per chapter as it runs (its name, then its
    seconds), and every warning or error as it comes; Sphinx's other chatter stays in the log."""

    def __init__(self, root: Path = ROOT, out=None):
        self.root, self.out = root, out or sys.stdout
        self.running: str | None = None  # the chapter whose line is open
        self.chapters = 0

    def name(self, path: str) -> str:
        chapter = Path(path.split(":", 1)[0])
        try:
            return chapter.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return chapter.name

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def __call__(self, line: str) -> None:
        text = ANSI.sub("", line).rstrip()
        if not text or KERNEL_TRANSPORT in text:
            return
        if started := STARTED.match(text):
            self.close()
            self.running = self.name(started["path"])
            self.chapters += 1
            self.write(f"  running {self.running} ...")
        elif finished := EXECUTED.match(text):
            name = self.name(finished["path"])
            seconds = f"{float(finished['seconds']):.0f} s"
            if self.running == name:
                self.write(f" {seconds}\n")
            else:
                self.close()
                self.write(f"  {name}: {seconds}\n")
            self.running = None
        elif WORTH_SHOWING.search(text):
            self.close()
            self.write(f"  {text}\n")

    def close(self) -> None:
        """End the open chapter line, so that what follows starts a line of its own."""
        if self.running is not None:
            self.write("\n")
            self.running = None


def build_chinese(source: Path = ROOT, output: Path | None = None, show=None) -> BookBuild:
    """Build ``source``/zh strictly into ``output``/_build/zh, then copy it to ``output``/_build/html/zh.

    Reads the execution cache of the English build into the same ``output``, so build English first.
    """
    output = output or source
    start = time.perf_counter()
    returncode, log = _run(
        [sys.executable, "-m", "tools.book_build", "--chinese-only", str(source.resolve()), str(output.resolve())],
        show,
        cwd=Path(__file__).resolve().parent.parent,  # where `tools` is a package: this tool's own repository
    )
    build = BookBuild(returncode, log, time.perf_counter() - start, output / "_build" / "zh")
    site = output / "_build" / "html" / "zh"
    if returncode == 0:
        shutil.rmtree(site, ignore_errors=True)
        shutil.copytree(build.output / "html", site)
        share_static(site.parent, site)
    return build


STATIC_REFERENCE = re.compile(r"""(?P<attribute>\b(?:src|href)=["'])(?P<path>(?:\.\./)*_static/[^"'?#]+)""")
CSS_REFERENCE = re.compile(r"""(?P<attribute>\burl\(["']?)(?P<path>(?!data:|[a-z]+://|/)[^"')?#]+)""")


def share_static(main_site: Path, edition: Path) -> list[str]:
    """Point ``edition``'s pages at ``main_site``/_static for every file the two hold byte for byte.

    ``edition`` is a built site inside ``main_site`` (the Chinese one in ``zh/``). Its identical
    files are deleted from ``edition``/_static and every ``src``/``href`` of its HTML pages, and
    every ``url()`` of the stylesheets it keeps, that led to one leads to the main site's copy, at
    the right depth; the files that differ stay. Returns the shared files, as paths inside ``_static``.
    """
    own, main = (edition / "_static").resolve(), (main_site / "_static").resolve()
    shared = {path.relative_to(own).as_posix() for path in own.rglob("*")
              if path.is_file() and (main / path.relative_to(own)).is_file()
              and filecmp.cmp(path, main / path.relative_to(own), shallow=False)}

    def to_main(page: Path):  # for a page or a stylesheet of the edition
        def rewrite(match):
            target = (page.parent / match["path"]).resolve()
            if target.is_relative_to(own) and target.relative_to(own).as_posix() in shared:
                return match["attribute"] + os.path.relpath(main / target.relative_to(own), page.parent)
            return match[0]
        return rewrite

    for page in edition.resolve().rglob("*.html"):
        if own not in page.parents:
            text = page.read_text(encoding="utf-8")
            page.write_text(STATIC_REFERENCE.sub(to_main(page), text), encoding="utf-8")
    for stylesheet in own.rglob("*.css"):  # one that differs may name files that are shared (fonts, images)
        if stylesheet.relative_to(own).as_posix() not in shared:
            text = stylesheet.read_text(encoding="utf-8")
            stylesheet.write_text(CSS_REFERENCE.sub(to_main(stylesheet), text), encoding="utf-8")
    for name in shared:
        (own / name).unlink()
    for folder in sorted((p for p in own.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    return sorted(shared)


def _run_chinese_build(source: Path, output: Path) -> int:
    """The Chinese build itself, in its own process (Sphinx keeps global state)."""
    from jupyter_book.sphinx import build_sphinx

    from tools import editions

    drifted = editions.drifted_code(source)
    if drifted:
        print("The Chinese edition's code differs from the English edition's, so it would run the chapters a "
              "second time and could show other numbers:\n  " + "\n  ".join(drifted) +
              "\nRun `python -m tools.editions sync-code` to copy the English code cells into the Chinese pages.")
        return 1
    zh = source / "zh"
    built = output / "_build" / "zh"
    overrides = {
        "external_toc_path": str(zh / "_toc.yml"),
        "nitpicky": True,
        "latex_individualpages": False,
        "nb_execution_cache_path": str(output / "_build" / ".jupyter_cache"),
        "bilingual_twin_doctrees": str(output / "_build" / ".doctrees"),  # sections take their English twins' ids
    }
    return build_sphinx(
        zh,
        built / "html",
        noconfig=True,
        path_config=str(zh / "_config.yml"),
        confoverrides=overrides,
        doctreedir=built / ".doctrees",
        warningiserror=True,
        keep_going=True,
    )


def build_editions(source: Path = ROOT, output: Path | None = None) -> tuple[BookBuild, BookBuild | None]:
    """Both editions, English first; the Chinese one is skipped (None) when the English one fails."""
    english = build_book(source, output)
    return english, (build_chinese(source, output) if english.returncode == 0 else None)


LOGS = ROOT / "_build" / "logs"  # each step's whole output, kept whether it succeeded or not


def report(name: str, build: BookBuild, site: Path, progress: Progress) -> bool:
    """Say how an edition's build went, keep its whole log, and show the end of it when it failed."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{name.lower()}.log"
    log.write_text(ANSI.sub("", build.log), encoding="utf-8")
    if build.returncode == 0:
        count = progress.chapters
        ran = f", {count} chapter{'' if count == 1 else 's'} run" if count else ""
        print(f"{name} edition built in {build.seconds:.0f} s{ran}: {site}/index.html", flush=True)
        return True
    lines = [line for line in ANSI.sub("", build.log).splitlines() if KERNEL_TRANSPORT not in line]
    print(f"{name} edition FAILED (exit status {build.returncode}) after {build.seconds:.0f} s. The end of its log:")
    print("\n".join("    " + line for line in lines[-30:]))
    print(f"The whole log: {log}", flush=True)
    return False


def main(argv: list[str]) -> int:
    if argv[:1] == ["--chinese-only"]:
        return _run_chinese_build(Path(argv[1]).resolve(), Path(argv[2]).resolve())
    print("Building the book: the English edition (it runs every chapter: about 4 minutes on two cores), the "
          "Chinese one (the same code, its results reused), then a PDF of each.", flush=True)
    progress = Progress()
    english = build_book(show=progress)
    progress.close()
    if not report("English", english, english.html, progress):
        print("The Chinese edition was not built: the English build failed first.")
        return 1
    progress = Progress()
    chinese = build_chinese(show=progress)
    progress.close()
    if not report("Chinese", chinese, ROOT / "_build" / "html" / "zh", progress):
        return 1
    from tools import book_pdf  # after the build: the tests' builds (build_editions) print no PDF

    return book_pdf.main([], after_build=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
