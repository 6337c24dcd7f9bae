"""The package builds with the standard library alone: pip builds a wheel
offline through build_backend.py, and it holds the package."""
import os
import subprocess
import sys
import tomllib
import zipfile



ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, ROOT)
import build_backend  # noqa: E402


def test_wheel_builds_offline(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "-w", str(tmp_path), ROOT],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    [whl] = list(tmp_path.glob("*.whl"))
    assert whl.name == "mneme_client-1.0.0-py3-none-any.whl"
    names = zipfile.ZipFile(whl).namelist()
    for f in ["mneme_client/__init__.py", "mneme_client/_core.py", "mneme_client/langgraph.py", "mneme_client/agents.py",
              "mneme_client/py.typed", "mneme_client-1.0.0.dist-info/METADATA", "mneme_client-1.0.0.dist-info/RECORD"]:
        assert f in names


def test_backend_matches_pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert (project["name"], project["version"]) == (build_backend.NAME, build_backend.VERSION)
    assert f"Summary: {project['description']}\n" in build_backend.METADATA
    for dep in project["dependencies"]:
        assert f"Requires-Dist: {dep}\n" in build_backend.METADATA
