"""The package from outside: its public API, and `python -m mockprovider` as a real process."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx

import mockprovider
from mockprovider.server import free_port


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    with httpx.Client() as client:
        while True:
            assert proc.poll() is None, "the server exited before it answered /healthz"
            try:
                if client.get(f"{url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not answer /healthz in time"
            time.sleep(0.05)


def test_python_m_mockprovider_serves_and_exits_on_sigterm():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "mockprovider", "--port", str(port), "--api-key", "k"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        try:
            _wait_healthy(url, proc)
            with httpx.Client(base_url=f"{url}/v1", headers={"authorization": "Bearer k"}) as client:
                response = client.post(
                    "/chat/completions",
                    json={"model": "plan", "messages": [{"role": "user", "content": "hi"}],
                          "tools": [{"type": "function", "function": {"name": "list_files"}}]},
                )
            assert response.status_code == 200
            assert response.json()["choices"][0]["message"]["tool_calls"][0]["id"] == "c1"
        finally:
            proc.send_signal(signal.SIGTERM)
            output, _ = proc.communicate(timeout=10)
    # uvicorn shuts down gracefully, then re-raises the signal it caught (so -SIGTERM, not 0).
    assert proc.returncode in (0, -signal.SIGTERM)
    assert "Finished server process" in output
    assert "model=plan turn=0 attempt=0 status=ok" in output


def test_public_api_is_pinned():
    assert sorted(mockprovider.__all__) == [
        "Conversation",
        "Fault",
        "Options",
        "Reply",
        "SCENARIOS",
        "ToolCall",
        "count",
        "create_app",
        "message_tokens",
        "prompt_tokens",
        "serve_in_thread",
        "tools_tokens",
    ]
    assert all(hasattr(mockprovider, name) for name in mockprovider.__all__)
