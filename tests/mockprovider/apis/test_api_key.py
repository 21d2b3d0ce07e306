"""The mock's key from MOCK_API_KEY or --api-key-file, so it never shows on a command line."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from experiments.lab.servers import uvicorn_process

CHAT = {"model": "plan", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("source", ["file", "environment"])
def test_the_key_can_come_from_a_file_or_the_environment(source, tmp_path, monkeypatch):
    key = "s3cret-from-" + source
    argv = [sys.executable, "-m", "mockprovider", "--port", "0", "--quiet"]
    if source == "file":
        (tmp_path / "key").write_text(key + "\n")
        argv += ["--api-key-file", str(tmp_path / "key")]
    else:
        monkeypatch.setenv("MOCK_API_KEY", key)
    with uvicorn_process(argv, name="the mock") as (origin, proc):
        assert key not in " ".join(proc.args)
        with httpx.Client(base_url=f"{origin}/v1") as client:
            assert client.post("/chat/completions", json=CHAT).status_code == 401
            keyed = client.post("/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"})
            assert keyed.status_code == 200


def test_an_empty_key_file_is_refused_with_a_clear_message(tmp_path):
    (tmp_path / "key").write_text("\n")
    result = subprocess.run(
        [sys.executable, "-m", "mockprovider", "--api-key-file", str(tmp_path / "key")],
        capture_output=True, text=True, timeout=60, env={**os.environ, "MOCK_API_KEY": ""},
    )
    assert result.returncode == 2 and "holds no key" in result.stderr
