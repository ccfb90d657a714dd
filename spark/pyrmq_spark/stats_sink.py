"""The ``statsDir`` debug option: each partition writes what it did as one small JSON file.

Spark's Python data sources have no custom metrics, and an accumulator would need the
SparkContext inside the task. A file per partition is readable by a test or an operator after the
job (how many records were walked, how many decoded: push-down made visible).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict
from typing import Any


def write_stats(directory: str | None, source: str, stats: Any) -> None:
    if not directory:
        return
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{source}-{uuid.uuid4().hex}.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(asdict(stats), f)
    os.replace(tmp, path)  # readers never see half a file


def read_stats(directory: str) -> list[dict[str, Any]]:
    """Every partition's stats written to ``directory`` (for tests and the bench)."""
    out = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                out.append(json.load(f))
    return out
