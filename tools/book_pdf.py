"""The whole book as one PDF per edition, printed from the built site by Chromium: no LaTeX.

Each page of an edition's table of contents (``_toc.yml``, ``zh/_toc.yml``) is opened from a server on
127.0.0.1 in Debian's Chromium, started as the browser tests start it. Once MathJax has typeset the page
and its fonts are loaded, Chromium prints it with the book's print stylesheet (``_static/print.css``) on
A4, with a PDF outline of its headings. pypdf joins the pages in the order of the table of contents
behind a title page, numbers the pages in a footer, and turns the links between pages of the book into
links inside the PDF (other links to the site become relative, so they work where the site is hosted).

    python -m tools.book_pdf      # from the site in _build/html: _build/html/add-and-norm.pdf and
                                  # _build/html/zh/add-and-norm-zh.pdf

``python -m tools.book_build`` runs it after building both editions. Each page is printed on its own,
rather than Sphinx's single-page HTML builder printed once: the site is already built (a single-page
build would run Sphinx twice more), and each page prints with the scripts it has on the web (the
explorer draws its charts, MathJax its formulas).
"""

import argparse
import datetime
import html
import io
import posixpath
import re
import sys
import time
import traceback
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from pypdf import PdfReader, PdfWriter
from pypdf.generic import ArrayObject, DictionaryObject, Fit, NameObject, TextStringObject

from tools.local_site import CHROMIUM, CHROMIUM_ARGS, only_localhost, served

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
# Chromium prints a CSS pixel as 0.75 pt: at 0.85 the book's 16 px text is 10.2 pt, as a printed book's.
SCALE = 0.85
MARGIN = {"top": "16mm", "bottom": "18mm", "left": "15mm", "right": "15mm"}
# Chromium's footer template: its font size is its own, 0 unless set. The page number is filled in by
# Chromium on a sheet of numbered blank pages laid over the book's (see footers).
FOOTER = ('<div style="width:100%;font-size:8pt;text-align:center;color:#444;'
          'font-family:{font}"><span class="title"></span> · <span class="pageNumber"></span></div>')


@dataclass(frozen=True)
class Edition:
    language: str  # the html lang of the title page
    source: Path  # the edition's folder: _config.yml and _toc.yml
    folder: str  # where its pages are in the site: "" or "zh/"
    pdf: str  # where its PDF goes in the site
    printed: str  # the title page's line under the title; {date} is the day it is printed
    font: str  # the font family of the title page and the footer

    @property
    def config(self) -> dict:
        return yaml.safe_load((self.source / "_config.yml").read_text())

    @property
    def title(self) -> str:
        return self.config["title"]

    def pages(self) -> list[str]:
        """The edition's pages in the order of its table of contents, as paths in the site."""
        toc = yaml.safe_load((self.source / "_toc.yml").read_text())
        files = [toc["root"]] + [entry["file"] for part in toc.get("parts", []) for entry in part["chapters"]]
        return [f"{self.folder}{file}.html" for file in files]


ENGLISH = Edition("en", ROOT, "", "add-and-norm.pdf", "Printed from the book's website on {date}.",
                  "system-ui, sans-serif")
CHINESE = Edition("zh-CN", ROOT / "zh", "zh/", "zh/add-and-norm-zh.pdf", "由本书网站版打印，{date}。",
                  '"Noto Sans CJK SC", sans-serif')
EDITIONS = (ENGLISH, CHINESE)


