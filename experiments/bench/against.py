"""The mock beside any other OpenAI-compatible chat server, on the same request bodies.

    python -m experiments.bench.against --url http://127.0.0.1:4010/v1            # turns 1 and 100
    python -m experiments.bench.against --url URL --turns 1 20 100 --samples 400
    python -m experiments.bench.against --url URL --other-pid PID --connections 4

Each sample posts one body of `experiments.bench.floor` (conversation k of `runaway` at turn t,
offering `list_files`, whose turn t - 1 was sent first) to both servers, one after the other in
alternating order, over one keep-alive `httpx.Client` each, so a busy moment of a shared machine
slows both sides of a sample alike. Both servers receive exactly the same bytes, `model` included:
the other server must answer `POST {url}/chat/completions` for model `runaway` with a 200 and a
`chat.completion` (a fixture that answers any request offering `list_files` with a call to it
does; docs/benchmarks.md shows one for aimock).

With `--connections N`, a sample is a round of N bodies sent at once over N keep-alive
connections to one server, then the same N to the other (alternating which goes first), so each
request is timed while N are in flight on its server: a single-threaded server then queues them,
and its own cost per request weighs more in the wall time than the client's.

Our mock runs as its own process (`python -m mockprovider --quiet`), as the other server does,
unless `--mock-url` names one already running. The figures: each side's median (p50) wall time
per request, client included, the ratio of the two medians, and the median of the per-sample
ratios; each server's CPU time per request (every thread of its process, read from Linux's /proc
while the samples ran: each thread's schedstat, else the process's stat, in clock ticks; the
source named, "unknown" when neither can be read) when its pid is known (`--other-pid`;
`--mock-pid` beside `--mock-url`), with the program that process runs and the cores it may run on,
and the client's cores (the interpreter's build moves a server's cost, and so, on a small machine,
does sharing the client's core: a comparison names both); and the machine's load average, since
both sides share its cores with everything else. A pid that does not listen at its URL is refused:
the shell, `npx` or `make` that started a server would read as a server costing nothing.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from experiments.bench.floor import HEADERS, TASK, request_body, timed
from experiments.lab.servers import mock_server


@dataclass(frozen=True, kw_only=True)
class Against:
    turn: int
    samples: int
    client: str = "httpx"
    """The client: `httpx`, or `raw` (`RawClient`)."""
    connections: int = 1
    """Requests in flight on the timed server: one per keep-alive connection."""
    mock_us: float
    """Median wall time of one request to the mock, client included."""
    other_us: float
    """The same for the other server."""
    ratio: float
    """mock_us / other_us: the ratio of the two p50s."""
    paired: float
    """Median of the per-sample ratios mock / other."""
    mock_cpu_us: float | None = None
    """The mock process's CPU time per request while the samples ran; None when its pid is
    unknown or its CPU time could not be read."""
    other_cpu_us: float | None = None
    """The same for the other server's process."""
    mock_cpu_source: CpuSource | Literal["unreadable"] | None = None
    """Where `mock_cpu_us` was read (`CpuTime.source`), `unreadable` when nowhere; None when its
    pid is unknown."""
    other_cpu_source: CpuSource | Literal["unreadable"] | None = None
    """The same for `other_cpu_us`."""


PROC = Path("/proc")
CpuSource = Literal["schedstat", "stat"]


@dataclass(frozen=True, kw_only=True)
class CpuTime:
    seconds: float
    """CPU time so far of every thread of a process."""
    source: CpuSource
    """Where it was read: each thread's schedstat (nanoseconds), or, on a kernel without those,
    the process's stat (utime + stime, in clock ticks: 10 ms on most kernels)."""


def cpu_time(pid: int, proc: Path = PROC, *, ticks_per_s: int | None = None) -> CpuTime | None:
    """CPU time so far of every thread of process `pid`, from the /proc at `proc`; None when
    neither source can be read (never 0). A thread that ends between two reads takes its time
    with it; the servers compared keep theirs."""
    if (ns := _schedstat_ns(proc / str(pid) / "task")) is not None:
        return CpuTime(seconds=ns / 1e9, source="schedstat")
    if (ticks := _stat_ticks(proc / str(pid) / "stat")) is not None:
        return CpuTime(seconds=ticks / (ticks_per_s or os.sysconf("SC_CLK_TCK")), source="stat")
    return None


