"""`GET /metrics` in Prometheus's text format, as a scraper reads it, and `GET /readyz`."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families

from mockprovider.server import free_port, serve_in_thread

ASK = [{"role": "user", "content": "Which file mentions a timeout?"}]


def _samples(url: str) -> dict[tuple[str, tuple[str, ...]], float]:
    """name, label values (in the page's order: route, scenario, status) -> value, as a scraper reads it."""
    page = httpx.get(url.removesuffix("/v1") + "/metrics")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(s.labels.values())): s.value
            for family in text_string_to_metric_families(page.text) for s in family.samples}


def test_metrics_count_requests_by_route_status_and_scenario_time_them_and_count_faults():
    with serve_in_thread(journal=100) as url:
        with openai.OpenAI(base_url=url, api_key="t", max_retries=1) as client:
            client.chat.completions.create(model="plan+fault=429x1", messages=ASK)  # 429, then 200
            client.chat.completions.create(model="recover", messages=ASK)
        root = url.removesuffix("/v1")
        httpx.post(f"{root}/v1beta/models/plan:generateContent",
                   json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
        httpx.post(f"{url}/chat/completions", json={"model": "no-such", "messages": ASK})
        httpx.get(f"{root}/no/such/path")
        seen = _samples(url)
    chat, gemini = "/v1/chat/completions", "/v1beta/models/{model}:{method}"
    requests = "mockprovider_requests_total"
    assert seen[(requests, (chat, "plan", "429"))] == seen[(requests, (chat, "plan", "200"))] == 1
    assert seen[(requests, (chat, "recover", "200"))] == 1
    assert seen[(requests, (gemini, "plan", "200"))] == 1
    assert seen[(requests, (chat, "", "404"))] == seen[(requests, ("unmatched", "", "404"))] == 1
    assert seen[("mockprovider_request_seconds_count", (chat,))] == 4
    assert seen[("mockprovider_faults_injected_total", ("429",))] == 1
    assert seen[("mockprovider_journal_entries", ())] == 5  # every body read: the 404 path had none
    assert seen[("mockprovider_journal_bytes", ())] > 0


def test_a_model_named_in_the_url_adds_no_series():
    """Gemini names the model in the path: the route's template is the label, whatever the model."""
    with serve_in_thread() as url:
        root = url.removesuffix("/v1")
        for k in range(20):
            httpx.post(f"{root}/v1beta/models/m{k}:generateContent", json={"contents": []})
        seen = _samples(url)
    routes = {labels[0] for name, labels in seen if name == "mockprovider_requests_total"}
    assert routes == {"/v1beta/models/{model}:{method}"}


def test_readyz_says_ready_with_the_scenarios_served():
    with serve_in_thread(scenario_files=[{"name": "extra", "turns": [{"content": "x"}]}]) as url:
        ready = httpx.get(url.removesuffix("/v1") + "/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready" and ready.json()["scenarios"] > 1


def test_the_ci_recipe_serves_parallel_tests_apart_from_one_process(tmp_path):
    """docs/mock.md's shared mock: its first line as a real process (a free port for 8000, the
    docs' scenario folder made here), ready by /readyz, two tests' requests told apart."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "mock.md").read_text()
    recipe = re.search(r"## Operations.*?```sh\n(.*?)```", page, re.S)[1].splitlines()[0]
    port = free_port()
    argv = shlex.split(recipe.replace("8000", str(port)).rstrip("& "))
    assert argv[:3] == ["python", "-m", "mockprovider"]
    (tmp_path / "tests" / "scenarios").mkdir(parents=True)
    hello = '{"name": "hello", "turns": [{"content": "hi"}]}'
    (tmp_path / "tests" / "scenarios" / "hello.json").write_text(hello)
    root = f"http://127.0.0.1:{port}"
    with subprocess.Popen([sys.executable, *argv[1:]], cwd=tmp_path, stderr=subprocess.DEVNULL) as mock:
        try:
            for _ in range(400):
                try:
                    if httpx.get(f"{root}/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.05)
            for test in ("gw0-a", "gw1-b", "gw0-a"):
                with openai.OpenAI(base_url=f"{root}/o/test={test}/v1", api_key="t") as client:
                    reply = client.chat.completions.create(model="hello", messages=ASK)
                assert reply.choices[0].message.content == "hi"
            mine = httpx.get(f"{root}/journal", params={"test_id": "gw0-a"}).json()["data"]
            seen = _samples(f"{root}/v1")
        finally:
            mock.terminate()
    assert [e["test_id"] for e in mine] == ["gw0-a", "gw0-a"]
    assert seen[("mockprovider_requests_total", ("/o/{options}/v1/chat/completions", "hello", "200"))] == 3


def test_request_series_print_as_the_prometheus_clients_own_counter_and_histogram(monkeypatch):
    """The plain numbers behind the request metrics print, in both exposition formats, exactly
    what a prometheus_client `Counter` and `Histogram` given the same requests print."""
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    from mockprovider import metrics

    monkeypatch.setattr(metrics.time, "time", lambda: 1_700_000_000.25)
    ours = metrics.Metrics()
    theirs = CollectorRegistry()
    counter = Counter(metrics.REQUESTS, metrics.REQUESTS_HELP, ("route", "status", "scenario"),
                      registry=theirs)
    histogram = Histogram(metrics.SECONDS, metrics.SECONDS_HELP, ("route",), buckets=metrics.BUCKETS,
                          registry=theirs)
    requests = [("/v1/chat/completions", 200, "plan", 0.0004), ("/v1/chat/completions", 429, "plan", 0.001),
                ("unmatched", 404, "", 0.3), ("/v1/chat/completions", 200, "plan", 400.0),
                ("/v1/chat/completions", 200, "recover", 0.0025)]
    for route, status, scenario, seconds in requests:
        ours.requests.record(route, status, scenario, seconds)
        counter.labels(route, str(status), scenario).inc()
        histogram.labels(route).observe(seconds)
    for child in (*counter._metrics.values(), *histogram._metrics.values()):
        child._created = 1_700_000_000.25
    ours.faults.labels("429")  # the other instruments print after these two, as before
    for encode in (generate_latest, generate_openmetrics):
        page, expected = encode(ours.registry).decode(), encode(theirs).decode()
        assert page.startswith(expected.removesuffix("# EOF\n"))
        assert "mockprovider_faults_injected" in page.removeprefix(expected.removesuffix("# EOF\n"))
