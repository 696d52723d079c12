"""Write the learner's copy: what a learner runs, and nothing a grader keeps to itself.

The course's repository holds the reference solutions (``solutions/``) and the hidden test suites
(``autograder/suites/``). Learners get a separate repository instead, written by this module from
the repository it lives in:

- the book's chapters as notebooks, both editions, at their paths here (``chapters/*.ipynb``,
  ``zh/chapters/*.ipynb``), with the helper module each folder imports (``addnorm_helpers.py``):
  a book page's Colab or Binder button names the same path in the copy (``_ext/learner_launch.py``);
- the six releases, ``exercises/<name>/<name>.ipynb``;
- a learner's README, ``LICENSE``, and what Binder installs: ``runtime.txt`` and a
  ``requirements.txt`` with only what the notebooks run on, each pin as in the course's own file.

Where the copy is published is ``learner_copy`` in ``_config.yml``. The book's launch buttons read
it as they are built (``_ext/learner_launch.py``). The chapters' own links (their exercise's Colab
and Binder links, the Colab fetch of the helpers) are written out in the pages, so that a notebook
opened anywhere has them: after changing the setting, ``--relink`` rewrites them in both editions
(then the twins), and until then the strict build fails on every link to another repository.

The command refuses a folder that is not empty or that lies inside this repository (exit 2), and
prints what it wrote and the git commands that publish it.

    python -m tools.learner_copy DEST       # write the learner's copy into DEST
    python -m tools.learner_copy --relink   # point the chapters' links at learner_copy of _config.yml
"""

import argparse
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
EDITIONS = ("chapters", "zh/chapters")  # where the book's notebooks are, English first
HELPERS = "addnorm_helpers.py"  # the module every chapter imports, next to it
# What the notebooks import or run in: the chapters (torch, numpy, matplotlib, IPython, and ipywidgets
# for chapter 2's explorer) and the releases, in JupyterLab. What these pull in is pinned too.
RUNS_ON = ("torch", "numpy", "matplotlib", "ipywidgets", "ipykernel", "jupyterlab")
# The CPU build of torch, as on the course machines: PyPI's Linux wheel pulls in CUDA packages.
TORCH_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"


# The repository part of each link a chapter gives a learner, and how to write it for the copy.
REPO_AND_BRANCH = r"(?P<repo>[\w.-]+/[\w.-]+)/(?:blob/)?(?P<branch>[\w.-]+)"
LINKS = [
    (re.compile(rf"https://colab\.research\.google\.com/github/{REPO_AND_BRANCH}/"),  # Colab
     "https://colab.research.google.com/github/{repo}/blob/{branch}/"),
    (re.compile(rf"https://mybinder\.org/v2/gh/{REPO_AND_BRANCH}\?"),  # Binder
     "https://mybinder.org/v2/gh/{repo}/{branch}?"),
    (re.compile(rf"https://raw\.githubusercontent\.com/{REPO_AND_BRANCH}/(?=chapters/{HELPERS})"),  # the fetch
     "https://raw.githubusercontent.com/{repo}/{branch}/"),
]
RELINK = "python -m tools.learner_copy --relink"


class Refused(Exception):
    """The copy cannot be written there; the message says why."""


@dataclass
class Copy:
    """What a learner's copy holds, as paths relative to its top folder."""

    chapters: list[str]
    helpers: list[str]
    releases: list[str]


def learner_copy_setting(root: Path = ROOT) -> tuple[str, str]:
    """``(url, branch)`` of the learner's copy, from ``learner_copy`` in ``_config.yml``."""
    setting = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))["learner_copy"]
    return setting["url"].rstrip("/"), setting.get("branch", "main")


def copy_repository(root: Path = ROOT) -> tuple[str, str]:
    """``(owner/name, branch)`` of the learner's copy on GitHub."""
    url, branch = learner_copy_setting(root)
    return urlparse(url).path.strip("/"), branch


def links_elsewhere(text: str, root: Path = ROOT) -> list[str]:
    """Each Colab, Binder or fetch address of ``text`` that is not in the learner's copy, as far as its repository."""
    repo, branch = copy_repository(root)
    return [match[0] for pattern, _ in LINKS for match in pattern.finditer(text)
            if (match["repo"], match["branch"]) != (repo, branch)]


