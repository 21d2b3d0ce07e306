"""`serve_in_thread`: a real uvicorn server that stops as soon as it is asked, yet lets a
response already under way finish."""

from __future__ import annotations

import asyncio
import socket
import threading

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mockprovider import server
from mockprovider.server import serve_in_thread


def _slow_app(arrived: threading.Event) -> Starlette:
    async def slow(request: Request) -> JSONResponse:
        arrived.set()
        await asyncio.sleep(0.3)
        return JSONResponse({"done": True})

    return Starlette(routes=[Route("/v1/slow", slow)])


def test_a_response_under_way_when_the_server_stops_still_arrives_whole():
    arrived, replies = threading.Event(), []
    with serve_in_thread(_slow_app(arrived)) as url:
        asker = threading.Thread(target=lambda: replies.append(httpx.get(f"{url}/slow", timeout=10)))
        asker.start()
        assert arrived.wait(10)
    asker.join(10)
    assert [(r.status_code, r.json()) for r in replies] == [(200, {"done": True})]


def test_a_stopped_server_refuses_new_connections():
    with serve_in_thread() as url:
        assert httpx.get(f"{url}/models").status_code == 200
    try:
        httpx.get(f"{url}/models", timeout=2)
    except httpx.ConnectError:
        return
    raise AssertionError("the server still answered after it stopped")


def test_a_server_that_fails_to_start_closes_its_socket(monkeypatch):
    made = []

    class Recorded(socket.socket):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(server.socket, "socket", Recorded)
    with pytest.raises(RuntimeError, match="did not start"):
        with serve_in_thread("no_such_module_for_this_test:app"):
            pass
    assert made and all(s.fileno() == -1 for s in made)


def test_a_prompt_server_without_a_graceful_timeout_waits_for_the_response_under_way():
    # uvicorn's default (timeout_graceful_shutdown None) waits for in-flight responses without limit.
    arrived, replies = threading.Event(), []
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # the request may come before the server's own start-up listens: queued, not refused
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    prompt = server.PromptServer(uvicorn.Config(_slow_app(arrived), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=prompt.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    asker = threading.Thread(target=lambda: replies.append(httpx.get(f"{url}/slow", timeout=10)))
    try:
        asker.start()
        assert arrived.wait(10)
    finally:
        prompt.stop()
        thread.join(10)
        sock.close()
    asker.join(10)
    assert [(r.status_code, r.json()) for r in replies] == [(200, {"done": True})]


def test_many_started_and_stopped_servers_leave_no_thread_behind():
    before = threading.active_count()
    with httpx.Client() as client:  # a kept-alive connection to each server, open when it stops
        for _ in range(20):
            with serve_in_thread() as url:
                assert client.get(f"{url}/models").status_code == 200
    assert threading.active_count() == before
