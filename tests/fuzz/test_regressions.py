"""Every input the fuzzers found (or that stands for what they found) replayed against its target:
tests/fuzz/regressions/<target>/<name>.bin, listed with what each broke in that folder's README."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.oracle import check
from tests.fuzz.targets import all_targets

REGRESSIONS = Path(__file__).resolve().parent / "regressions"
CASES = sorted(REGRESSIONS.glob("*/*.bin"))

# Findings not fixed yet: strict xfails (none open).
OPEN: dict[str, str] = {}


def _case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@pytest.fixture(scope="module")
def targets():
    targets = all_targets()
    yield targets
    targets["store_recovery"].close()


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=OPEN[_case_id(p)]))
                                  if _case_id(p) in OPEN else p for p in CASES], ids=_case_id)
def test_regression_input_holds_the_property(path, targets):
    check(targets[path.parent.name], path.read_bytes())


def test_every_regression_input_has_a_target_and_a_line_in_the_readme():
    readme = (REGRESSIONS / "README.md").read_text()
    targets = all_targets()
    assert CASES
    for path in CASES:
        assert path.parent.name in targets, path
        assert f"`{_case_id(path)}`" in readme, f"{_case_id(path)} is not described in regressions/README.md"