@contextmanager
def browser_page(chromium: str = CHROMIUM):
    """A page of headless Chromium, light colour scheme, with no way off this machine."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(color_scheme="light")
            context.route("**/*", only_localhost())
            page = context.new_page()
            page.emulate_media(media="print")  # as page.pdf lays pages out, for reading their headings
            yield page
        finally:
            browser.close()


# The headings Chromium puts in a page's outline, in order, as the page shows them in print. Chromium's own
# titles come from the printed lines: a heading set on two lines loses the space at the break
# ("theTransformer"), and some come out twice ("Where to go nextWhere to go next").
HEADINGS = """() => [...document.querySelectorAll("h1, h2, h3, h4, h5, h6")]
    .filter(heading => heading.checkVisibility())
    .map(heading => {
        const copy = heading.cloneNode(true);
        copy.querySelectorAll(".headerlink").forEach(link => link.remove());
        // the theme's printed list of the page's sections is headed "Contents": no bookmark
        return {title: copy.textContent.replace(/\\s+/g, " ").trim(), listed: !heading.closest("#jb-print-toc")};
    })"""


# Chromium names the target of a link within the page by its id, and every chapter has a "summary" and a
# "references": joined into one PDF, those names would all lead to the first chapter's. Prefixing the
# targets of the page's own links with the page's name keeps them apart (only those: the explorer's
# charts find their patterns by id).
OWN_TARGETS = """prefix => {
    const own = [...document.querySelectorAll('a[href^="#"]')].filter(link => link.getAttribute("href").length > 1);
    for (const id of new Set(own.map(link => decodeURIComponent(link.getAttribute("href").slice(1))))) {
        const target = document.getElementById(id);
        if (target) target.id = `${prefix}-${id}`;
    }
    for (const link of own) {
        const id = decodeURIComponent(link.getAttribute("href").slice(1));
        if (document.getElementById(`${prefix}-${id}`)) link.setAttribute("href", `#${prefix}-${id}`);
    }
}"""


@dataclass
class PrintedPage:
    pdf: PdfReader
    headings: list[dict]  # {"title", "listed"} of each heading in the PDF's outline, in order


def print_page(page, url: str) -> PrintedPage:
    """The page at ``url`` printed to PDF, once MathJax has typeset it and its fonts have loaded, with
    an outline of its headings (Chromium makes one for a tagged PDF)."""
    page.goto(url, wait_until="load")
    page.evaluate("""async () => {
        if (window.MathJax && MathJax.startup) await MathJax.startup.promise;
        await document.fonts.ready;
    }""")
    page.evaluate(OWN_TARGETS, url.rsplit("/", 1)[-1].removesuffix(".html"))
    pdf = page.pdf(format="A4", margin=MARGIN, scale=SCALE, outline=True, tagged=True)
    return PrintedPage(PdfReader(io.BytesIO(pdf)), page.evaluate(HEADINGS))


def outline_titles(items: list) -> list[str]:
    return [title for item in items
            for title in (outline_titles(item) if isinstance(item, list) else [item.title])]


def add_bookmarks(writer: PdfWriter, printed: PrintedPage, start: int) -> None:
    """The printed page's outline, as bookmarks of ``writer`` where the page starts at ``start``: its
    title, and under it its sections, named as the page names them."""
    headings = printed.headings
    if len(headings) != len(outline_titles(printed.pdf.outline)):  # not the headings Chromium saw
        headings = [{"title": title, "listed": True} for title in outline_titles(printed.pdf.outline)]
    names = iter(headings)

    def add(items, parent):
        last = parent
        for item in items:
            if isinstance(item, list):  # the headings under the one before
                add(item, last)
                continue
            heading = next(names)
            last = parent
            if heading["listed"]:
                where = start + printed.pdf.get_destination_page_number(item)
                last = writer.add_outline_item(title=heading["title"], page_number=where, parent=parent,
                                               fit=Fit.xyz(item.left, item.top))

    add(printed.pdf.outline, None)


def title_page(page, edition: Edition) -> bytes:
    """The title page: the book's title, its authors, the day it was printed."""
    config = edition.config
    today = datetime.date.today().isoformat()
    page.set_content(
        f'<!doctype html><html lang="{edition.language}"><head><meta charset="utf-8"><style>'
        f"body {{ font-family: {edition.font}; text-align: center; margin: 0; }}"
        "h1 { font-size: 30pt; margin: 70mm 0 12mm; font-weight: 600; }"
        "p { font-size: 13pt; margin: 4mm 0; color: #333; }"
        "</style></head><body>"
        f"<h1>{html.escape(config['title'])}</h1>"
        f"<p>{html.escape(config['author'])}, {html.escape(str(config['copyright']))}</p>"
        f"<p>{html.escape(config['repository']['url'] if 'repository' in config else '')}</p>"
        f"<p>{html.escape(edition.printed.format(date=today))}</p>"
        "</body></html>"
    )
    return page.pdf(format="A4", margin=MARGIN)


def footers(page, edition: Edition, count: int) -> PdfReader:
    """``count`` blank A4 pages whose footers read "<title> · <page number>"."""
    sheets = '<div style="break-after: page; height: 1px"></div>' * count
    page.set_content(f"<!doctype html><html><head><title>{html.escape(edition.title)}</title></head>"
                     f"<body style='margin:0'>{sheets}</body></html>")
    pdf = page.pdf(format="A4", margin=MARGIN, display_header_footer=True, header_template="<span></span>",
                   footer_template=FOOTER.format(font=html.escape(edition.font)))
    return PdfReader(io.BytesIO(pdf))


