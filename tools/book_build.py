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


def build_book(source: Path = ROOT, output: Path | None = None) -> BookBuild:
    """Build ``source`` strictly (-W -n --keep-going) into ``output``/_build."""
    output = output or source
    start = time.perf_counter()
    proc = subprocess.run(
        [str(JUPYTER_BOOK), "build", str(source), "--path-output", str(output), *STRICT_FLAGS],
        capture_output=True,
        text=True,
        env={**os.environ, **NUMERICS},
    )
    return BookBuild(proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - start, output)


def build_chinese(source: Path = ROOT, output: Path | None = None) -> BookBuild:
    """Build ``source``/zh strictly into ``output``/_build/zh, then copy it to ``output``/_build/html/zh.

    Reads the execution cache of the English build into the same ``output``, so build English first.
    """
    output = output or source
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "tools.book_build", "--chinese-only", str(source.resolve()), str(output.resolve())],
        capture_output=True,
        text=True,
        env={**os.environ, **NUMERICS},
        cwd=Path(__file__).resolve().parent.parent,  # where `tools` is a package: this tool's own repository
    )
    build = BookBuild(proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - start, output / "_build" / "zh")
    site = output / "_build" / "html" / "zh"
    if proc.returncode == 0:
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


def main(argv: list[str]) -> int:
    if argv[:1] == ["--chinese-only"]:
        return _run_chinese_build(Path(argv[1]).resolve(), Path(argv[2]).resolve())
    print("Building the English edition, then the Chinese one (a few minutes on a clean checkout) ...", flush=True)
    english, chinese = build_editions()
    for name, build in (("English", english), ("Chinese", chinese)):
        if build is None:
            print(f"The {name} edition was not built: the English build failed first.")
            continue
        print(build.log if build.returncode else build.log[-1500:])
        where = build.html if name == "English" else ROOT / "_build" / "html" / "zh"
        verdict = f"built in {build.seconds:.0f} s: {where}/index.html" if build.returncode == 0 else f"FAILED (exit {build.returncode})"
        print(f"{name} edition {verdict}")
    if chinese is None or chinese.returncode != 0:
        return 1
    from tools import book_pdf  # after the build: the tests' builds (build_editions) print no PDF

    print("Printing the whole book to a PDF per edition (about a minute and a half) ...", flush=True)
    return book_pdf.main()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
