"""`experiments.bench.against`: the mock timed beside another chat server on loopback, briefly."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from experiments.bench import against
from experiments.bench.floor import bare_app, reply_floor_app, request_body, teach
from mockprovider.app import create_app
from mockprovider.server import PromptServer, free_port, serve_in_thread


def test_the_mock_in_its_own_process_is_timed_beside_another_server_on_the_same_bodies():
    other = reply_floor_app()  # answers a mock's chat completion, as another mock would
    with serve_in_thread(other) as url, against.clients(url) as (mock, client):
        teach(other, mock.post("/chat/completions", content=request_body(1, task="an imitated reply")))
        result = against.compare(mock, client, 3, samples=4)
    assert (result.turn, result.samples) == (3, 4)
    assert result.mock_us > 0 and result.other_us > 0
    assert result.ratio == pytest.approx(result.mock_us / result.other_us)
    assert result.paired > 0


def test_the_command_prints_each_turns_p50s_their_ratio_and_the_load(capsys):
    with serve_in_thread() as mock_url, serve_in_thread() as other_url:
        against.main(["--url", other_url, "--mock-url", mock_url, "--turns", "1", "2", "--samples", "3"])
    lines = capsys.readouterr().out.splitlines()
    pattern = r"turn {}: p50 mock [\d,]+ us, other [\d,]+ us; mock / other \d+\.\d+x .*3 samples\)"
    assert re.fullmatch(pattern.format(1), lines[0])
    assert re.fullmatch(pattern.format(2), lines[1])
    assert lines[2] == f"client on cpus {against.cpus(os.getpid())}"  # no pid given: only the client named
    assert lines[3].startswith("load average: ")


def test_a_server_answering_without_a_chat_completion_stops_the_comparison_naming_it():
    with serve_in_thread(bare_app()) as url, serve_in_thread() as mock_url:
        with pytest.raises(RuntimeError, match="answered 200 without a chat completion"):
            against.main(["--url", url, "--mock-url", mock_url, "--turns", "1", "--samples", "2"])


def test_a_server_refusing_the_body_stops_the_comparison_with_its_status():
    with serve_in_thread(api_key="not-sent") as url, serve_in_thread() as mock_url:
        with pytest.raises(RuntimeError, match="answered 401"):
            against.main(["--url", url, "--mock-url", mock_url, "--turns", "1", "--samples", "2"])


def _chunked_app(*, close: bool = False) -> Starlette:
    """Answers a chat completion in two chunks of unknown total (as aimock does), optionally
    closing the connection after each answer."""

    async def endpoint(request: Request) -> StreamingResponse:
        await request.body()

        async def parts():
            yield b'{"object": "chat.completion", '
            yield b'"choices": [{"index": 0}]}'

        return StreamingResponse(parts(), media_type="application/json",
                                 headers={"connection": "close"} if close else None)

    return Starlette(routes=[Route("/v1/chat/completions", endpoint, methods=["POST"])])


def test_the_raw_client_reads_a_chunked_answer_whole():
    with serve_in_thread(_chunked_app()) as url, against.RawClient(url) as client:
        status, headers, content = client.post(request_body(1))
    assert status == 200 and headers[b"transfer-encoding"] == b"chunked"
    assert content == b'{"object": "chat.completion", "choices": [{"index": 0}]}'


def test_the_raw_client_reopens_a_connection_the_server_closed():
    with serve_in_thread(_chunked_app(close=True)) as url, against.RawClient(url) as client:
        answers = [client.post(request_body(1))[0] for _ in range(3)]
    assert answers == [200, 200, 200]


def test_the_raw_client_times_the_mock_beside_another_server_on_the_same_bodies():
    with serve_in_thread(_chunked_app()) as url, against.clients(url, kind="raw") as (mock, other):
        assert isinstance(mock, against.RawClient) and isinstance(other, against.RawClient)
        result = against.compare(mock, other, 2, samples=4)
    assert (result.turn, result.samples, result.client) == (2, 4, "raw")
    assert result.mock_us > 0 and result.other_us > 0


def test_with_connections_each_round_sends_that_many_bodies_at_once():
    with serve_in_thread() as mock_url, serve_in_thread(_chunked_app()) as url:
        with against.clients(url, mock_url, kind="raw") as (raw, other):
            result = against.compare(raw, other, 1, samples=6, connections=3)
        with against.clients(url, mock_url) as (mock, other):  # httpx's pool opens the connections
            pooled = against.compare(mock, other, 1, samples=4, connections=2)
    assert (result.connections, result.samples) == (3, 6)
    assert (pooled.connections, pooled.samples) == (2, 4)
    assert 1 < len(raw._opened) <= 3  # a connection per thread of the pool, which runs a round at once


def test_the_command_prints_each_servers_cpu_per_request_when_its_pid_is_known(capsys):
    with serve_in_thread() as other_url:  # served by this process: its pid is ours
        against.main(["--url", other_url, "--other-pid", str(os.getpid()), "--turns", "1", "--samples", "3",
                      "--client", "raw", "--connections", "2"])
    first = capsys.readouterr().out.splitlines()[0]
    assert re.fullmatch(r"turn 1: .*3 samples, raw client, 2 connections\); server CPU per request "
                        r"mock [\d,]+ us \(schedstat\), other [\d,]+ us \(schedstat\), "
                        r"mock / other \d+\.\d+x", first)


def test_a_process_cpu_time_grows_as_it_works():
    before = against.cpu_time(os.getpid())
    sum(range(3_000_000))
    after = against.cpu_time(os.getpid())
    assert before is not None and after is not None and after.seconds > before.seconds
    assert after.source == before.source


def _fake_proc(root: Path, pid: int, *, schedstat: dict[int, str] | None = None, stat: str | None = None,
               tids: tuple[int, ...] = (1, 2)) -> Path:
    """A /proc holding process `pid` with threads `tids`: `schedstat` each thread's file (a missing
    thread: none, as on a kernel without it), `stat` the process's stat line (None: no file)."""
    for tid in tids:
        task = root / str(pid) / "task" / str(tid)
        task.mkdir(parents=True)
        if schedstat is not None and tid in schedstat:
            (task / "schedstat").write_text(schedstat[tid])
    if stat is not None:
        (root / str(pid) / "stat").write_text(stat)
    return root


