"""``pyrmq dlq``: an operator's look at a consumer group's dead letters, and their re-send.

``pyrmq dlq -b HOST:PORT -g GROUP`` lists the messages of ``%DLQ%GROUP`` on that broker (read with
PULL_MESSAGE as the ``TOOLS_CONSUMER`` group with its own subscription, committing nothing, as
mqadmin's and the dashboard's pull consumers do): offset msgId, original topic, reconsume times,
store time, keys, tags, body size.  ``--resend MSGID ...`` reads each dead letter back by its offset
msgId (VIEW_MESSAGE_BY_ID) and sends it (SEND_MESSAGE_V2) to the topic it was first consumed from,
the ``RETRY_TOPIC`` property the broker stored on its first send-back: body, flag, tags, keys,
user properties and UNIQ_KEY (the client-visible msgId) are kept; the retry and delay bookkeeping
(RETRY_TOPIC, REAL_TOPIC, REAL_QID, DELAY, MAX_RECONSUME_TIMES...) is dropped and the reconsume
count starts again at 0.  The dead letter itself stays in the DLQ, as on Apache.

The requests are pyrmq.client.admin's, which the console uses too.
"""

from __future__ import annotations

import time

import trio

from pyrmq.client.admin import AdminClient, Resent, dlq_topic
from pyrmq.client.errors import MQClientError
from pyrmq.codec.message import MessageConst, MessageExt

__all__ = ["DlqError", "Resent", "dlq_topic", "list_dead_letters", "resend_dead_letters", "run"]

TIMEOUT_S = 10.0


class DlqError(RuntimeError):
    pass


async def list_dead_letters(addr: str, group: str, limit: int = 1000) -> list[MessageExt]:
    """The first ``limit`` messages of the group's DLQ on the broker at ``addr``, oldest first per queue."""
    try:
        async with AdminClient(None, timeout=TIMEOUT_S) as admin:
            return await admin.dead_letters(addr, group, limit)
    except MQClientError as exc:
        raise DlqError(str(exc)) from None


async def resend_dead_letters(addr: str, group: str, msg_ids: list[str]) -> list[Resent]:
    """Re-send each dead letter (by offset msgId) of ``group`` to its original topic on ``addr``."""
    try:
        async with AdminClient(None, timeout=TIMEOUT_S) as admin:
            return [await admin.resend_dead_letter(addr, group, msg_id) for msg_id in msg_ids]
    except MQClientError as exc:
        raise DlqError(str(exc)) from None


def format_dead_letters(messages: list[MessageExt]) -> str:
    lines = [f"{'msgId':34} {'original topic':24} {'retries':>7} {'stored at (UTC)':19} {'size':>7} keys/tags"]
    for m in messages:
        stored = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(m.store_timestamp / 1000))
        original = m.properties.get(MessageConst.PROPERTY_RETRY_TOPIC, "?")
        lines.append(f"{m.msg_id:34} {original:24} {m.reconsume_times:7} {stored:19} {len(m.body):7} "
                     f"{m.keys or '-'}/{m.tags or '-'}")
    lines.append(f"{len(messages)} dead letter(s)")
    return "\n".join(lines) + "\n"


def format_resent(resent: list[Resent]) -> str:
    return "".join(f"{r.msg_id} -> {r.topic} ({r.new_msg_id})\n" for r in resent)


def run(addr: str, group: str, resend: list[str] | None, limit: int) -> str:
    if resend:
        return format_resent(trio.run(resend_dead_letters, addr, group, resend))
    return format_dead_letters(trio.run(list_dead_letters, addr, group, limit))
