"""The built site: launch and download links lead to real files, and nothing loads from the network."""

import re
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

import pytest
from bs4 import BeautifulSoup

from tools.book_pdf import EDITIONS


@pytest.fixture(scope="module")
def pages(book):
    """path of every built HTML page -> parsed document."""
    return {
        path: BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
        for path in sorted(book.html.rglob("*.html"))
        if "_static" not in path.relative_to(book.html).parts  # theme templates, not pages
    }


@pytest.fixture(scope="module")
def chapter_pages(book, pages, toc_chapters):
    return {ch: pages[book.html / f"{ch}.html"] for ch in toc_chapters}


def hrefs(page):
    return [a["href"] for a in page.find_all("a", href=True)]


def repo_path_of_launch_link(href, repository):
    """The repository file a Colab or Binder link opens, or None if it is neither."""
    org, name, branch = repository["org"], repository["name"], repository["branch"]
    colab = f"https://colab.research.google.com/github/{org}/{name}/blob/{branch}/"
    if href.startswith(colab):
        return unquote(href[len(colab):])
    binder = f"https://mybinder.org/v2/gh/{org}/{name}/{branch}"
    if href.startswith(binder):
        urlpath = parse_qs(urlparse(href).query)["urlpath"][0]
        return unquote(re.sub(r"^(lab/tree|tree)/", "", urlpath))
    return None


@pytest.mark.parametrize("service", ["colab.research.google.com", "mybinder.org"])
def test_every_chapter_has_a_launch_button(chapter_pages, service):
    lacking = [ch for ch, page in chapter_pages.items() if not any(service in h for h in hrefs(page))]
    assert lacking == []


def test_launch_links_open_a_notebook_that_exists_in_the_repo(chapter_pages, learner_copy, repo):
    targets = {
        repo_path_of_launch_link(h, learner_copy)
        for page in chapter_pages.values()
        for h in hrefs(page)
        if "colab.research" in h or "mybinder.org" in h
    }
    assert targets, "no launch links found"
    for target in targets:
        assert target is not None, "a launch link points to another repository than the learner's copy"
        assert target.endswith(".ipynb"), f"{target}: Colab cannot open a Markdown file"
        assert (repo / target).is_file(), f"{target} is not in the repository"


def test_every_chapter_offers_its_notebook_for_download(chapter_pages, book):
    for chapter, page in chapter_pages.items():
        page_dir = (book.html / chapter).parent
        downloads = [h for h in hrefs(page) if h.endswith(".ipynb") and "://" not in h]
        assert downloads, f"{chapter} has no .ipynb download link"
        for href in downloads:
            assert (page_dir / href).resolve().is_file(), f"{chapter}: {href} is not in the build"


# Exercise N goes with chapter N up to the fifth; chapters 6 and 8 have none, and chapter 7 has the sixth.
EXERCISE_OF_CHAPTER = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 7: 6}
CHAPTERS_WITHOUT_EXERCISE = {6, 8, 9}


def exercise_of(chapter, repo):
    """The release notebook that goes with a chapter, or None."""
    number = EXERCISE_OF_CHAPTER.get(int(Path(chapter).name.split("_")[0]))
    found = sorted(repo.glob(f"exercises/ex{number}_*/*.ipynb")) if number else []
    return found[0].relative_to(repo).as_posix() if found else None


@pytest.fixture(scope="module")
def chapters_with_exercises(chapter_pages, repo):
    pairs = {ch: exercise_of(ch, repo) for ch in chapter_pages}
    return {ch: (page, pairs[ch]) for ch, page in chapter_pages.items() if pairs[ch]}


def test_every_chapter_but_the_sixth_eighth_and_ninth_has_an_exercise(chapter_pages, chapters_with_exercises):
    expected = [ch for ch in chapter_pages if int(Path(ch).name[:2]) not in CHAPTERS_WITHOUT_EXERCISE]
    assert sorted(chapters_with_exercises) == sorted(expected)


def test_each_chapter_offers_its_exercise_release_for_download(chapters_with_exercises, book, repo):
    for chapter, (page, release) in chapters_with_exercises.items():
        page_dir = (book.html / chapter).parent
        name = Path(release).name
        downloads = [h for h in hrefs(page) if h.endswith("/" + name) and "://" not in h]
        assert downloads, f"{chapter} does not link {name} for download"
        for href in downloads:
            assert (page_dir / href).read_bytes() == (repo / release).read_bytes(), f"{chapter}: {href}"


@pytest.mark.parametrize("service", ["colab.research.google.com", "mybinder.org"])
def test_each_chapter_launches_its_exercise_release(chapters_with_exercises, learner_copy, service):
    for chapter, (page, release) in chapters_with_exercises.items():
        targets = [repo_path_of_launch_link(h, learner_copy) for h in hrefs(page) if service in h]
        assert release in targets, f"{chapter} has no {service} link to {release}"