# Noto CJK draws an ideograph and the Kangxi radical that looks like it with one glyph, and the text
# map (ToUnicode) Chromium writes for that glyph names the radical: 一 reads as ⼀ (U+2F00), 用 as ⽤, so
# the PDF's Chinese could not be searched or copied as written. Its em dash reads as U+2015 likewise,
# and in English "fi" and "ff" read as their ligature's code point (U+FB01, U+FB00).
def readable(text: str) -> str:
    def as_written(char: str) -> str:
        if "\u2e80" <= char <= "\u2fdf" or "\ufb00" <= char <= "\ufb06":  # radicals, Latin ligatures
            return unicodedata.normalize("NFKC", char)
        return "\u2014" if char == "\u2015" else char

    return "".join(map(as_written, text))


HEX = r"<([0-9A-Fa-f]+)>"


def unicode_of(hex_text: str) -> str:
    return bytes.fromhex(hex_text).decode("utf-16-be", errors="surrogatepass")


def read_cmap(cmap: str) -> dict[str, str]:
    """The glyph codes (hex, as written) and the text of each, from a ToUnicode CMap."""
    text = {}
    for block in re.findall(r"beginbfchar(.*?)endbfchar", cmap, re.S):
        text.update({code: unicode_of(to) for code, to in re.findall(HEX + r"\s*" + HEX, block)})
    for block in re.findall(r"beginbfrange(.*?)endbfrange", cmap, re.S):
        for low, high, to in re.findall(HEX + r"\s*" + HEX + r"\s*(<[0-9A-Fa-f]+>|\[[^\]]*\])", block):
            width, first = len(low), int(low, 16)
            if to.startswith("["):
                values = [unicode_of(value) for value in re.findall(HEX, to)]
            else:
                start = unicode_of(to[1:-1])
                values = [start[:-1] + chr(ord(start[-1]) + i) for i in range(int(high, 16) - first + 1)]
            text.update({f"{first + i:0{width}X}": value for i, value in enumerate(values)})
    return text


def fix_text_maps(writer: PdfWriter) -> None:
    """Rewrite every ToUnicode CMap that maps a glyph to a radical or a ligature (see ``readable``)."""
    done = set()

    def visit(resources):
        resources = resources.get_object()
        for font in resources.get("/Font", {}).values():
            font = font.get_object()
            reference = font.raw_get("/ToUnicode") if "/ToUnicode" in font else None
            if reference is None or reference.idnum in done:
                continue
            done.add(reference.idnum)
            stream = reference.get_object()
            cmap = stream.get_data().decode("latin-1")
            text = read_cmap(cmap)
            if all(readable(value) == value for value in text.values()):
                continue
            entries = [f"<{code}> <{readable(value).encode('utf-16-be').hex().upper()}>" for code, value in text.items()]
            blocks = "".join(f"{len(chunk)} beginbfchar\n" + "\n".join(chunk) + "\nendbfchar\n"
                             for chunk in (entries[i:i + 100] for i in range(0, len(entries), 100)))
            head, tail = cmap.split("endcodespacerange", 1)[0], cmap.split("endcmap", 1)[1]
            stream.set_data(f"{head}endcodespacerange\n{blocks}endcmap{tail}".encode("latin-1"))
        for form in resources.get("/XObject", {}).values():
            form = form.get_object()
            if form.get("/Subtype") == "/Form" and "/Resources" in form:
                visit(form["/Resources"])

    for page in writer.pages:
        visit(page["/Resources"])


def link_within(writer: PdfWriter, base: str, edition: Edition, starts: dict[str, int]) -> None:
    """Links to a page of this edition go to where it starts in the PDF; other links to the site
    (downloads, the other edition) become relative to the PDF's place in the site."""
    for page in writer.pages:
        for annotation in page.get("/Annots", []):
            annotation = annotation.get_object()
            action = annotation.get("/A")
            if action is None or action.get("/S") != "/URI" or not str(action["/URI"]).startswith(base):
                continue
            path, _, fragment = str(action["/URI"])[len(base):].partition("#")
            if path in starts:
                target = writer.pages[starts[path]].indirect_reference
                annotation[NameObject("/A")] = DictionaryObject({
                    NameObject("/S"): NameObject("/GoTo"),
                    NameObject("/D"): ArrayObject([target, NameObject("/Fit")]),
                })
            else:
                relative = posixpath.relpath(path or ".", posixpath.dirname(edition.pdf) or ".")
                action[NameObject("/URI")] = TextStringObject(relative + (f"#{fragment}" if fragment else ""))


