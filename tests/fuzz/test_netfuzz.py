"""A short seeded run of the network fuzzer (tests/fuzz/netfuzz.py): mutated real frames against a
running ``python -m pyrmq standalone``; after every batch the process is alive, a canary client
sends and consumes, and the RSS stays bounded."""

from __future__ import annotations

import pytest

from tests.fuzz.netfuzz import fuzz


@pytest.mark.slow
async def test_mutated_frames_leave_the_broker_serving(tmp_path):
    summary = await fuzz(tmp_path, batches=20, frames=200, seed=1)
    assert summary.failure is None, summary.failure
    assert summary.canaries == 20
    assert summary.answers > 0 and summary.closed_by_server > 0   # frames reached processors and were refused
    assert not summary.bad_answers
