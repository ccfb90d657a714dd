"""A short seeded run of bench/fuzz.py: every target under atheris' coverage-guided fuzzing
(libFuzzer), starting from the captured fixtures; nothing may be found."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.targets import all_targets

REPO = Path(__file__).resolve().parents[2]
INPUTS = 30_000   # about 20 s on two cores; bench/fuzz.py runs a million


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_short_atheris_run_finds_nothing(tmp_path):
    summary = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "fuzz.py"), "--inputs", str(INPUTS), "--seed", "1",
                           "--jobs", "2", "--findings", str(tmp_path / "findings"), "--json", str(summary)],
                          cwd=REPO, capture_output=True, text=True, timeout=230)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(summary.read_text())
    assert {t["target"] for t in result["targets"]} == set(all_targets())
    assert result["inputs"] >= INPUTS - len(all_targets())   # every target ran its share to the end
