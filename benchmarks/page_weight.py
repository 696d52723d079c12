"""Bytes a reader's browser downloads for each page of both editions, on a cold cache.

    .venv/bin/python -m benchmarks.page_weight [SITE]     # SITE: a built site, default _build/html

Serves the built site (both editions, the Chinese one under ``zh/``) on 127.0.0.1 as GitHub Pages
serves it: HTML, JavaScript, CSS, SVG and JSON gzipped for a browser that accepts gzip, fonts and
images as they are. Opens every page in Debian's Chromium, each in a fresh browser context (an empty
cache), started as the browser tests start it. A page's weight is the bytes that crossed the wire
(Chromium's size of each response body as transferred, ``request.sizes()["responseBodySize"]``;
it equals the server's gzipped body, byte for byte) for every request the page makes until it has
loaded, MathJax has typeset it and every font it uses has arrived, so what scripts load later
(MathJax's components and fonts) counts. Prints a table of the bytes transferred per page by kind
(HTML, JS, CSS, fonts, images, other) with the files' own (uncompressed) bytes, writes
benchmarks/results/page_weight.json, and exits 1 if a chapter page transfers more than 1.5 MB
(1,500,000 bytes) or any request fails.
"""

import json
import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from playwright.sync_api import Browser, sync_playwright

from tools.book_build import ROOT
from tools.local_site import CHROMIUM_ARGS, GzipHandler, built_pages, only_localhost, served

CHAPTER_BUDGET = 1_500_000  # bytes transferred by a chapter page on a cold cache
KINDS = {"document": "HTML", "script": "JS", "stylesheet": "CSS", "font": "fonts", "image": "images"}
COLUMNS = ("HTML", "JS", "CSS", "fonts", "images", "other")
SETTLED = "async () => { await window.MathJax?.startup?.promise; await document.fonts.ready; }"
FETCHED = "performance.getEntriesByType('resource').map(e => e.name).filter(n => n.startsWith(location.origin))"


@dataclass
class Weight:
    """What one page downloaded (address, kind, bytes), and the requests that failed or left localhost."""

    path: str
    downloads: list[tuple[str, str, int, int]] = field(default_factory=list)  # bytes transferred, uncompressed
    failed: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)

    @property
    def by_kind(self) -> Counter:
        """Bytes transferred, by kind of file."""
        kinds = Counter()
        for _, kind, size, _ in self.downloads:
            kinds[kind] += size
        return kinds

    @property
    def total(self) -> int:
        """Bytes transferred: the response bodies as they crossed the wire, gzipped where the server gzipped them."""
        return sum(size for _, _, size, _ in self.downloads)

    @property
    def uncompressed(self) -> int:
        """Bytes of the files themselves, as the browser had them after decompressing."""
        return sum(size for _, _, _, size in self.downloads)

    @property
    def files(self) -> set[str]:
        """The file names it downloaded, without folder or query: {"startup.js", "searchindex.js", ...}."""
        return {urlsplit(url).path.rsplit("/", 1)[-1] for url, *_ in self.downloads}


def is_chapter(path: str) -> bool:
    return "/chapters/" in f"/{path}"


def weigh(browser: Browser, url: str, path: str, site: Path) -> Weight:
    """Open ``url`` (``path`` of ``site``, served by served()) in a fresh context (a cold cache) and add up
    what it downloads until it has settled: the bytes on the wire, and the size of each file in ``site``."""
    weight = Weight(path)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    finished, failed = [], []

    context.route("**/*", only_localhost(weight.outside))
    page = context.new_page()
    page.on("requestfinished", lambda request: finished.append(request))
    page.on("requestfailed", lambda request: failed.append(request))
    page.on("response", lambda response: response.status >= 400 and weight.failed.append(
        f"{response.url} (HTTP {response.status})"))
    page.goto(url, wait_until="load")
    page.evaluate(SETTLED)
    # What the page has fetched from this site: the last of those events may still be on their way.
    while set(page.evaluate(FETCHED)) - {request.url for request in finished + failed}:
        page.wait_for_event("requestfinished", timeout=10_000)
    weight.failed += [f"{request.url} ({request.failure})" for request in failed]
    for request in finished:
        if urlsplit(request.url).scheme in ("data", "blob"):
            continue
        file = site / unquote(urlsplit(request.url).path).lstrip("/")
        weight.downloads.append((request.url, KINDS.get(request.resource_type, "other"),
                                 request.sizes()["responseBodySize"],  # Chromium's count of the encoded body
                                 (file / "index.html" if file.is_dir() else file).stat().st_size))
    context.close()
    return weight


def table(weights: list[Weight]) -> str:
    kb = lambda n: f"{n / 1000:,.0f}"  # noqa: E731
    lines = ["kB transferred (text gzipped as GitHub Pages sends it), by kind; and the files' own kB",
             f"{'page':46} {'total kB':>9} " + " ".join(f"{c:>7}" for c in COLUMNS) + f" {'files kB':>9}"]
    for w in weights:
        lines.append(f"{w.path:46} {kb(w.total):>9} " + " ".join(f"{kb(w.by_kind[c]):>7}" for c in COLUMNS)
                     + f" {kb(w.uncompressed):>9}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    site = Path(argv[0]).resolve() if argv else ROOT / "_build" / "html"
    chromium = shutil.which("chromium")
    if chromium is None:
        print("Debian's chromium is not installed: sudo bash tools/install_system_packages.sh")
        return 1
    with served(site, GzipHandler) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        weights = [weigh(browser, base + path, path, site) for path in built_pages(site)]
        browser.close()
    print(table(weights))
    chapters = [w for w in weights if is_chapter(w.path)]
    heaviest = max(chapters, key=lambda w: w.total)
    print(f"\nchapter pages: {min(w.total for w in chapters) / 1e6:.2f}-{heaviest.total / 1e6:.2f} MB transferred "
          f"(budget {CHAPTER_BUDGET / 1e6:.1f} MB), heaviest {heaviest.path}; "
          f"{min(w.uncompressed for w in chapters) / 1e6:.2f}-{max(w.uncompressed for w in chapters) / 1e6:.2f} MB "
          "uncompressed")
    problems = [f"{w.path}: {what}" for w in weights
                for what in w.failed + [f"outside localhost: {url}" for url in w.outside]]
    print("\n".join(problems) or "no request failed or left localhost")
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / "page_weight.json").write_text(json.dumps(
        {w.path: {"total": w.total, **{c: w.by_kind[c] for c in COLUMNS}, "uncompressed": w.uncompressed}
         for w in weights}, indent=2) + "\n")
    return 0 if heaviest.total <= CHAPTER_BUDGET and not problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
