"""docs/harness.md's Python example runs as written, copied into an empty folder."""

import os
import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "harness.md"


def test_the_harness_docs_python_example_works_as_written(mock_url, tmp_path):
    (snippet,) = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    (tmp_path / "example.py").write_text(snippet)
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "LLM_BASE_URL": mock_url}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("completed 3 ") and "worker 7 timed out" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["example.py", "sandbox", "state"]
