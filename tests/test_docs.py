"""Every command the README and docs/ show works as written.

Each shell line of a ```sh block is split as a shell would split it, and checked by what it runs:
a `make` target must exist; `python -m MODULE ...`, `harness ...` and `mockprovider ...` lines
are handed to the module's own argument parser, unchanged, and must parse (an unknown flag, a
bad choice or a missing argument fails here, with the line that shows it). Every Python block
must compile. The examples that need a server are run for real by the tests of what they
document (tests/harness/test_readme.py, the formats', the fixture's, the recorder's, the kit's).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
OWN_PROGRAMS = {"harness": "harness", "mockprovider": "mockprovider"}
PYTHONS = {"python", "python3", ".venv/bin/python"}
# Programs of the machine, shown as context (clone, install, stop a server): not ours to check.
OTHERS = {"git", "cd", "pip", ".venv/bin/pip", "kill", "curl", "export", "source", "cp", "mkdir", "ls",
          "cat", "echo", "sleep", "wait", "pytest", ".venv/bin/pytest", "open", "xdg-open",
          "until", "do", "done"}


class Parsed(Exception):
    """Raised instead of running the command once its arguments parsed."""


def blocks(kind: str) -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for lang, body in BLOCK.findall(page.read_text()):
            if lang == kind:
                found.append((page.relative_to(ROOT).as_posix(), body))
    return found


def commands(body: str) -> list[list[str]]:
    """The commands of a shell block: continuations joined, comments dropped, `&&`, `;`, `|` split."""
    out = []
    for line in body.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        current: list[str] = []
        for word in [*words, ";"]:
            if word in ("&&", ";", "|", "||", "&"):
                if current:
                    out.append(current)
                current = []
            else:
                current.append(word.removesuffix("&") if word.endswith("&") and word != "&" else word)
                if word.endswith("&") and word != "&":
                    out.append(current)
                    current = []
    return [c for c in (_without_env(c) for c in out) if c]


def _without_env(words: list[str]) -> list[str]:
    while words and ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    return words


SHELL_LINES = [(page, words) for page, body in blocks("sh") for words in commands(body)]


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z0-9-]*):", (ROOT / "Makefile").read_text(), re.M))


def parse_only(module: str, argv: list[str], monkeypatch) -> None:
    """Run `python -m module argv` up to the point its parser accepted the arguments."""
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        parsed = original(self, args, namespace)
        for value in vars(parsed).values():  # argparse.FileType opened it; the command never runs
            if hasattr(value, "close"):
                value.close()
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.setattr(sys, "argv", [module, *argv])
    spec = importlib.util.find_spec(module)
    assert spec is not None, f"no module {module}"
    if spec.submodule_search_locations:  # a package runs its __main__
        spec = importlib.util.find_spec(f"{module}.__main__")
        assert spec is not None, f"package {module} has no __main__"
    source = Path(spec.origin).read_text()
    try:
        # Executed from source as `python -m` would, past pytest's import hooks.
        exec(compile(source, spec.origin, "exec"), {"__name__": "__main__", "__file__": spec.origin})
    except Parsed:
        return
    except SystemExit as e:
        raise AssertionError(f"`{module}` refused {argv}: exit {e.code}") from None
    raise AssertionError(f"`{module}` {argv} ran without parsing any arguments")


def test_the_pages_have_shell_lines_to_check():
    assert len(SHELL_LINES) >= 20
    assert any(words[0] in ("harness", ".venv/bin/harness") for _, words in SHELL_LINES)


def with_files_named(args: list[str], home: Path) -> list[str]:
    """`~` as a shell expands it, and each `--*-file PATH` made, as the reader would have it."""
    args = [str(home / a[2:]) if a.startswith("~/") else a for a in args]
    for option, value in zip(args, args[1:], strict=False):
        if option.startswith("--") and option.endswith("-file"):
            Path(value).parent.mkdir(parents=True, exist_ok=True)
            Path(value).write_text("docs-test-value\n")
    return args


IDS = [f"{p}:{' '.join(w)[:60]}" for p, w in SHELL_LINES]


@pytest.mark.parametrize(("page", "words"), SHELL_LINES, ids=IDS)
def test_a_documented_command_works_as_written(page, words, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    program, *args = words[0], *with_files_named(words[1:], tmp_path)
    program_name = program.removeprefix(".venv/bin/")
    if program == "make":
        wanted = [a for a in args if not ENV_ASSIGNMENT.match(a) and not a.startswith("-")]
        assert set(wanted) <= make_targets(), f"{page}: `make {' '.join(args)}` names no such target"
    elif program_name in OWN_PROGRAMS:
        parse_only(OWN_PROGRAMS[program_name], args, monkeypatch)
    elif program in PYTHONS and args[:1] == ["-m"] and args[1] not in ("pytest", "pip", "venv"):
        parse_only(args[1], args[2:], monkeypatch)
    elif program in PYTHONS:
        pass  # a script the page tells the reader to save, or `-m pytest/pip/venv`
    else:
        assert program in OTHERS, f"{page}: `{' '.join(words)}` runs a program this test does not know"


@pytest.mark.parametrize(("page", "body"), blocks("python"), ids=lambda v: v if v.endswith(".md") else "")
def test_every_python_block_compiles(page, body):
    compile(body, page, "exec")


LINK = re.compile(r"\]\(([^)\s]+)\)")
LINKED_PAGES = [*PAGES, *sorted(p for p in [*ROOT.glob("*/README.md"), *ROOT.glob("*/*/README.md")]
                                if not p.relative_to(ROOT).parts[0].startswith("."))]
"""The packages' READMEs; a hidden folder's (pytest's own cache writes one) is not ours."""


def local_links(page: Path) -> list[str]:
    """Relative link targets of a page, outside code blocks and `code spans` (examples, not links)."""
    prose = re.sub(r"`[^`\n]*`", "", BLOCK.sub("", page.read_text()))
    return [t.split("#")[0] for t in LINK.findall(prose) if not re.match(r"[a-z]+:|#", t)]


@pytest.mark.parametrize("page", LINKED_PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_reaches_a_file(page):
    # Relative to the page: a docs/ page linking `docs/x.md` points at docs/docs/x.md.
    assert [t for t in local_links(page) if not (page.parent / t).exists()] == []


def test_the_link_check_reads_the_links():
    assert "docs/scenarios.md" in local_links(ROOT / "README.md")


NAMED_IN = [*LINKED_PAGES, *sorted(p for package in ("mockprovider", "harness", "exitkit", "o200k")
                                   for p in (ROOT / package).rglob("*.py"))]
"""The pages, and the shipped code's docstrings and comments: where a reader is sent to a module."""
DOTTED = re.compile(r"`(mockprovider(?:\.\w+)+)")
TOPS = "tests|mockprovider|experiments|harness|exitkit|o200k|docs"
REPO_PATH = re.compile(rf"\b((?:{TOPS})/[\w/-]+\.(?:py|md))\b")


def _resolves(name: str) -> bool:
    """Whether a dotted name is a module of ours, or a name a module of ours defines."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        path = ROOT.joinpath(*parts[:i])
        source = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
        if source.is_file():
            rest = parts[i:]
            defined = len(rest) == 1 and re.search(rf"\b{rest[0]}\b", source.read_text()) is not None
            return not rest or defined
    return False


def stale_names(path: Path) -> list[str]:
    text = path.read_text()
    names = [n for n in DOTTED.findall(text) if not _resolves(n)]
    paths = [p for p in REPO_PATH.findall(text) if not (ROOT / p).exists()]
    return [*names, *paths]


@pytest.mark.parametrize("path", NAMED_IN, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_module_and_file_a_page_or_docstring_names_exists(path):
    # A module moved into a folder leaves its old dotted name in prose that no import checks.
    assert stale_names(path) == []


def test_the_name_check_sees_a_moved_module(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Bounded by `mockprovider.validation.MAX_DEPTH`, see tests/mockprovider/test_gone.py;\n"
                    "`mockprovider.reading.validation.MAX_DEPTH` and tests/test_docs.py are real.\n")
    assert stale_names(page) == ["mockprovider.validation.MAX_DEPTH", "tests/mockprovider/test_gone.py"]