def edition_pdf(page, base: str, edition: Edition) -> PdfWriter:
    """The whole edition as one PDF: title page, then every page of its table of contents."""
    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(title_page(page, edition))), import_outline=False)
    starts = {}
    for path in edition.pages():
        printed = print_page(page, base + path)
        starts[path] = len(writer.pages)
        writer.append(printed.pdf, import_outline=False)
        add_bookmarks(writer, printed, starts[path])
    numbers = footers(page, edition, len(writer.pages))
    for number, sheet in zip(writer.pages[1:], numbers.pages[1:]):  # the title page has no number
        number.merge_page(sheet)
        number.compress_content_streams()  # merging wrote the page's content out uncompressed
    link_within(writer, base, edition, starts)
    fix_text_maps(writer)
    writer.add_metadata({"/Title": edition.title, "/Author": edition.config["author"]})
    writer.page_mode = "/UseOutlines"
    return writer


def write_pdf(site: Path, output: Path, edition: Edition, chromium: str = CHROMIUM) -> Path:
    """Print ``edition`` from the built ``site`` to its PDF under ``output``."""
    target = output / edition.pdf
    target.parent.mkdir(parents=True, exist_ok=True)
    with served(site) as base, browser_page(chromium) as page:
        writer = edition_pdf(page, base, edition)
    writer.compress_identical_objects()
    with target.open("wb") as file:
        writer.write(file)
    return target


def book_pdfs(site: Path = SITE, output: Path | None = None, chromium: str = CHROMIUM) -> dict[Edition, Path]:
    """Both editions' PDFs, printed from the built ``site`` into ``output`` (the site itself unless given).

    The two editions print at the same time, each in its own Chromium (Playwright's API is for one
    thread): on two cores that takes about half as long.
    """
    output = output or site
    with ThreadPoolExecutor(max_workers=len(EDITIONS)) as pool:
        made = {edition: pool.submit(write_pdf, site, output, edition, chromium) for edition in EDITIONS}
        return {edition: future.result() for edition, future in made.items()}


INSTALL = "sudo bash tools/install_system_packages.sh"  # Debian's chromium and fonts-noto-cjk (and the tests' tools)


def first_line(text: str, default: str = "") -> str:
    """The first line of ``text`` that says something (an error's message can start with blank lines)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), default)


def browser_problem(chromium: str = CHROMIUM) -> str | None:
    """Why Chromium at ``chromium`` cannot print the book, in one line; None when it starts."""
    if not Path(chromium).is_file():
        return f"Chromium is not installed ({chromium} does not exist)"
    try:
        with browser_page(chromium):
            return None
    except Exception as error:  # noqa: BLE001 - Playwright's Error, or the driver failing: said in one line
        text = str(error)
        # Playwright's message holds the browser's own last words ("[pid=N][err] ...") and its exit status.
        words = re.findall(r"\[pid=\d+\]\[err\] (.+)", text)
        status = re.search(r"exitCode=(-?\d+)", text)
        said = words[-1].strip() if words else first_line(text, type(error).__name__)
        return (f"Chromium at {chromium} could not start: {said[:200]}"
                + (f" (exit status {status[1]})" if status else ""))


def main(argv: list[str] | None = None, after_build: bool = False) -> int:
    """Print both editions. A browser that is missing or cannot start is one line, never a traceback: after a
    build (``after_build``) the editions are there and that line is all, with exit status 0; alone, exit 1."""
    parser = argparse.ArgumentParser(prog="python -m tools.book_pdf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=SITE, help="the built site (default: _build/html)")
    parser.add_argument("--chromium", default=CHROMIUM, help=f"the browser that prints (default: {CHROMIUM})")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not (args.site / "index.html").exists():
        print(f"No built site in {args.site}: build the book first (python -m tools.book_build).")
        return 1
    problem = browser_problem(args.chromium)
    if problem:
        print(f"PDFs not printed: {problem}. To print them, run `{INSTALL}`, then `.venv/bin/python -m "
              f"tools.book_pdf`." + (" Both editions are built." if after_build else ""), flush=True)
        return 0 if after_build else 1
    print("Printing each edition to a PDF (about a minute and a half) ...", flush=True)
    start = time.perf_counter()
    try:
        made = book_pdfs(args.site, chromium=args.chromium)
    except Exception as error:  # noqa: BLE001 - one line here; the whole traceback in the log
        log = args.site.parent / "logs" / "pdf.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(traceback.format_exc(), encoding="utf-8")
        said = first_line(str(error))
        print(f"PDFs not printed: {type(error).__name__}: {said[:200]} (the whole traceback: {log})")
        return 1
    for path in made.values():
        print(f"  {path} ({path.stat().st_size / 1e6:.1f} MB, {len(PdfReader(path).pages)} pages)")
    print(f"Printed both editions in {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
