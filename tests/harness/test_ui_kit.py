"""`/kit/<report>`: the exits kit's report folder shown safely, its PNG charts served, and
nothing outside the folder (or not a PNG, or not a regular file) ever served."""

from __future__ import annotations

import os

import httpx
import pytest
from ui_support import PageParts, serve_ui, sqlite_pair, tiny_png

REPORT = """# Exit report card

Criteria are printed below. A hostile adapter name: <script>alert(1)</script>
and `<img src=x onerror=alert(2)>`.

| adapter | turn cap | budget |
| --- | --- | --- |
| ours | **pass** · 8 requests | warn · <b>overshoot</b> · *none exists* |

- one finding
- [a link](javascript:alert(3))

![overhead](report.png)
![escape](../../../etc/passwd)

```
raw <pre> block </pre>
```
"""


@pytest.fixture
def kit_dir(tmp_path):
    root = tmp_path / "kit"
    card = root / "card1"
    card.mkdir(parents=True)
    (card / "report.md").write_text(REPORT)
    (card / "report.json").write_text('{"schema": "exitkit-report/1"}')
    (card / "report.png").write_bytes(tiny_png())
    (card / "fake.png").write_bytes(b"<svg onload=alert(1)>")
    (card / "leak.png").symlink_to("/etc/passwd")
    os.mkfifo(card / "fifo.png")
    (root / "linked").symlink_to(card)
    return root


def test_a_kit_report_shows_its_markdown_as_escaped_html_with_its_charts(tmp_path, kit_dir):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer, kit_reports=kit_dir) as url:
        index = httpx.get(url + "/kit").text
        page = httpx.get(url + "/kit/card1")
        chart = httpx.get(url + "/kit/card1/report.png")
    assert '<a href="/kit/card1">card1</a>' in index and "linked" not in index
    assert page.status_code == 200
    text = page.text
    assert "<h2>Exit report card</h2>" in text
    assert "<td><b>pass</b> · 8 requests</td>" in text
    assert "<td>warn · &lt;b&gt;overshoot&lt;/b&gt; · <i>none exists</i></td>" in text
    assert "<ul><li>one finding</li><li>[a link](javascript:alert(3))</li></ul>" in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<code>&lt;img src=x onerror=alert(2)&gt;</code>" in text
    assert "<pre>raw &lt;pre&gt; block &lt;/pre&gt;</pre>" in text
    images = [attrs["src"] for tag, attrs in PageParts(text).tags if tag == "img"]
    assert images == ["/kit/card1/report.png"]
    assert "[image ../../../etc/passwd not in this report's folder]" in text
    links = [attrs.get("href") or "" for tag, attrs in PageParts(text).tags if tag == "a"]
    assert not any("javascript" in href for href in links)
    assert chart.status_code == 200 and chart.headers["content-type"] == "image/png"
    assert chart.content == tiny_png()


@pytest.mark.parametrize("path", ["/kit/card1/leak.png", "/kit/card1/fake.png", "/kit/card1/fifo.png",
                                  "/kit/card1/report.json", "/kit/card1/..%2F..%2Fharness.db",
                                  "/kit/linked", "/kit/linked/report.png", "/kit/..%2Fkit"])
def test_nothing_but_a_real_png_inside_a_report_folder_is_served(tmp_path, kit_dir, path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer, kit_reports=kit_dir) as url:
        answer = httpx.get(url + path, timeout=10)
    assert answer.status_code == 404
    assert "root:" not in answer.text and "svg onload" not in answer.text


def test_without_a_kit_folder_the_kit_pages_say_how_to_give_one(tmp_path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        answer = httpx.get(url + "/kit/card1")
    assert answer.status_code == 404 and "--kit-reports DIR" in answer.text
