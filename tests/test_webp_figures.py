"""Figures as lossless WebP: every plot a page shows is a WebP file with exactly the pixels the notebook drew.

matplotlib's PNGs weigh about twice what lossless WebP does for the same pixels. When the HTML build
has finished, ``_ext/offline_assets.py`` re-encodes each PNG that a page shows (in both editions),
points the pages at the WebP file and deletes the PNG unless a page still names it.
"""

import base64
import hashlib
import json
import random

import pytest
from bs4 import BeautifulSoup, SoupStrainer
from PIL import Image

from offline_assets import to_webp  # _ext/ is on pytest's pythonpath (pyproject.toml)

EDITIONS = ["", "zh/"]
IMAGES = SoupStrainer("img")


def pixels(image_file) -> tuple[tuple[int, int], bytes]:
    with Image.open(image_file) as image:
        return image.size, image.convert("RGBA").tobytes()


@pytest.fixture
def noisy_png(tmp_path):
    """A small PNG of random colours and transparency, which lossy WebP cannot keep exactly."""
    rng = random.Random(23)
    png = tmp_path / "plot.png"
    Image.frombytes("RGBA", (40, 30), rng.randbytes(40 * 30 * 4)).save(png)
    return png


def test_converter_writes_a_webp_file_with_exactly_the_pixels_of_the_png(noisy_png):
    webp = to_webp(noisy_png)
    assert webp == noisy_png.with_suffix(".webp")
    with Image.open(webp) as image:
        assert image.format == "WEBP"
    assert pixels(webp) == pixels(noisy_png)


def shown_images(site, edition) -> dict[str, list[str]]:
    """page -> the src of every image it shows from _images/, for the edition's introduction and chapters."""
    root = site / edition
    pages = [root / "intro.html", *sorted((root / "chapters").glob("*.html"))]
    return {page.relative_to(site).as_posix(): [
        img["src"] for img in BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser", parse_only=IMAGES)
        if "_images/" in img.get("src", "")] for page in pages}


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_plot_a_page_shows_is_webp(book, edition):
    sources = [src for srcs in shown_images(book.html, edition).values() for src in srcs]
    assert [src for src in sources if not src.endswith((".webp", ".svg"))] == []
    assert len([src for src in sources if src.endswith(".webp")]) >= 40


def glued_pngs(book) -> dict[str, bytes]:
    """glue name -> the PNG the executed notebook drew, for every plot of every chapter."""
    found = {}
    for glue in sorted((book.executed / "chapters").glob("*.glue.json")):
        for name, output in json.loads(glue.read_text()).items():
            if "image/png" in output["data"]:
                found[name] = base64.b64decode(output["data"]["image/png"])
    return found


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_webp_figure_has_exactly_the_pixels_the_notebook_drew(book, edition, tmp_path):
    """Sphinx names a figure by the SHA-256 of the notebook's PNG; its WebP file keeps that name."""
    images = book.html / edition / "_images"
    pngs = glued_pngs(book)
    assert len(pngs) >= 40
    for name, png in pngs.items():
        (tmp_path / "drawn.png").write_bytes(png)
        webp = images / f"{hashlib.sha256(png).hexdigest()}.webp"
        assert webp.is_file(), f"{name}: no WebP file"
        assert pixels(webp) == pixels(tmp_path / "drawn.png"), f"{name}: pixels differ"


@pytest.mark.parametrize("edition", EDITIONS)
def test_site_ships_the_png_of_a_webp_figure_only_if_a_page_names_it(book, edition):
    site = book.html / edition
    pages = "".join(page.read_text(encoding="utf-8") for page in site.rglob("*.html"))
    kept = [webp.with_suffix(".png").name for webp in (site / "_images").glob("*.webp")
            if webp.with_suffix(".png").exists()]
    assert [name for name in kept if name not in pages] == []
