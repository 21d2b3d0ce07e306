"""The chapter's four tools as plain functions over a sandbox, for the frameworks to wrap.

They do what the harness's catalog does (same folder from `harness.chapter.make_sandbox`, same texts,
same descriptions), and each run is appended to a log file beside the sandbox, so tool runs are
counted across processes (an approval resumed in a new process) without trusting any framework.
The tool descriptions and the system prompt every peer is given are the harness's, written beside
the sandbox when it is made, so a framework's process reads them without importing the harness
(its memory row would otherwise carry ours).
"""

from __future__ import annotations

import asyncio
import json
import stat
from dataclasses import dataclass
from pathlib import Path

SCAN_SECONDS, SCAN_FILES, SCAN_EVERY = 3.0, 1200, 200


@dataclass(frozen=True)
class Folder:
    root: Path
    """The sandbox the tools work in."""
    log: Path
    """One line per tool run: `name:detail`."""
    given: Path
    """JSON: the system prompt and the tool descriptions, as the harness has them."""

    @classmethod
    def make(cls, directory: Path) -> Folder:
        """A fresh sandbox, an empty log and the texts every peer is given, in `directory`."""
        # Imported here: only the lab's own process makes folders; children only open them.
        from harness.chapter import SYSTEM, chapter_tools, make_sandbox

        folder = cls.at(directory)
        make_sandbox(folder.root)
        folder.log.write_text("")
        descriptions = {t.name: t.description for t in chapter_tools(folder.root)}
        folder.given.write_text(json.dumps({"system": SYSTEM, "descriptions": descriptions}))
        return folder

    @classmethod
    def at(cls, directory: Path) -> Folder:
        """The folder `make` made there, as another process finds it."""
        return cls(root=directory / "sandbox", log=directory / "tool_runs.log",
                   given=directory / "given.json")

    def system(self) -> str:
        return str(json.loads(self.given.read_text())["system"])

    def describe(self, tool: str) -> str:
        return str(json.loads(self.given.read_text())["descriptions"][tool])

    def note(self, line: str) -> None:
        with self.log.open("a") as f:
            f.write(line + "\n")

    def runs(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def _file(self, name: str) -> Path:
        if not name or "/" in name or "\\" in name or name in (".", ".."):
            raise ValueError(f"path must be a plain file name from list_files, got {name!r}")
        return self.root / name

    def list_files(self) -> str:
        self.note("list_files")
        return "\n".join(f"{p.name} ({p.stat().st_size} bytes)" for p in sorted(self.root.iterdir()))

    def read_file(self, path: str) -> str:
        self.note(f"read_file:{path}")
        file = self._file(path)
        if not file.exists():
            raise FileNotFoundError(f"no such file: {path}. Call list_files to see what exists.")
        if not file.stat().st_mode & stat.S_IRUSR:
            raise PermissionError(f"permission denied: {path}")
        return file.read_text()

    def delete_file(self, path: str) -> str:
        self.note(f"delete_file:{path}")
        self._file(path).unlink()
        return f"deleted {path}"

    async def scan_archive(self, seconds: float = SCAN_SECONDS) -> str:
        """Slow on purpose; notes whether it was cancelled, since that is what is measured."""
        self.note("scan_archive:start")
        try:
            for _ in range(SCAN_EVERY, SCAN_FILES + 1, SCAN_EVERY):
                await asyncio.sleep(seconds * SCAN_EVERY / SCAN_FILES)
        except asyncio.CancelledError:
            self.note("scan_archive:cancelled")
            raise
        self.note("scan_archive:finished")
        return f"scanned {SCAN_FILES} files; 2 incidents: worker 7 timed out twice in August."
