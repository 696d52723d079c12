"""A built site served on 127.0.0.1, and Debian's Chromium started to read it with no way off this machine.

Shared by the PDF printer (``tools/book_pdf.py``), the page-weight benchmark
(``benchmarks/page_weight.py``) and the browser tests (``tests/test_browser.py``), so that all three
start the browser the same way and refuse the same requests.
"""

import functools
import gzip
import io
import threading
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

CHROMIUM = "/usr/bin/chromium"  # Debian's; never a downloaded browser
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    # without these Chromium keeps calling home, and the network here is closed
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
COMPRESSED = {".html", ".js", ".css", ".svg", ".json"}  # what GitHub Pages gzips (images and fonts are already compressed)


@functools.cache
def gzipped(file: Path, modified: float) -> bytes:  # ``modified`` in the key: a rebuilt file is compressed again
    return gzip.compress(file.read_bytes(), 6, mtime=0)


class QuietHandler(SimpleHTTPRequestHandler):
    """Serves the files as they are, without a log line per request."""

    def log_message(self, *args):
        pass


class GzipHandler(QuietHandler):
    """Serves files as a static host such as GitHub Pages does: text gzipped for a browser that accepts it."""

    def send_head(self):
        file = Path(self.translate_path(self.path))
        if file.is_dir():
            if not urlsplit(self.path).path.endswith("/"):
                return super().send_head()  # its redirect to the folder's address
            file = file / "index.html"
        if "gzip" not in self.headers.get("Accept-Encoding", "") or file.suffix not in COMPRESSED \
                or not file.is_file():
            return super().send_head()
        body = gzipped(file, file.stat().st_mtime)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(file)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


@contextmanager
def served(site: Path, handler: type[SimpleHTTPRequestHandler] = QuietHandler):
    """Base URL of ``site`` served on 127.0.0.1 at a free port while the block runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


def only_localhost(refused: list[str] | None = None):
    """A Playwright route handler that lets requests to this machine through and refuses the rest,
    adding their addresses to ``refused``: the book needs nothing from elsewhere."""

    def route_to(route):
        url = urlsplit(route.request.url)
        if url.scheme in ("data", "blob") or url.hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            if refused is not None:
                refused.append(route.request.url)
            route.abort()

    return route_to


def built_pages(site: Path) -> list[str]:
    """Every page of a built site that a reader can land on, both editions, as sorted paths relative to
    ``site``: not the theme's folders (``_static/``), not a redirecting page (the root's index.html)."""
    pages = []
    for path in sorted(site.rglob("*.html")):
        relative = path.relative_to(site)
        if any(part.startswith("_") for part in relative.parts):
            continue
        if 'http-equiv="Refresh"' not in path.read_text(encoding="utf-8")[:300]:
            pages.append(relative.as_posix())
    return pages
