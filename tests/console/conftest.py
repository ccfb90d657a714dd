"""The console on an in-process NameServer + Broker (tests/broker/conftest's ``cluster``, with a
console port), and a small HTTP client for its API."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from tests.broker.conftest import cluster, free_port   # noqa: F401  (the fixture, for these tests)

__all__ = ["Answer", "call", "cluster"]


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {"consolePort": str(free_port())}


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _call(url: str, method: str, body: bytes | None, headers: dict[str, str]) -> Answer:
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return Answer(response.status, {k.lower(): v for k, v in response.headers.items()}, response.read())
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read())


async def call(cluster, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
               headers: dict[str, str] | None = None, auth: tuple[str, str] | None = None) -> Answer:
    """One request to the cluster's console (urllib in a worker thread: the broker runs on this loop)."""
    headers = dict(headers or {})
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    url = f"http://127.0.0.1:{cluster.broker.console.port}{path}"
    with trio.fail_after(60):
        return await trio.to_thread.run_sync(_call, url, method, data, headers)