STAT = "42 (a (strange) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 2 0 1 1 1\n"
"""A stat line whose comm holds spaces and brackets: utime 250 ticks, stime 50."""


def test_cpu_time_is_every_threads_schedstat_in_seconds(tmp_path):
    proc = _fake_proc(tmp_path, 42, schedstat={1: "1500000000 20 3\n", 2: "500000000 1 1\n"}, stat=STAT)
    assert against.cpu_time(42, proc) == against.CpuTime(seconds=2.0, source="schedstat")


def test_without_per_thread_schedstat_cpu_time_is_read_from_stat_in_clock_ticks(tmp_path):
    proc = _fake_proc(tmp_path, 42, stat=STAT)  # the task folders are there, their schedstat not
    assert against.cpu_time(42, proc, ticks_per_s=100) == against.CpuTime(seconds=3.0, source="stat")


def test_one_threads_schedstat_missing_is_not_read_as_zero(tmp_path):
    proc = _fake_proc(tmp_path, 42, schedstat={1: "1500000000 20 3\n"}, stat=STAT)
    assert against.cpu_time(42, proc, ticks_per_s=100) == against.CpuTime(seconds=3.0, source="stat")


@pytest.mark.parametrize("broken", ["a folder", "not a number", "empty"])
def test_an_unreadable_schedstat_falls_back_to_stat(tmp_path, broken):
    proc = _fake_proc(tmp_path, 42, schedstat={1: "1500000000 20 3\n", 2: "x"}, stat=STAT)
    bad = proc / "42" / "task" / "2" / "schedstat"
    bad.unlink()
    if broken == "a folder":  # unreadable whoever we are (root reads any file, not a folder)
        bad.mkdir()
    else:
        bad.write_text({"not a number": "soon\n", "empty": ""}[broken])
    assert against.cpu_time(42, proc, ticks_per_s=100) == against.CpuTime(seconds=3.0, source="stat")


@pytest.mark.parametrize("stat", [None, "42 (x) S 1\n", "garbage"])
def test_with_neither_schedstat_nor_a_readable_stat_cpu_time_is_unknown_not_zero(tmp_path, stat):
    assert against.cpu_time(42, _fake_proc(tmp_path, 42, stat=stat)) is None
    assert against.cpu_time(7, tmp_path) is None  # no such process


def test_cpu_per_request_is_unknown_when_the_proc_tree_cannot_say_and_printed_so(tmp_path):
    proc = _fake_proc(tmp_path / "none", os.getpid())  # task folders without schedstat, no stat
    fallback = _fake_proc(tmp_path / "stat", os.getpid(), stat=STAT)
    with serve_in_thread() as mock_url, serve_in_thread() as url:
        with against.clients(url, mock_url) as (mock, other):
            unknown = against.compare(mock, other, 1, samples=2, pids=(os.getpid(), None), proc=proc)
            ticks = against.compare(mock, other, 1, samples=2, pids=(os.getpid(), None), proc=fallback)
            real = against.compare(mock, other, 1, samples=2, pids=(os.getpid(), os.getpid()))
    assert (unknown.mock_cpu_us, unknown.mock_cpu_source) == (None, "unreadable")
    assert (unknown.other_cpu_us, unknown.other_cpu_source) == (None, None)  # no pid given
    assert "server CPU per request mock unknown (/proc unreadable), other unknown" in against.line(unknown)
    assert (ticks.mock_cpu_us, ticks.mock_cpu_source) == (0.0, "stat")  # the fake stat stays put
    assert "mock 0 us (stat), other unknown" in against.line(ticks)
    assert real.mock_cpu_source == real.other_cpu_source == "schedstat" and real.mock_cpu_us > 0
    both = r"mock [\d,]+ us \(schedstat\), other [\d,]+ us \(schedstat\), mock / other"
    assert re.search(both, against.line(real))