def relinked(text: str, root: Path = ROOT) -> str:
    repo, branch = copy_repository(root)
    for pattern, form in LINKS:
        text = pattern.sub(form.format(repo=repo, branch=branch), text)
    return text


def relink(root: Path = ROOT) -> list[Path]:
    """Point every chapter's links at the learner's copy, in both editions; write the changed chapters' twins.

    Both editions change alike, so a page whose Chinese prose was current stays current (it is stamped).
    """
    from tools import editions, sync_notebooks

    changed = []
    for page in [*sorted(root.glob("chapters/*.md")), *sorted(root.glob("zh/chapters/*.md"))]:
        text = page.read_text(encoding="utf-8")
        if relinked(text, root) != text:
            changed.append(page)
    english = [page.relative_to(root) for page in changed if page.relative_to(root).parts[0] != "zh"]
    recorded = json.loads((root / "zh" / "sources.json").read_text(encoding="utf-8"))
    current = [page for page in english if not editions.differences(page, recorded, root)]
    for page in changed:
        page.write_text(relinked(page.read_text(encoding="utf-8"), root), encoding="utf-8")
    if current:
        editions.stamp([str(page) for page in current], root)
    for page in changed:
        sync_notebooks.write_twin(page)
    return changed


def contents(root: Path = ROOT) -> Copy:
    chapters = [p for edition in EDITIONS for p in sorted((root / edition).glob("*.ipynb"))]
    helpers = [root / edition / HELPERS for edition in EDITIONS]
    releases = sorted(root.glob("exercises/*/*.ipynb"))
    missing = [p for p in helpers if not p.exists()]
    if not chapters or not releases or missing:
        raise Refused(f"{root} holds no chapter notebooks, releases or {HELPERS}: "
                      "run python -m tools.sync_notebooks and python -m tools.release_exercises first")
    relative = lambda paths: [p.relative_to(root).as_posix() for p in paths]  # noqa: E731
    return Copy(relative(chapters), relative(helpers), relative(releases))


def pins(requirements: str) -> dict[str, str]:
    """Canonical name -> its line, of every ``name==version`` line of a requirements file."""
    found = {}
    for line in requirements.splitlines():
        line = line.split("#")[0].strip()
        if "==" in line and not line.startswith("-"):
            found[canonicalize_name(line.split("==")[0])] = line
    return found


def dependencies(name: str) -> set[str]:
    """What the installed distribution ``name`` requires on this machine (its extras left out)."""
    environment = default_environment() | {"extra": ""}
    try:
        required = importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
        return set()
    return {canonicalize_name(r.name) for r in map(Requirement, required)
            if r.marker is None or r.marker.evaluate(environment)}


def learner_requirements(root: Path = ROOT) -> str:
    """The course's pins of what the notebooks run on and of what those pull in, as installed here."""
    course = pins((root / "requirements.txt").read_text(encoding="utf-8"))
    direct = [canonicalize_name(name) for name in RUNS_ON]
    unpinned = [name for name in direct if name not in course]
    if unpinned:
        raise Refused(f"requirements.txt pins no {', '.join(unpinned)}: pin it there first")
    pulled, todo = set(), list(direct)
    while todo:
        for dependency in dependencies(todo.pop()) - pulled - set(direct):
            if dependency in course:  # pinned by the course: what the course installs
                pulled.add(dependency)
                todo.append(dependency)
    lines = ["# What the notebooks run on, pinned as in the course's requirements.txt; Binder installs it.",
             "# The CPU build of torch: PyPI's Linux wheel pulls in CUDA packages the notebooks do not use.",
             TORCH_INDEX, ""]
    lines += [course[name] for name in direct]
    lines += ["", "# What those pull in"]
    lines += [course[name] for name in sorted(pulled)]
    return "\n".join(lines) + "\n"


