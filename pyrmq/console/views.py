"""What the console's JSON API answers with: admin-client results turned into plain JSON values
(messages with their body as text and hex, queue tables), and the request checks shared by the
endpoints (names, numbers). No I/O."""

from __future__ import annotations

from typing import Any, Mapping

from pyrmq.codec.admin_bodies import ConsumeStats, TopicStatsTable
from pyrmq.codec.message import MessageConst, MessageExt
from pyrmq.codec.names import validate_group, validate_topic

# A message body shown in the browser is cut here: the page is for looking, not for downloading.
MAX_SHOWN_BODY_BYTES = 64 * 1024


class BadRequest(ValueError):
    """A request the console refuses with 400; the message is shown to the user."""


def topic_arg(value: Any) -> str:
    remark = validate_topic(value if isinstance(value, str) else None)
    if remark is not None:
        raise BadRequest(remark)
    return str(value)


def group_arg(value: Any) -> str:
    remark = validate_group(value if isinstance(value, str) else None)
    if remark is not None:
        raise BadRequest(remark)
    return str(value)


def int_arg(value: Any, name: str, low: int, high: int) -> int:
    """An integer within [low, high]: from JSON (int) or a query string (decimal digits)."""
    if isinstance(value, bool):
        raise BadRequest(f"{name} must be an integer")
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or not low <= value <= high:
        raise BadRequest(f"{name} must be an integer between {low} and {high}")
    return value


def text_arg(value: Any, name: str, max_length: int = 1024) -> str:
    if not isinstance(value, str) or not value or len(value) > max_length:
        raise BadRequest(f"{name} must be a non-empty string of at most {max_length} characters")
    return value


def message_json(message: MessageExt, broker_name: str | None = None) -> dict[str, Any]:
    body = message.body[:MAX_SHOWN_BODY_BYTES]
    try:
        text: str | None = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {
        "msgId": message.msg_id,
        "uniqKey": message.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        "topic": message.topic, "brokerName": broker_name, "queueId": message.queue_id,
        "queueOffset": message.queue_offset, "commitLogOffset": message.commit_log_offset,
        "storeTimestamp": message.store_timestamp, "bornTimestamp": message.born_timestamp,
        "storeHost": f"{message.store_host[0]}:{message.store_host[1]}",
        "bornHost": f"{message.born_host[0]}:{message.born_host[1]}",
        "reconsumeTimes": message.reconsume_times, "tags": message.tags, "keys": message.keys,
        "properties": dict(sorted(message.properties.items())), "bodySize": len(message.body),
        "bodyText": text, "bodyHex": body.hex(), "bodyTruncated": len(message.body) > MAX_SHOWN_BODY_BYTES,
    }


def topic_offsets_json(broker_name: str, stats: TopicStatsTable) -> list[dict[str, Any]]:
    return [{"brokerName": broker_name, "queueId": mq.queue_id, "minOffset": o.min_offset, "maxOffset": o.max_offset,
             "lastUpdateTimestamp": o.last_update_timestamp}
            for mq, o in sorted(stats.offset_table.items(), key=lambda item: item[0].queue_id)]


def consume_queues_json(stats: ConsumeStats) -> list[dict[str, Any]]:
    return [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
             "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset,
             "lag": w.broker_offset - w.consumer_offset, "lastTimestamp": w.last_timestamp}
            for mq, w in sorted(stats.offset_table.items(), key=lambda item: (item[0].topic, item[0].queue_id))]


def first_rate(value: str | None) -> float:
    """The first figure of a runtime-info rate (``putTps`` is "10s 60s 600s", Java's text)."""
    if not value:
        return 0.0
    try:
        return float(value.split()[0])
    except (ValueError, IndexError):
        return 0.0


def runtime_figures(info: Mapping[str, str]) -> dict[str, Any]:
    """The runtime-info figures the cluster page and the charts show."""
    keys = ("brokerVersionDesc", "commitLogDiskRatio", "consumeQueueDiskRatio", "commitLogMaxOffset",
            "msgPutTotalTodayNow", "msgGetTotalTodayNow", "putTps", "getTransferedTps", "dispatchBehindBytes",
            "haConnectionCount", "slaveFallBehindMuch", "masterAddr", "haConnected", "masterOffset")
    return {"putTps": first_rate(info.get("putTps")), "getTps": first_rate(info.get("getTransferedTps")),
            # live counters: the charts take their per-second rates from two polls of these
            "putTotal": _count(info.get("msgPutTotalTodayNow")), "getTotal": _count(info.get("msgGetTotalTodayNow")),
            "info": {k: info[k] for k in keys if k in info}}


def _count(value: str | None) -> int:
    return int(value) if value and value.isdigit() else 0
