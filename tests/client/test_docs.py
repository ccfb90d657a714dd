"""The examples of docs/CLIENT.md, run as written against the in-process broker (its NameServer
address put in place of 127.0.0.1:9876; the topics made first, so no example waits for the
broker's registration of an auto-created topic)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import trio

from tests.client.helpers import create_topic

DOC = Path(__file__).resolve().parents[2] / "docs" / "CLIENT.md"


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


async def test_every_example_runs(cluster):
    blocks = examples()
    assert len(blocks) == 3
    for topic in ("ExampleTopic", "ExampleTrioTopic"):
        await create_topic(cluster, topic)

    def run(code: str) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code.replace("127.0.0.1:9876", cluster.namesrv_addr), str(DOC), "exec"), {})
        return out.getvalue()

    with trio.fail_after(60):
        printed = [await trio.to_thread.run_sync(run, block) for block in blocks]
    sync_out, trio_out, wait_out = printed
    assert "SendStatus.SEND_OK" in sync_out and "b'hello'" in sync_out and "b'two'" in sync_out
    assert trio_out.strip() == "received 10"
    assert wait_out.strip() == "PullStatus.NO_NEW_MSG"