def _schedstat_ns(tasks: Path) -> int | None:
    """The sum of every thread's run time in `tasks`; None if any living thread's cannot be read."""
    try:
        threads = list(tasks.iterdir())
    except OSError:
        return None
    total = 0
    for task in threads:
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            if task.exists():  # the thread lives on: this kernel keeps no per-thread schedstat
                return None
        except (OSError, ValueError, IndexError):  # unreadable, or not the format expected
            return None
    return total if threads else None


def _stat_ticks(stat: Path) -> int | None:
    """utime + stime of the stat file `stat`; None if it cannot be read. Its fields are counted
    after the command's closing bracket: the command may hold spaces and brackets itself."""
    try:
        fields = stat.read_text().rpartition(")")[2].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return None


def listens_on(pid: int, port: int, proc: Path = PROC) -> bool | None:
    """Whether process `pid` holds a socket listening on TCP `port` (IPv4 or IPv6), read from the
    /proc at `proc`: False for a process that does not, such as the shell, `npx` or `make` that
    started the server as a child, or for no process at all; None when /proc cannot say (another
    user's process, one in another network namespace: a container's)."""
    inodes = _listening(port, proc)
    if inodes is None or _elsewhere(pid, proc):
        return None
    if not (proc / str(pid)).exists():
        return None if proc == PROC and _hidden(pid) else False
    return _holds(pid, inodes, proc)


def fellow_listeners(pid: int, port: int, proc: Path = PROC) -> list[int]:
    """The parent and children of `pid` listening on `port` too: a server of several processes
    (uvicorn's `--workers`, a supervisor and its workers), whose CPU no one of them shows."""
    inodes = _listening(port, proc)
    if not inodes:
        return []
    family = [p for p in (*_children(pid, proc), _parent(pid, proc)) if p is not None]
    return sorted(p for p in family if _holds(p, inodes, proc))


def _listening(port: int, proc: Path) -> set[str] | None:
    """The fd link names of the sockets listening on TCP `port`; None if neither table can be read."""
    inodes, readable = set(), False
    for table in ("tcp", "tcp6"):
        try:
            rows = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for row in rows:  # sl local_address rem_address st ... inode: st 0A is LISTEN
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    return inodes if readable else None


def _elsewhere(pid: int, proc: Path) -> bool:
    """Whether `pid` lives in another network namespace, whose sockets this one's tables do not list."""
    try:
        return os.readlink(proc / str(pid) / "ns" / "net") != os.readlink(proc / "self" / "ns" / "net")
    except OSError:
        return False


def _hidden(pid: int) -> bool:
    """Whether a process without a /proc entry lives all the same (/proc mounted with `hidepid`)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holds(pid: int, inodes: set[str], proc: Path) -> bool | None:
    try:
        fds = list((proc / str(pid) / "fd").iterdir())
    except FileNotFoundError:  # gone
        return False
    except OSError:  # another user's process
        return None
    for fd in fds:
        try:
            if os.readlink(fd) in inodes:
                return True
        except OSError:  # closed since it was listed
            continue
    return False


def _parent(pid: int, proc: Path) -> int | None:
    try:
        return int((proc / str(pid) / "stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _children(pid: int, proc: Path) -> list[int]:
    found = []
    for entry in proc.iterdir():
        if entry.name.isdigit() and entry.name != str(pid) and _parent(int(entry.name), proc) == pid:
            found.append(int(entry.name))
    return found


def executable(pid: int, proc: Path = PROC) -> str:
    """The program process `pid` runs (its interpreter, for a Python or Node server): the build
    decides much of a server's cost, so a comparison names it; "unknown" when /proc cannot say."""
    try:
        return os.readlink(proc / str(pid) / "exe")
    except OSError:
        return "unknown"


def cpus(pid: int) -> str:
    """The cores process `pid` may run on, as `taskset -c` names them ("0-1", "0,2"): on a small
    machine, whether a server shares the client's core moves its cost (docs/benchmarks.md, "Where
    the processes run"), so a comparison names it; "unknown" when the system cannot say (no such
    call, or the process has gone)."""
    if pid < 1:  # to the system, 0 is the caller: not the process named
        return "unknown"
    try:
        return core_list(os.sched_getaffinity(pid))
    except (AttributeError, OSError):
        return "unknown"


