"""Bytes a reader's browser downloads for each page of both editions, on a cold cache.

    .venv/bin/python -m benchmarks.page_weight [SITE]     # SITE: a built site, default _build/html

Serves the built site (both editions, the Chinese one under ``zh/``) on 127.0.0.1 and opens every
page in Debian's Chromium, each in a fresh browser context (an empty cache), started as the browser
tests start it. A page's weight is the sum of the response bodies of every request it makes until
it has loaded, MathJax has typeset it and every font it uses has arrived, so what scripts load
later (MathJax's components and fonts) counts. Prints a table of the bytes per page by kind (HTML,
JS, CSS, fonts, images, other), with what the page would transfer from a host that gzips HTML,
JavaScript and CSS (as GitHub Pages does; the local server sends them as they are), writes
benchmarks/results/page_weight.json, and exits 1 if a chapter page weighs more than 1.5 MB
(1,500,000 bytes, uncompressed) or any request fails.
"""

import functools
import gzip
import json
import shutil
import sys
import threading
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from playwright.sync_api import Browser, sync_playwright

from tools.book_build import ROOT

CHAPTER_BUDGET = 1_500_000  # bytes transferred by a chapter page on a cold cache
KINDS = {"document": "HTML", "script": "JS", "stylesheet": "CSS", "font": "fonts", "image": "images"}
COLUMNS = ("HTML", "JS", "CSS", "fonts", "images", "other")
SETTLED = "async () => { await window.MathJax?.startup?.promise; await document.fonts.ready; }"
FETCHED = "performance.getEntriesByType('resource').map(e => e.name).filter(n => n.startsWith(location.origin))"
CHROMIUM_ARGS = [  # as tests/test_browser.py starts it
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@dataclass
class Weight:
    """What one page downloaded (address, kind, bytes), and the requests that failed or left localhost."""

    path: str
    downloads: list[tuple[str, str, int]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)

    @property
    def by_kind(self) -> Counter:
        kinds = Counter()
        for _, kind, size in self.downloads:
            kinds[kind] += size
        return kinds

    @property
    def total(self) -> int:
        return sum(size for _, _, size in self.downloads)

    @property
    def files(self) -> set[str]:
        """The file names it downloaded, without folder or query: {"startup.js", "searchindex.js", ...}."""
        return {urlsplit(url).path.rsplit("/", 1)[-1] for url, _, _ in self.downloads}


def pages(site: Path) -> list[str]:
    """Every page of both editions, as paths relative to the site (the redirecting index.html left out)."""
    found = []
    for root in (site, site / "zh"):
        for page in sorted([*root.glob("*.html"), *root.glob("chapters/*.html")]):
            if page.name != "index.html":
                found.append(page.relative_to(site).as_posix())
    return found


def is_chapter(path: str) -> bool:
    return "/chapters/" in f"/{path}"


def weigh(browser: Browser, url: str, path: str) -> Weight:
    """Open ``url`` in a fresh context (a cold cache) and add up what it downloads until the network is idle."""
    weight = Weight(path)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    finished, failed = [], []

    def only_localhost(route):
        where = urlsplit(route.request.url)
        if where.scheme in ("data", "blob") or where.hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            weight.outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_localhost)
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
        weight.downloads.append(
            (request.url, KINDS.get(request.resource_type, "other"), request.sizes()["responseBodySize"]))
    context.close()
    return weight


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def served(site: Path):
    """Base URL of ``site`` served on 127.0.0.1 at a free port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


COMPRESSED = (".html", ".js", ".css", ".svg", ".json")  # what a static host such as GitHub Pages gzips


@functools.cache
def gzipped_size(file: Path) -> int:
    data = file.read_bytes()
    return len(gzip.compress(data, 6)) if file.suffix in COMPRESSED else len(data)


def gzipped(weight: Weight, site: Path) -> int:
    """What the page would transfer from a host that gzips text (level 6); fonts and images as they are."""
    return sum(gzipped_size(site / unquote(urlsplit(url).path).lstrip("/")) for url, _, _ in weight.downloads)


def table(weights: list[Weight], site: Path) -> str:
    kb = lambda n: f"{n / 1000:,.0f}"  # noqa: E731
    lines = [f"{'page':46} {'total kB':>9} " + " ".join(f"{c:>7}" for c in COLUMNS) + f" {'gzip kB':>8}"]
    for w in weights:
        lines.append(f"{w.path:46} {kb(w.total):>9} " + " ".join(f"{kb(w.by_kind[c]):>7}" for c in COLUMNS)
                     + f" {kb(gzipped(w, site)):>8}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    site = Path(argv[0]).resolve() if argv else ROOT / "_build" / "html"
    chromium = shutil.which("chromium")
    if chromium is None:
        print("Debian's chromium is not installed: sudo bash tools/install_system_packages.sh")
        return 1
    with served(site) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        weights = [weigh(browser, base + path, path) for path in pages(site)]
        browser.close()
    print(table(weights, site))
    chapters = [w for w in weights if is_chapter(w.path)]
    heaviest = max(chapters, key=lambda w: w.total)
    print(f"\nchapter pages: {min(w.total for w in chapters) / 1e6:.2f}-{heaviest.total / 1e6:.2f} MB "
          f"(budget {CHAPTER_BUDGET / 1e6:.1f} MB); heaviest {heaviest.path}")
    problems = [f"{w.path}: {what}" for w in weights
                for what in w.failed + [f"outside localhost: {url}" for url in w.outside]]
    print("\n".join(problems) or "no request failed or left localhost")
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / "page_weight.json").write_text(json.dumps(
        {w.path: {"total": w.total, **{c: w.by_kind[c] for c in COLUMNS}, "gzip": gzipped(w, site)}
         for w in weights}, indent=2) + "\n")
    return 0 if heaviest.total <= CHAPTER_BUDGET and not problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
