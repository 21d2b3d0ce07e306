"""`/kit`: the exits kit's report folders (report.md, report.json, PNG charts) shown read-only.

Given `--kit-reports DIR`, each sub-folder of DIR holding a `.md` report is one report (and DIR
itself, when it holds one). Names in URLs are matched against a strict pattern and looked up
among the folder's own entries, so no URL reaches outside DIR; symlinks, FIFOs and oversized
files are not served; a PNG must start with the PNG signature. The Markdown is shown as simple
HTML built from escaped text (headings, tables, lists, code, paragraphs; images only when
they name a PNG of the same folder), never as raw HTML. This module reads files only: it does
not import the kit.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from harness.ui.markup import Markup, html, join

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_MD_BYTES = 2 * 1024 * 1024
MAX_PNG_BYTES = 20 * 1024 * 1024


def _regular(path: Path, limit: int) -> bytes | None:
    """The file's bytes if it is a regular file (not a symlink) of at most `limit` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return f.read(limit + 1)[:limit]


def reports(root: Path) -> dict[str, Path]:
    """Report name -> folder, for every folder under `root` (and `root`) holding a `.md` file."""
    found: dict[str, Path] = {}
    try:
        candidates = [root, *(root / e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False))]
        for folder in candidates:
            if NAME.fullmatch(folder.name) and any(n.endswith(".md") for n in os.listdir(folder)):
                found.setdefault(folder.name, folder)
    except OSError:  # the folder went away or may not be read: no reports, said as such
        return found
    return found


def _charts(folder: Path) -> list[str]:
    """The folder's PNG files: regular files whose first bytes are the PNG signature."""
    return [n for n in _files(folder, ".png")
            if (_regular(folder / n, MAX_PNG_BYTES) or b"").startswith(PNG_SIGNATURE)]


def _files(folder: Path, suffix: str) -> list[str]:
    return sorted(e.name for e in os.scandir(folder)
                  if e.is_file(follow_symlinks=False) and e.name.endswith(suffix) and NAME.fullmatch(e.name))


_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
_ITEM = re.compile(r"\s*[-*]\s+")


def _inline(text: str) -> Markup:
    out, at = [], 0
    for m in _INLINE.finditer(text):
        out.append(html("{}", text[at:m.start()]))
        code, bold, em = m.groups()
        out.append(html("<code>{}</code>", code) if code is not None else
                   html("<b>{}</b>", bold) if bold is not None else html("<i>{}</i>", em))
        at = m.end()
    out.append(html("{}", text[at:]))
    return join(out)


def _table(rows: list[str]) -> Markup:
    cells = [[c.strip() for c in r.strip().strip("|").split("|")] for r in rows
             if not re.fullmatch(r"\|?[\s:|-]+\|?", r.strip())]
    if not cells:
        return Markup("")
    head = join(html("<th>{}</th>", _inline(c)) for c in cells[0])
    body = join(html("<tr>{}</tr>", join(html("<td>{}</td>", _inline(c)) for c in r)) for r in cells[1:])
    return html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", head, body)


def _until(lines: list[str], i: int, inside) -> int:
    """The index after the run of lines from `i` for which `inside(line)` holds."""
    while i < len(lines) and inside(lines[i]):
        i += 1
    return i


def markdown(text: str, image: Callable[[str, str], Markup]) -> Markup:
    """A safe subset of Markdown as HTML; every character of `text` is escaped."""
    out: list[Markup] = []
    lines, i = text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = _until(lines, i + 1, lambda x: not x.startswith("```"))
            out.append(html("<pre>{}</pre>", "\n".join(lines[i + 1:j])))
            i = j + 1
        elif line.lstrip().startswith("|"):
            j = _until(lines, i, lambda x: x.lstrip().startswith("|"))
            out.append(_table(lines[i:j]))
            i = j
        elif _ITEM.match(line):
            j = _until(lines, i, _ITEM.match)
            items = join(html("<li>{}</li>", _inline(_ITEM.sub("", x, count=1))) for x in lines[i:j])
            out.append(html("<ul>{}</ul>", items))
            i = j
        else:
            if m := re.match(r"(#{1,6})\s+(.*)", line):
                level = min(len(m.group(1)) + 1, 6)  # the page's own title is the h1
                out.append(html(f"<h{level}>{{}}</h{level}>", _inline(m.group(2))))
            elif m := _IMAGE.fullmatch(line.strip()):
                out.append(image(m.group(2), m.group(1)))
            elif line.strip():
                out.append(html("<p>{}</p>", _inline(line)))
            i += 1
    return join(out)


class KitPages:
    """`/kit`, `/kit/{report}`, `/kit/{report}/{file}.png` over the folder `root()` names."""

    def __init__(self, root: Callable[[], Path | None], page, error) -> None:
        self.root, self.page, self.error = root, page, error

    def _folder(self, request: Request) -> tuple[Path | None, Response | None]:
        base = self.root()
        if base is None:
            return None, self.error(request, 404, "no kit reports here: start the UI with --kit-reports DIR")
        name = request.path_params.get("report", "")
        found = reports(base)
        if name not in found:
            known = ", ".join(found) or "none"
            return None, self.error(request, 404, f"no kit report {name!r}; known: {known}")
        return found[name], None

    async def index(self, request: Request) -> Response:
        base = self.root()
        if base is None:
            return self.error(request, 404, "no kit reports here: start the UI with --kit-reports DIR")
        items = join(html('<li><a href="/kit/{}">{}</a></li>', n, n) for n in sorted(reports(base)))
        return self.page(request, "kit reports · harness",
                         html("<h1>Kit reports</h1><ul>{}</ul>", items or html("<li>none</li>")))

    async def report(self, request: Request) -> Response:
        folder, refusal = self._folder(request)
        if folder is None:
            return refusal
        name = request.path_params["report"]
        pngs = _charts(folder)
        shown: set[str] = set()

        def image(src: str, alt: str) -> Markup:
            if src not in pngs:
                return html("<p>[image {} not in this report's folder]</p>", src)
            shown.add(src)
            return html('<img class="kit" src="/kit/{}/{}" alt="{}">', name, src, alt)

        parts = []
        for md in sorted(_files(folder, ".md"), key=lambda n: (n != "report.md", n)):
            data = _regular(folder / md, MAX_MD_BYTES)
            text = data.decode("utf-8", errors="replace") if data is not None else f"({md} could not be read)"
            parts.append(html('<article class="box" id="md-{}">{}</article>', md, markdown(text, image)))
        rest = join(html('<h2>{}</h2><img class="kit" src="/kit/{}/{}" alt="{}">', p, name, p, p)
                    for p in pngs if p not in shown)
        return self.page(request, f"kit report {name} · harness",
                         html("<h1>Kit report <code>{}</code></h1>{}{}", name, join(parts), rest))

    async def chart(self, request: Request) -> Response:
        folder, refusal = self._folder(request)
        if folder is None:
            return refusal
        file = request.path_params["file"]
        data = _regular(folder / file, MAX_PNG_BYTES) if file in _files(folder, ".png") else None
        # Checked again here: the file may have changed since the page listed it.
        if data is None or not data.startswith(PNG_SIGNATURE):
            return self.error(request, 404, f"no PNG chart {file!r} in this report")
        return Response(data, media_type="image/png")


def routes(root: Callable[[], Path | None], page, error) -> list[Route]:
    k = KitPages(root, page, error)
    return [Route("/kit", k.index), Route("/kit/{report}", k.report), Route("/kit/{report}/{file}", k.chart)]