def core_list(cores: Iterable[int]) -> str:
    """`cores` as `taskset -c` lists them: runs of consecutive cores as ranges ("0,2-3,5")."""
    runs: list[list[int]] = []
    for core in sorted(cores):
        if runs and core == runs[-1][1] + 1:
            runs[-1][1] = core
        else:
            runs.append([core, core])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _answered(response: httpx.Response) -> None:
    """A 200 carrying a chat completion, else the reason the comparison cannot go on."""
    url = response.request.url
    if response.status_code != 200:
        raise RuntimeError(f"{url} answered {response.status_code}: {response.text[:300]}")
    try:
        choices = response.json().get("choices")
    except ValueError:
        choices = None
    if not choices:
        raise RuntimeError(f"{url} answered 200 without a chat completion: {response.text[:300]}")


class _Closed(RuntimeError):
    """The server closed the connection before its answer was whole."""


class _Connection:
    """One keep-alive HTTP/1.1 connection over a plain socket, posting JSON bodies."""

    def __init__(self, url: httpx.URL) -> None:
        self.url = url
        self.sock = socket.create_connection((url.host, url.port or 80))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def _receive(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise _Closed(f"{self.url} closed the connection mid-response")
        self.buffer += chunk

    def _until(self, mark: bytes) -> bytes:
        while (end := self.buffer.find(mark)) < 0:
            self._receive()
        found, self.buffer = self.buffer[:end], self.buffer[end + len(mark):]
        return found

    def _exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._receive()
        found, self.buffer = self.buffer[:n], self.buffer[n:]
        return found

    def exchange(self, request: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
        self.sock.sendall(request)
        status_line, *lines = self._until(b"\r\n\r\n").split(b"\r\n")
        headers = {}
        for header in lines:
            name, _, value = header.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if b"content-length" in headers:
            content = self._exactly(int(headers[b"content-length"]))
        elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            parts = []
            while size := int(self._until(b"\r\n").split(b";")[0], 16):
                parts.append(self._exactly(size))
                self._exactly(2)
            while self._until(b"\r\n"):  # trailers, up to the empty line
                pass
            content = b"".join(parts)
        else:
            raise RuntimeError(f"{self.url} answered without a length: {status_line!r}")
        return int(status_line.split()[1]), headers, content


class RawClient:
    """Keep-alive HTTP/1.1 over plain sockets, one connection per thread: a client doing next to
    nothing, as a load tool written in C, Go or Rust does, so each server's own cost weighs in the
    wall time (httpx's pure-Python HTTP costs a few hundred microseconds per request, the same on
    both sides, which draws every ratio towards 1)."""

    def __init__(self, base_url: str) -> None:
        self.url = httpx.URL(base_url)
        host = self.url.host.encode() + (b":%d" % self.url.port if self.url.port else b"")
        self._head = (b"POST %s/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                      % (self.url.raw_path.rstrip(b"/"), host))
        self._local = threading.local()
        self._opened: list[_Connection] = []

    def post(self, body: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
        """POST `body` to the chat completions path; the answer's status, headers and body."""
        request = self._head + b"Content-Length: %d\r\n\r\n" % len(body) + body
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            try:
                return connection.exchange(request)
            except (ConnectionError, _Closed):  # closed while idle (its keep-alive timeout): reopen once
                connection.sock.close()
        connection = self._local.connection = _Connection(self.url)
        self._opened.append(connection)
        return connection.exchange(request)

    def close(self) -> None:
        for connection in self._opened:
            connection.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


Client = httpx.Client | RawClient


def _timed(client: Client, body: bytes) -> float:
    """Wall seconds of one request (the answer checked after the clock stops)."""
    if isinstance(client, httpx.Client):
        return timed(client, body, check=_answered)[0]
    started = time.perf_counter()
    status, headers, content = client.post(body)
    wall = time.perf_counter() - started
    request = httpx.Request("POST", client.url.join("chat/completions"))
    _answered(httpx.Response(status, headers=list(headers.items()), content=content, request=request))
    return wall


def _per_request(before: CpuTime | None, after: CpuTime | None,
                 samples: int) -> tuple[float | None, CpuSource | Literal["unreadable"]]:
    """Microseconds of CPU per request between two readings, and their source."""
    if before is None or after is None or before.source != after.source:
        return None, "unreadable"
    return (after.seconds - before.seconds) / samples * 1e6, after.source


def compare(mock: Client, other: Client, turn: int, *, samples: int, connections: int = 1,
            pids: tuple[int | None, int | None] = (None, None), proc: Path = PROC) -> Against:
    """Interleaved per-request times of `samples` conversations at `turn`, `connections` at a time
    (see the module doc); `pids`, the mock's and the other server's, for their CPU per request
    (read from the /proc at `proc`)."""
    tasks = [f"{TASK} (run {k} of a {samples}-run suite)" for k in range(samples)]
    bodies = [request_body(turn, task=task) for task in tasks]
    clients = (mock, other)
    with ThreadPoolExecutor(max_workers=connections) as pool:

        def post_all(client: Client, batch: list[bytes]) -> list[float]:
            if connections == 1:
                return [_timed(client, body) for body in batch]
            return list(pool.map(lambda body: _timed(client, body), batch))

        for client in clients:  # each conversation's previous turn, the connections opened
            for k in range(0, samples, connections):
                post_all(client, [request_body(turn - 1, task=task) for task in tasks[k:k + connections]])
        cpu = [None if pid is None else cpu_time(pid, proc) for pid in pids]
        rows = []
        for r, k in enumerate(range(0, samples, connections)):
            walls: dict[int, list[float]] = {}
            for j in (r % 2, (r + 1) % 2):  # each server goes first every other round
                walls[j] = post_all(clients[j], bodies[k:k + connections])
            rows.extend(zip(walls[0], walls[1], strict=True))
        spent = [(None, None) if pid is None else _per_request(c, cpu_time(pid, proc), samples)
                 for pid, c in zip(pids, cpu, strict=True)]
    mock_s = statistics.median(m for m, _ in rows)
    other_s = statistics.median(o for _, o in rows)
    return Against(turn=turn, samples=samples, client="raw" if isinstance(mock, RawClient) else "httpx",
                   connections=connections, mock_us=mock_s * 1e6,
                   other_us=other_s * 1e6, ratio=mock_s / other_s,
                   paired=statistics.median(m / o for m, o in rows),
                   mock_cpu_us=spent[0][0], other_cpu_us=spent[1][0],
                   mock_cpu_source=spent[0][1], other_cpu_source=spent[1][1])


@contextmanager
def mock_side(mock_url: str | None = None) -> Iterator[tuple[str, int | None]]:
    """Our mock's `/v1` URL and pid: its own process, unless `mock_url` names one running (whose
    pid is not known here)."""
    if mock_url is not None:
        yield mock_url, None
        return
    with mock_server() as (url, proc):
        yield url, proc.pid


@contextmanager
def clients(url: str, mock_url: str | None = None, *,
            kind: Literal["httpx", "raw"] = "httpx") -> Iterator[tuple[Client, Client]]:
    """A keep-alive client of `kind` for our mock (its own process unless `mock_url` is given) and
    one for `url`."""
    with ExitStack() as stack:
        mock_url, _ = stack.enter_context(mock_side(mock_url))
        mock, other = (stack.enter_context(httpx.Client(base_url=u, headers=HEADERS) if kind == "httpx"
                                           else RawClient(u)) for u in (mock_url, url))
        yield mock, other


def _cpu_figure(us: float | None, source: str | None) -> str:
    """One server's CPU per request as `line` prints it, its source named; never 0 for unknown."""
    if us is None:
        return "unknown" if source is None else "unknown (/proc unreadable)"
    return f"{us:,.0f} us ({source})"


def line(result: Against) -> str:
    text = (f"turn {result.turn}: p50 mock {result.mock_us:,.0f} us, other {result.other_us:,.0f} us; "
            f"mock / other {result.ratio:.3f}x (median of paired ratios {result.paired:.3f}x, "
            f"{result.samples} samples")
    if result.client != "httpx":
        text += f", {result.client} client"
    if result.connections > 1:
        text += f", {result.connections} connections"
    text += ")"
    if result.mock_cpu_source is not None or result.other_cpu_source is not None:
        mock = _cpu_figure(result.mock_cpu_us, result.mock_cpu_source)
        other = _cpu_figure(result.other_cpu_us, result.other_cpu_source)
        text += f"; server CPU per request mock {mock}, other {other}"
        if result.mock_cpu_us is not None and result.other_cpu_us:
            text += f", mock / other {result.mock_cpu_us / result.other_cpu_us:.3f}x"
    return text


WAIT_S = 10.0
"""How long `main` waits for a server it was pointed at to accept connections."""


def listening(url: str, *, seconds: float = WAIT_S) -> bool:
    """Whether the server at `url` accepts a TCP connection within `seconds`."""
    address = httpx.URL(url)
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection((address.host, _port(url)), timeout=1).close()
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the other server's base URL, ending in /v1")
    parser.add_argument("--mock-url", help="our mock's base URL, if already running (default: start one)")
    parser.add_argument("--mock-pid", type=_pid, help="the pid of the mock at --mock-url, for its CPU")
    parser.add_argument("--other-pid", type=_pid, help="the other server's pid, for its CPU per request")
    parser.add_argument("--turns", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--samples", type=int, default=200, help="conversations per turn")
    parser.add_argument("--client", choices=("httpx", "raw"), default="httpx",
                        help="httpx (what agents use) or raw, keep-alive HTTP/1.1 over a plain socket, "
                        "as light as a load tool (default httpx)")
    parser.add_argument("--connections", type=int, default=1,
                        help="keep-alive connections per server, each with a request in flight (default 1)")
    args = parser.parse_args(argv)
    if min(args.turns) < 1 or args.samples < 1 or args.connections < 1:
        parser.error("--turns, --samples and --connections must be at least 1")
    if args.mock_pid is not None and args.mock_url is None:
        parser.error("--mock-pid names the process of the mock at --mock-url (the mock started here is read)")
    for url in (args.url, args.mock_url):  # started a moment ago, with `&`, as docs/benchmarks.md does
        if url is not None and not listening(url, seconds=WAIT_S):
            parser.error(f"nothing listens at {url} (waited {WAIT_S:.0f} s)")
    named = (("--mock-pid", args.mock_pid, args.mock_url), ("--other-pid", args.other_pid, args.url))
    for flag, pid, url in named:
        # A wrapper's pid would read as a server that costs nothing.
        if pid is not None and listens_on(pid, _port(url)) is False:
            parser.error(f"{flag} {pid} is not the process listening at {url}: give the server's own pid "
                         "(a shell, `npx` or `make` runs it as a child)")
        if pid is not None and (fellows := fellow_listeners(pid, _port(url))):
            parser.error(f"{flag} {pid} shares the socket listening at {url} with processes "
                         f"{', '.join(map(str, fellows))}: no one process of a server of several (uvicorn's "
                         "--workers) shows its CPU; run it as one process")
    with ExitStack() as stack:
        mock_url, mock_pid = stack.enter_context(mock_side(args.mock_url))
        mock, other = stack.enter_context(clients(args.url, mock_url, kind=args.client))
        pids = (mock_pid if args.mock_pid is None else args.mock_pid, args.other_pid)
        for turn in args.turns:
            result = compare(mock, other, turn, samples=args.samples, connections=args.connections, pids=pids)
            print(line(result), flush=True)
        programs = [f"{side} pid {pid} runs {executable(pid)} on cpus {cpus(pid)}"
                    for side, pid in zip(("mock", "other"), pids, strict=True) if pid is not None]
        client = f"client on cpus {cpus(os.getpid())}"
        print(f"servers: {', '.join(programs)}; {client}" if programs else client, flush=True)
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)


def _pid(text: str) -> int:
    """A process id: 0 and below name no one process (to the system they mean the caller, or a group)."""
    try:
        pid = int(text)
    except ValueError:
        pid = 0
    if pid < 1:
        raise argparse.ArgumentTypeError(f"expected a process id (a whole number from 1), got {text!r}")
    return pid


def _port(url: str) -> int:
    address = httpx.URL(url)
    return address.port or (443 if address.scheme == "https" else 80)


if __name__ == "__main__":
    main()