def readme(url: str, branch: str, copy: Copy) -> str:
    repo = urlparse(url).path.strip("/")
    first = copy.releases[0]
    return f"""# Add & Norm: the notebooks

The notebooks of the course *Add & Norm* (residual connections, LayerNorm, BatchNorm, pre-norm vs post-norm,
RMSNorm): the book's chapters in `chapters/` (the Chinese edition in `zh/chapters/`) and the six graded
exercises in `exercises/<name>/<name>.ipynb`. The course's own repository holds the book's sources and the grader.

## Run them

- **In Colab or on Binder**, nothing to install: each chapter's last section opens its exercise there, and each
  page of the book has launch buttons. Or open any notebook of this repository by its path, for example
  `https://colab.research.google.com/github/{repo}/blob/{branch}/{first}`.
- **On your machine**, with Python 3.11:

  ```bash
  git clone {url}.git && cd {repo.split("/")[-1]}
  python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
  .venv/bin/jupyter lab {first}
  ```

## Do an exercise

Write your code where a cell says `raise NotImplementedError("not written yet: ...")`, and keep the names and
signatures: the grader calls them. After each task, run the self-check cell below it: it prints `ok`, or says in
one sentence what to fix. The grader runs more tests than the self-checks, so `ok` is a first filter, not a
guarantee of full points.

## Submit

Submit the notebook itself, `<name>.ipynb`, the way your instructor tells you (an upload to your course's site, or
nbgrader's `submit`). Keep its file name, and save it before you submit.

## Licence

MIT, see `LICENSE`.
"""


def refuse_destination(dest: Path, root: Path = ROOT) -> None:
    resolved = dest.resolve()
    if resolved == root or root in resolved.parents:
        raise Refused(f"{dest} is inside the course's repository ({root}): write the copy outside it, "
                      "so that it can become a repository of its own")
    if resolved.exists() and not resolved.is_dir():
        raise Refused(f"{dest} is a file, not a folder")
    if resolved.is_dir() and any(resolved.iterdir()):
        raise Refused(f"{dest} is not empty: give a new or empty folder, the copy must hold nothing else")


def write(dest: Path, root: Path = ROOT) -> Copy:
    """Write the learner's copy of ``root`` into ``dest`` (new or empty, outside ``root``)."""
    refuse_destination(dest, root)
    copy = contents(root)
    requirements = learner_requirements(root)
    url, branch = learner_copy_setting(root)
    dest.mkdir(parents=True, exist_ok=True)
    for relative in copy.chapters + copy.helpers + copy.releases:
        (dest / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / relative, dest / relative)  # a file, not a link: zh/chapters' helper is a link here
    shutil.copyfile(root / "LICENSE", dest / "LICENSE")
    shutil.copyfile(root / "runtime.txt", dest / "runtime.txt")
    (dest / "requirements.txt").write_text(requirements, encoding="utf-8")
    (dest / "README.md").write_text(readme(url, branch, copy), encoding="utf-8")
    return copy


def source_commit(root: Path = ROOT) -> str | None:
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.learner_copy", description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, nargs="?", help="a new or empty folder outside this repository")
    parser.add_argument("--relink", action="store_true",
                        help="point the chapters' Colab, Binder and fetch links at learner_copy of _config.yml")
    args = parser.parse_args(argv)
    if args.relink == (args.dest is not None):
        parser.error("give either DEST or --relink")
    if args.relink:
        changed = relink()
        print(f"pointed the links of {len(changed)} pages at the learner's copy, and wrote their twins"
              + ("" if not changed else ": their code changed, so the next book build runs them again"))
        return 0
    try:
        copy = write(args.dest)
    except Refused as refused:
        print(f"learner_copy: {refused}", file=sys.stderr)
        return 2
    except OSError as error:  # a folder that cannot be written, say
        print(f"learner_copy: cannot write {args.dest}: {error.strerror or error}", file=sys.stderr)
        return 2
    url, branch = learner_copy_setting()
    english = sum(not p.startswith("zh/") for p in copy.chapters)
    print(f"wrote {args.dest}: {len(copy.chapters)} chapter notebooks ({english} English, "
          f"{len(copy.chapters) - english} Chinese), {len(copy.helpers)} helper modules, "
          f"{len(copy.releases)} exercise releases, README.md, requirements.txt, runtime.txt, LICENSE")
    commit = source_commit()
    message = "Learner's copy of Add & Norm" + (f" at {commit}" if commit else "")
    print(f"\nTo publish it at {url} (learner_copy in _config.yml), as a new repository:\n"
          f"  cd {args.dest}\n"
          f"  git init -b {branch} && git add -A && git commit -m \"{message}\"\n"
          f"  git remote add origin {url}.git\n"
          f"  git push -u origin {branch}\n"
          f"To update it later: write a fresh copy, move the .git folder of the published one into it, "
          f"then commit and push.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
