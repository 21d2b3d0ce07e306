"""`python -m experiments` in an install without the `experiments` extra says what to install."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_lab_without_its_plotting_extra_names_the_extra_instead_of_a_traceback(tmp_path):
    # `None` in sys.modules makes `import matplotlib` fail as if it were not installed.
    argv = ["experiments", "plan", "--out", str(tmp_path)]
    code = (f"import runpy, sys; sys.modules['matplotlib'] = None; sys.argv = {argv!r}; "
            "runpy.run_module('experiments', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr, done.stderr
    assert "matplotlib is not installed" in done.stderr
    assert "make experiments" in done.stderr and "'.[experiments]'" in done.stderr
    assert list(tmp_path.iterdir()) == []  # stopped before measuring anything
