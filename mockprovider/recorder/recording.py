"""The recording: every reply so far by conversation and turn, written as one scenario file.

A conversation is named by its first user message and a turn is the number of assistant
messages, both read from the request in chat shape, so a reply recorded through any of the
three wire formats replays through any of them. Each turn is a list of alternatives keyed by
`user_contains`, the longest message first so none hides another: a replay of another task
fails loudly instead of answering with this one's replies, and --append and --proxy-on-miss
find each conversation again. A retried turn keeps the last reply.

Each save rewrites the file atomically (a temporary file in the same folder, then a rename),
so a killed proxy still leaves a valid file, with the mode the file had before.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows has no flock: recorders writing one file there are not coordinated
    fcntl = None  # type: ignore[assignment]

from mockprovider.scripts.files import MAX_FILE_BYTES, NAME, ScenarioFileError, compile_scenario

_GAP = re.compile(r"\(turn \d+ was not recorded\)")


class RecordingError(ValueError):
    """An --out that cannot be recorded to (or replayed from); the message says which and why."""


def _umask_mode() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def check_out(out: Path, *, must_exist: bool, may_exist: bool) -> bool:
    """Whether `out` exists; `RecordingError` when it is not a path a recording can be written to."""
    if out.suffix != ".json":
        raise RecordingError(f"the recording is written as JSON: give --out a .json name, not {out.name!r}")
    try:
        st = out.stat()  # follows a link; never opens, so a FIFO cannot block here
    except FileNotFoundError:
        if must_exist:
            raise RecordingError(f"{out} does not exist: --strict replays an existing recording") from None
        if out.parent.exists() and not out.parent.is_dir():
            raise RecordingError(f"{out.parent} is not a folder") from None
        return False
    except OSError as e:
        raise RecordingError(f"{out} cannot be used: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise RecordingError(f"{out} is a folder; --out names the scenario file to write")
    if not stat.S_ISREG(st.st_mode):
        raise RecordingError(f"{out} is not a regular file (a FIFO, socket or device); --out names a file")
    if not may_exist:
        raise RecordingError(
            f"{out} exists; pass --overwrite to replace it or --append to add to its recording"
        )
    return True


@dataclass(kw_only=True)
class Recording:
    """Every reply so far, by conversation and turn; `save()` writes them as one scenario file."""

    upstream: str
    """The upstream as shown: credentials masked."""
    out: Path
    name: str
    description: str | None = None
    replies: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    """First user message → turn → the reply as a scenario-file object."""
    models: dict[str, None] = field(default_factory=dict)
    """Model names the client asked for, in order (a dict as an ordered set)."""
    mode: int = field(default_factory=_umask_mode)
    """The file's permission bits: kept from an existing file, else what the umask gives."""
    options: str | None = None
    after_last: str = "error"
    """Both as an appended file had them (a hand edit is kept), else the recorder's defaults."""
    given_name: str | None = None
    """The name the loaded file gives its scenario, if any."""
    warned_size: bool = False
    seen: tuple[int, int, int] | None = None
    """The file as this recording last read or wrote it (inode, mtime, size): a file that differs
    at the next save was written by someone else meanwhile, whose replies are kept."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def lookup(self, user: str, turn: int) -> dict[str, Any] | None:
        return self.replies.get(user, {}).get(turn)

    def add(self, user: str, turn: int, model: str, reply: dict[str, Any]) -> str:
        """File `reply` at this conversation's turn and save; a log line either way. Thread-safe:
        a large reply is recorded from a worker thread."""
        with self.lock:
            return self._add(user, turn, model, reply)

    def _add(self, user: str, turn: int, model: str, reply: dict[str, Any]) -> str:
        try:
            reply, note = fit(reply, user)
        except ScenarioFileError as e:
            return f"not recorded: {e}"
        self.replies.setdefault(user, {})[turn] = reply
        self.models[model.encode("utf-8", "backslashreplace").decode("utf-8")] = None
        try:
            size = self.save()
        except OSError as e:
            return f"not saved: {self.out}: {e.strerror or e}"
        except RecordingError as e:  # another writer left something the recorder cannot read
            return f"not saved: {e}"
        what = ", ".join(filter(None, [
            "text" if reply.get("content") else "",
            ", ".join(call["name"] for call in reply.get("tool_calls", [])),
        ]))
        line = f"recorded turn {turn} ({what or 'text'}) of {user[:40]!r} in {self.out}{note}"
        if size > MAX_FILE_BYTES and not self.warned_size:
            self.warned_size = True
            line += (f"; warning: the recording is {size} bytes, more than the {MAX_FILE_BYTES} "
                     "bytes --scenarios loads")
        return line

    def document(self) -> dict[str, Any]:
        # Longest first: a message that contains a shorter one must be tested before it. A
        # conversation with no first user message (or one from a file written without keys)
        # has no condition, so it comes last, as the fallback.
        threads = sorted(self.replies.items(), key=lambda item: -len(item[0]))
        count = max((max(turns) + 1 for _, turns in threads if turns), default=0)
        turns = [
            [({"if": {"user_contains": user}} if user else {}) | replies[turn]
             for user, replies in threads if turn in replies]
            or [{"content": f"(turn {turn} was not recorded)"}]
            for turn in range(count)
        ]
        models = ", ".join(self.models) or "no model"
        return {
            "name": self.name,
            "description": self.description
            or f"Recorded from {self.upstream} ({models}): {len(threads)} conversation(s).",
            **({"options": self.options} if self.options is not None else {}),
            "turns": turns,
            "after_last": self.after_last,
        }

    def save(self) -> int:
        """Write the file atomically, keeping what another writer (a second proxy recording into
        the same file) saved since this one last did; its size in bytes."""
        self.out.parent.mkdir(parents=True, exist_ok=True)
        file = Path(os.path.realpath(self.out))  # through a symlink: the link stays, its target changes
        with _locked(file.parent):
            self._keep_others()
            document = self.document()
            try:
                data = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()
            except UnicodeEncodeError:  # a --description from undecodable argv: escaped, still JSON
                data = (json.dumps(document, indent=2) + "\n").encode()
            fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=f".{file.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    os.fchmod(f.fileno(), self.mode)
                    f.write(data)
                os.replace(tmp, file)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            self.seen = _signature(self.out)
        return len(data)

    def take_over(self) -> None:
        """Start a new recording over the existing file (--overwrite): its mode is kept, its
        replies are not."""
        self.mode = stat.S_IMODE(self.out.stat().st_mode)
        self.seen = _signature(self.out)

    def _keep_others(self) -> None:
        now = _signature(self.out)
        if now is None or now == self.seen:
            return
        theirs = Recording(upstream=self.upstream, out=self.out, name=self.name)
        theirs.load()
        for user, turns in theirs.replies.items():
            ours = self.replies.setdefault(user, {})
            for turn, reply in turns.items():
                ours.setdefault(turn, reply)

    def load(self) -> None:
        """Take the replies of the existing file at `out` (for --append and replay)."""
        try:
            size = self.out.stat().st_size
            if size > MAX_FILE_BYTES:
                raise RecordingError(
                    f"{self.out} is {size} bytes, more than the {MAX_FILE_BYTES} a recording may be")
            doc = json.loads(self.out.read_bytes())
            compile_scenario(doc, source=str(self.out), default_name=self.name)
        except (ValueError, RecursionError) as e:
            raise RecordingError(f"{self.out} is not a scenario file the recorder can add to: {e}") from None
        self.mode = stat.S_IMODE(self.out.stat().st_mode)
        self.seen = _signature(self.out)
        written = doc.get("description")
        if not (isinstance(written, str) and written.startswith("Recorded from ")):  # ours: rewritten
            self.description = self.description or written
        self.given_name = doc["name"] if isinstance(doc.get("name"), str) else None
        self.options = doc.get("options", self.options)
        self.after_last = doc.get("after_last", self.after_last)
        for turn, value in enumerate(doc["turns"]):
            for alternative in value if isinstance(value, list) else [value]:
                # Every key but the condition: a hand-added latency or error stays as it was.
                reply = {k: v for k, v in alternative.items() if k != "if"}
                if set(reply) == {"content"} and _GAP.fullmatch(reply["content"]):
                    continue
                when = alternative.get("if", {"user_contains": ""})
                user = when.get("user_contains") if isinstance(when, dict) and len(when) == 1 else None
                if not isinstance(user, str):
                    raise RecordingError(
                        f"{self.out}: turn {turn} has a condition the recorder did not write; "
                        "only recordings made by the recorder can be added to"
                    )
                self.replies.setdefault(user, {})[turn] = reply


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """The folder locked against other recorders' saves (in this process or another) while a
    save reads what they wrote and replaces the file."""
    if fcntl is None:
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def fit(reply: dict[str, Any], user: str = "") -> tuple[dict[str, Any], str]:
    """The reply as this scenario format holds it, as the alternative of conversation `user`,
    and a note of what it could not hold; when it holds none, the `ScenarioFileError` of the
    barest try (the one that names the real problem, not a key this format lacks)."""
    tries = [(reply, "")]
    if "usage" in reply:  # optional: a format without recorded usage recounts it anyway
        tries.append(({k: v for k, v in reply.items() if k != "usage"}, ""))
    if "content" in reply and "tool_calls" in reply:
        tries.append(({"tool_calls": reply["tool_calls"]},
                      " (its text beside the tool calls was dropped: the format holds one or the other)"))
    last: ScenarioFileError | None = None
    for candidate, note in tries:
        try:
            alternative = ({"if": {"user_contains": user}} if user else {}) | candidate
            compile_scenario({"name": "check", "turns": [[alternative]]}, source="the upstream's reply")
        except ScenarioFileError as e:
            last = e
            continue
        return candidate, note
    assert last is not None
    raise last


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise RecordingError(
            f"{name!r} cannot be a model name; pass --name with letters, digits, '_', '.', '-'")
    return name