def test_a_mock_pid_without_the_mock_url_is_refused(capsys):
    with pytest.raises(SystemExit):
        against.main(["--url", "http://127.0.0.1:9/v1", "--mock-pid", "1"])
    assert "--mock-pid names the process of the mock at --mock-url" in capsys.readouterr().err


def test_the_command_waits_for_a_server_started_a_moment_before_it(capsys):
    """A server started with `&` just before the command (as docs/benchmarks.md shows) is waited for:
    its port refuses connections for half a second, then a mock listens on it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    late = PromptServer(uvicorn.Config(create_app(), log_level="warning", lifespan="off"))
    starter = threading.Timer(0.5, late.run, kwargs={"sockets": [sock]})
    starter.start()
    try:
        with serve_in_thread() as mock_url:
            against.main(["--url", f"http://127.0.0.1:{sock.getsockname()[1]}/v1", "--mock-url", mock_url,
                          "--turns", "1", "--samples", "2"])
    finally:
        starter.cancel()
        late.stop()
        starter.join(10)
        sock.close()
    assert re.search(r"turn 1: p50 mock [\d,]+ us", capsys.readouterr().out)


def test_a_url_where_nothing_listens_is_refused_naming_it(capsys, monkeypatch):
    monkeypatch.setattr(against, "WAIT_S", 0.3)
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(SystemExit):
        against.main(["--url", url, "--mock-url", "http://127.0.0.1:9/v1"])
    assert f"nothing listens at {url}" in capsys.readouterr().err


def test_the_command_names_the_program_each_server_with_a_pid_runs(capsys):
    with serve_in_thread() as other_url:  # served by this process: its pid is ours
        against.main(["--url", other_url, "--other-pid", str(os.getpid()), "--turns", "1", "--samples", "2",
                      "--client", "raw"])
    out = capsys.readouterr().out
    program = os.path.realpath(sys.executable)
    ours = re.escape(against.cpus(os.getpid()))
    assert re.search(rf"^servers: mock pid \d+ runs \S+ on cpus [\d,-]+, other pid {os.getpid()} runs "
                     rf"{re.escape(program)} on cpus {ours}; client on cpus {ours}$", out, re.M), out


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _: ())(0)) < 2,
                    reason="a server pinned apart needs two cores to choose from")
def test_the_command_names_the_cores_each_server_and_the_client_may_run_on(capsys):
    """Whether a server shares the client's core moves its cost (docs/benchmarks.md, "Where the
    processes run"): a mock pinned to one core is named on it, beside this process's own cores."""
    ours = os.sched_getaffinity(0)
    core = min(ours)
    port = free_port()
    serve = (f"import os; os.sched_setaffinity(0, {{{core}}}); from mockprovider.__main__ import serve; "
             f"serve(['--quiet', '--port', '{port}'])")
    pinned = subprocess.Popen([sys.executable, "-c", serve])
    try:
        with serve_in_thread() as other_url:
            against.main(["--mock-url", f"http://127.0.0.1:{port}/v1", "--mock-pid", str(pinned.pid),
                          "--url", other_url, "--other-pid", str(os.getpid()),
                          "--turns", "1", "--samples", "2", "--client", "raw"])
    finally:
        pinned.kill()
        pinned.wait()
    listed = against.core_list(ours)
    assert re.search(rf"^servers: mock pid {pinned.pid} runs \S+ on cpus {core}, "
                     rf"other pid {os.getpid()} runs \S+ on cpus {listed}; client on cpus {listed}$",
                     capsys.readouterr().out, re.M)
    assert against.cpus(pinned.pid) == "unknown"  # gone, and reaped
    assert against.cpus(0) == "unknown"  # to the system, the caller: no server


def test_cores_are_listed_as_taskset_lists_them():
    assert against.core_list({5, 0, 3, 2}) == "0,2-3,5"
    assert against.core_list(range(4)) == "0-3"
    assert against.core_list([7]) == "7"


@pytest.mark.parametrize("pid", ["0", "-1", "x", "²"])
def test_a_pid_that_names_no_one_process_is_refused(capsys, pid):
    """0 would read as the client itself (and -1 as every process it may signal)."""
    with pytest.raises(SystemExit):
        against.main(["--url", "http://127.0.0.1:9/v1", "--other-pid", pid])
    assert "expected a process id" in capsys.readouterr().err