def test_course_map_downloads_every_exercise(book, pages, repo):
    index = pages[book.html / "intro.html"]
    downloaded = {Path(h).name for h in hrefs(index) if h.endswith(".ipynb") and "://" not in h}
    assert downloaded == {p.name for p in repo.glob("exercises/*/*.ipynb")}


def local_references(page):
    for tag, attr in (("a", "href"), ("img", "src"), ("script", "src"), ("link", "href")):
        for node in page.find_all(tag):
            value = node.get(attr)
            if value and not re.match(r"^([a-z]+:|//|#)", value):
                yield value


def test_every_local_link_resolves_to_a_built_file(pages, book):
    """Every link but the landing pages' to the PDFs, which tools/book_pdf.py prints after a build
    (tests/test_book_pdf.py prints them and follows those links)."""
    printed_later = {(book.html / edition.pdf).resolve() for edition in EDITIONS}
    broken = []
    for path, page in pages.items():
        for ref in local_references(page):
            target = (path.parent / unquote(ref.split("#")[0].split("?")[0])).resolve()
            if not target.exists() and target not in printed_later:
                broken.append(f"{path.name}: {ref}")
    assert broken == []


def is_redirect(page) -> bool:
    return page.find("meta", attrs={"http-equiv": "Refresh"}) is not None


def test_every_page_of_both_editions_names_a_favicon_that_is_built(pages, book):
    """Without one, a browser's first visit asks for /favicon.ico and logs a 404."""
    assert book.html / "zh" / "chapters" / "01_residual_connections.html" in pages  # both editions are under test
    missing = []
    for path, page in pages.items():
        icon = page.find("link", rel="icon")
        if not is_redirect(page) and (icon is None or not (path.parent / icon["href"]).resolve().is_file()):
            missing.append(str(path.relative_to(book.html)))
    assert missing == []


def test_the_site_root_serves_favicon_ico_for_the_redirecting_index(pages, book):
    """index.html only redirects to the first page; a browser asks the site's root for /favicon.ico meanwhile."""
    assert is_redirect(pages[book.html / "index.html"])
    assert (book.html / "favicon.ico").read_bytes()[:4] == b"\x00\x00\x01\x00"  # an ICO file's header


def test_no_page_loads_a_script_or_stylesheet_from_the_network(pages):
    external = []
    for path, page in pages.items():
        sources = [s.get("src") for s in page.find_all("script")]
        sheets = [l.get("href") for l in page.find_all("link") if "stylesheet" in (l.get("rel") or [])]
        sources += sheets
        external += [f"{path.name}: {s}" for s in sources if s and re.match(r"^(https?:)?//", s)]
        inline = " ".join(s.get_text() for s in page.find_all("script") if not s.get("src"))
        external += [f"{path.name}: inline {u}" for u in re.findall(r"https?://[^\s\"']+\.js\b", inline)]
    assert external == []


def test_no_stylesheet_imports_fonts_or_styles_from_the_network(book):
    offenders = [
        str(css.relative_to(book.html))
        for css in book.html.rglob("*.css")
        if re.search(r"(@import|url\()\s*['\"]?(https?:)?//", css.read_text(errors="ignore"))
    ]
    assert offenders == []


def test_pages_with_math_load_the_bundled_mathjax(book, pages):
    with_math = {path: page for path, page in pages.items() if page.select(".math")}
    assert with_math, "no page contains math"
    for path, page in with_math.items():
        mathjax = [s["src"] for s in page.find_all("script", src=True) if "mathjax" in s["src"].lower()]
        assert mathjax, f"{path.name} has math but loads no MathJax"
        assert all((path.parent / src).resolve().is_file() for src in mathjax)


def test_search_page_and_index_are_built(book):
    assert (book.html / "search.html").is_file()
    assert (book.html / "searchindex.js").is_file()
    assert (book.html / "genindex.html").is_file()


def test_diagrams_are_svg_files_that_need_no_network(book, pages):
    diagrams = {
        (path.parent / img["src"]).resolve()
        for path, page in pages.items()
        for img in page.find_all("img", src=True)
        if img["src"].endswith(".svg") and "_static" not in img["src"]
    }
    assert diagrams, "the book shows no SVG diagram"
    for svg in diagrams:
        text = svg.read_text()
        assert not re.search(r"(href|src)=[\"'](https?:)?//", text.replace('xmlns="http', "")), svg.name
        assert "<title" in text, f"{svg.name} has no <title> for screen readers"


def test_no_solution_reaches_the_built_site(book, repo):
    """A learner browsing or downloading from the site finds releases, never solutions."""
    solution_markers = ("### BEGIN SOLUTION", "Rubric for the grader")
    for path in book.html.rglob("*"):
        assert "solutions" not in path.relative_to(book.html).parts, path
        if path.suffix in {".html", ".ipynb", ".md", ".txt", ".js"}:
            text = path.read_text(encoding="utf-8", errors="replace")
            assert not any(marker in text for marker in solution_markers), path
