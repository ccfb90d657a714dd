"""The house tools as tests, so `make test` is the one command: ruff's bug rules over the tree and
mypy --strict over the packages listed in pyproject.toml's [tool.mypy] `files`."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert path, f"{name} is a test dependency (pip install -e .[test])"
    return path


@pytest.mark.parametrize("command", [
    ["ruff", "check", "--no-cache", "."],
    ["mypy"],   # files and strictness from pyproject.toml
], ids=["ruff", "mypy"])
def test_tool_is_clean(command):
    result = subprocess.run([_tool(command[0]), *command[1:]], cwd=ROOT, capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