def test_a_pid_that_does_not_listen_at_its_url_is_refused_naming_it(capsys):
    """The pid of what started the server (a shell, npx) would read as a server that costs nothing."""
    wrapper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with serve_in_thread() as other_url:
            with pytest.raises(SystemExit):
                against.main(["--url", other_url, "--other-pid", str(wrapper.pid), "--samples", "1"])
    finally:
        wrapper.kill()
        wrapper.wait()
    err = capsys.readouterr().err
    assert f"--other-pid {wrapper.pid} is not the process listening at {other_url}" in err


def test_a_process_listens_on_a_port_only_while_it_holds_that_listening_socket():
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    try:
        assert against.listens_on(os.getpid(), port) is True
        assert against.listens_on(os.getpid(), free_port()) is False
    finally:
        sock.close()
    assert against.listens_on(os.getpid(), port) is False


def _fake_tables(root: Path, *, tcp: str = "", tcp6: str = "") -> None:
    (root / "net").mkdir(parents=True)
    header = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout"
              "  inode\n")
    (root / "net" / "tcp").write_text(header + tcp)
    (root / "net" / "tcp6").write_text(header + tcp6)


def test_listening_is_read_from_either_tcp_table_and_only_in_the_listen_state(tmp_path):
    # Port 4010 is 0FAA: listening over IPv6 (inode 222); over IPv4 only connected (st 01, inode 111).
    _fake_tables(tmp_path,
                 tcp="   0: 0100007F:0FAA 0100007F:9C40 01 00000000:00000000 00:00000000 00000000 0 0 111 1"
                     "\n",
                 tcp6="   0: 00000000000000000000000001000000:0FAA 00000000000000000000000000000000:0000 0A "
                      "00000000:00000000 00:00000000 00000000 0 0 222 1\n")
    fds = tmp_path / "7" / "fd"
    fds.mkdir(parents=True)
    (fds / "3").symlink_to("socket:[111]")
    assert against.listens_on(7, 4010, tmp_path) is False  # a connection on that port, not its listener
    (fds / "4").symlink_to("socket:[222]")
    assert against.listens_on(7, 4010, tmp_path) is True
    assert against.listens_on(7, 4011, tmp_path) is False
    assert against.listens_on(8, 4010, tmp_path) is False  # no such process


def test_without_readable_tables_or_fds_listening_is_unknown_not_refused(tmp_path):
    assert against.listens_on(7, 4010, tmp_path) is None  # no /proc/net at all
    _fake_tables(tmp_path)
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "fd").write_text("")  # fds that cannot be listed, as another user's (not a folder)
    assert against.listens_on(7, 4010, tmp_path) is None
    assert against.executable(7, tmp_path) == "unknown"


def test_a_process_in_another_network_namespace_is_not_refused(tmp_path):
    """Its sockets are not in this namespace's tables (a container's server): unknown, not False."""
    _fake_tables(tmp_path)
    for pid, namespace in (("7", "net:[4026531840]"), ("self", "net:[4026532000]")):
        (tmp_path / pid / "ns").mkdir(parents=True)
        (tmp_path / pid / "ns" / "net").symlink_to(namespace)
    (tmp_path / "7" / "fd").mkdir()
    assert against.listens_on(7, 4010, tmp_path) is None


def test_a_supervisor_and_its_workers_listening_on_one_port_are_each_others_fellows(tmp_path):
    listen = ("   0: 0100007F:0FAA 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 222 1"
              "\n")
    _fake_tables(tmp_path, tcp=listen)
    for pid, parent, holds in ((7, 1, True), (8, 7, True), (9, 7, False)):
        (tmp_path / str(pid) / "fd").mkdir(parents=True)
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (python (x)) S {parent} {pid} {pid} 0 -1")
        (tmp_path / str(pid) / "fd" / "3").symlink_to("socket:[222]" if holds else "pipe:[5]")
    assert against.fellow_listeners(7, 4010, tmp_path) == [8]  # 9 is its child, but not a worker
    assert against.fellow_listeners(8, 4010, tmp_path) == [7]
    assert against.fellow_listeners(7, 4011, tmp_path) == []


def test_a_server_of_several_processes_is_refused_naming_the_others(capsys):
    """No one process of a server whose workers share its listening socket shows the server's CPU."""
    sock = socket.create_server(("127.0.0.1", 0))
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], pass_fds=[sock.fileno()])
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        assert against.fellow_listeners(os.getpid(), sock.getsockname()[1]) == [worker.pid]
        with serve_in_thread() as mock_url, pytest.raises(SystemExit):
            against.main(["--url", url, "--other-pid", str(os.getpid()), "--mock-url", mock_url])
    finally:
        worker.kill()
        worker.wait()
        sock.close()
    assert f"shares the socket listening at {url} with processes {worker.pid}" in capsys.readouterr().err
