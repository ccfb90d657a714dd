"""Hypothesis drives every fuzz target (tests/fuzz/targets.py, store_target.py): real inputs from
the captured fixtures, mutated by the target's own structure-aware mutator, plus plain random
bytes; each held to oracle.py's property.  Derandomized, so CI runs the same inputs every time;
bench/fuzz.py runs the same targets under atheris for a million inputs."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.oracle import check
from tests.fuzz.targets import CODEC_TARGETS, all_targets

EXAMPLES = {"store_recovery": 60}   # ~10 ms an input; the codec targets take well under 1 ms
DEFAULT_EXAMPLES = 500


def _run(target, examples: int) -> None:
    seeds = target.seeds()

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    # one drawn integer seeds the mutator: far cheaper than st.randoms() drawing every choice
    @given(seed=st.sampled_from(seeds), mutation_seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 3),
           raw=st.none() | st.binary(max_size=512))
    def holds(seed, mutation_seed, rounds, raw):
        rng = random.Random(mutation_seed)
        if raw is not None and rng.random() < 0.2:
            data = raw
        else:
            data = seed
            for _ in range(rounds):
                data = target.mutate(data, rng, seeds)
        check(target, data[:target.max_len])

    holds()


@pytest.mark.parametrize("target", CODEC_TARGETS, ids=lambda t: t.name)
def test_codec_target_holds_the_property(target):
    _run(target, EXAMPLES.get(target.name, DEFAULT_EXAMPLES))


def test_store_recovery_holds_the_property():
    target = all_targets()["store_recovery"]
    try:
        _run(target, EXAMPLES["store_recovery"])
    finally:
        target.close()


@pytest.mark.parametrize("name", sorted(all_targets()))
def test_every_seed_holds_the_property(name):
    target = all_targets()[name]
    try:
        for seed in target.seeds():
            check(target, seed[:target.max_len])
    finally:
        if hasattr(target, "close"):
            target.close()
