"""The screenshots of the instructor's guide (teaching.md): taken by the browser tests, committed as WebP.

A browser test saves a screenshot with ``take(page, NAME)`` (a PNG in ``tests/artifacts/teaching/``,
760 x 800 CSS pixels, light mode); this tool re-encodes each one as lossless WebP, with the settings
the book uses for its figures (``_ext/offline_assets.py``), into ``figures/teaching/NAME.webp``, the
copy that both editions of the guide show. Adding a screenshot is one call of ``take`` in a test
and one ``{figure}`` in each edition of the guide.

    python -m pytest tests/test_instructor_week.py    # takes the screenshots (a few minutes)
    python -m tools.guide_screenshots                # refreshes the committed copies from them
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAKEN = ROOT / "tests" / "artifacts" / "teaching"  # git-ignored: what the last test run took
COMMITTED = ROOT / "figures" / "teaching"  # what the guide shows (zh/figures is a link to figures/)
# 760 CSS pixels wide: the book's text column is about 700 px, so a wider screenshot would be shrunk
# until its text is hard to read, and on a 390 px phone it must keep 0.45 of its width
# (tests/test_phone_layout.py's MIN_FIGURE_SCALE): 358 of 760 px does, 358 of 1280 would not.
VIEWPORT = {"width": 760, "height": 800}
COLOR_SCHEME = "light"
WEBP = {"lossless": True, "exact": True, "method": 4, "quality": 80}  # as _ext/offline_assets.py's WEBP


def take(page, name: str) -> Path:
    """Save what ``page`` shows (its viewport) as ``TAKEN/name.png``; the context sets VIEWPORT and COLOR_SCHEME."""
    TAKEN.mkdir(parents=True, exist_ok=True)
    path = TAKEN / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def refresh(taken: Path = TAKEN, committed: Path = COMMITTED) -> list[Path]:
    """Every screenshot in ``taken`` as lossless WebP in ``committed``; returns what was written."""
    from PIL import Image

    committed.mkdir(parents=True, exist_ok=True)
    written = []
    for png in sorted(taken.glob("*.png")):
        webp = committed / f"{png.stem}.webp"
        with Image.open(png) as image:
            image.save(webp, "WEBP", **WEBP)
        written.append(webp)
    return written


def main(argv: list[str]) -> int:
    if argv:
        print(__doc__)
        return 2
    written = refresh()
    if not written:
        print(f"No screenshot in {TAKEN.relative_to(ROOT)}: run `python -m pytest tests/test_instructor_week.py` "
              "first; it takes them.")
        return 1
    for path in written:
        print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size / 1024:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
