"""What `pip install .` gives a user: the mock, the harness and the fixture, without the lab's own
program (`experiments/`) or its plotting stack."""

import email
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = {"mockprovider", "harness", "o200k", "exitkit"}
HEAVY = ("pandas", "matplotlib", "numpy")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out),
         str(src)],
        check=True, capture_output=True,
    )
    [built] = out.glob("*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_ships_the_tools_and_not_the_lab(wheel):
    tops = {name.split("/")[0] for name in wheel.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert tops <= SHIPPED and {"mockprovider", "harness", "o200k"} <= tops
    assert "experiments" not in tops
    assert any(name == "mockprovider/pytest_plugin.py" for name in wheel.namelist())


def test_the_wheel_ships_every_module_and_data_file_of_the_tools(wheel):
    # Subpackages (harness/store, harness/ui, exitkit/adapters, mockprovider/recorder) and any data
    # file read at run time: a package listing that misses one installs, then fails on first use.
    tracked = subprocess.run(["git", "ls-files", "--", *SHIPPED], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    needed = {name for name in tracked if not name.endswith("README.md")}
    assert {"harness/store/sqlite.py", "harness/ui/app.py", "exitkit/adapters/plain.py",
            "mockprovider/recorder/proxy.py"} <= needed
    assert needed - set(wheel.namelist()) == set()


def test_the_wheel_declares_the_commands_and_the_pytest_plugins(wheel):
    [entry] = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry).decode()
    for line in ("harness = harness.cli:main", "mockprovider = mockprovider.__main__:main",
                 "mockprovider = mockprovider.pytest_plugin", "exitkit = exitkit.pytest_plugin"):
        assert line in text, text


def test_the_base_install_needs_no_plotting_stack(wheel):
    [meta] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    requires = email.message_from_bytes(wheel.read(meta)).get_all("Requires-Dist")
    base = [r for r in requires if "extra ==" not in r]
    assert any(r.startswith("starlette") for r in base) and any(r.startswith("httpx") for r in base)
    for heavy in HEAVY:
        assert not any(r.startswith(heavy) for r in base), base
    experiments_extra = [r.split(";")[0].strip() for r in requires if "extra == \"experiments\"" in r]
    assert {r.split(">")[0] for r in experiments_extra} == {"pandas", "matplotlib"}


def test_the_mock_the_harness_and_the_fixture_import_nothing_heavy():
    code = (
        "import sys, mockprovider.__main__, mockprovider.pytest_plugin, harness.cli, o200k; "
        "print(sorted({m.split('.')[0] for m in sys.modules}))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for heavy in HEAVY:
        assert f"'{heavy}'" not in loaded
