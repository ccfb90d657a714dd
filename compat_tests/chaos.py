"""The checker of the chaos run, in the manner of openchaos: from what the producers were told and
what the consumers received, count lost acknowledged messages, duplicates and per-key order
violations.

- lost: a message answered SEND_OK that no consumer ever received (must be none);
- duplicates: deliveries beyond the first of a body (at-least-once: reported, allowed);
- order violations: per key, a message whose first delivery comes after the first delivery of a
  later message of that key (bodies are ``K{key}-{seq}``, a key's seq advances only after a
  SEND_OK, so the acknowledged messages of a key are stored in seq order). Redeliveries of
  messages already received (a consumer offset rolled back by a restart) are duplicates, not
  violations.

Pure Python over the runner's JSON events; shares nothing with the server it judges.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field


@dataclass
class ChaosReport:
    kills: int = 0
    sent_ok: int = 0
    send_failures: int = 0
    deliveries: int = 0
    distinct_received: int = 0
    lost: list[str] = field(default_factory=list)
    duplicates: int = 0
    duplicated_messages: int = 0
    order_violations: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"kills={self.kills} acknowledged={self.sent_ok} send failures={self.send_failures} "
                f"delivered={self.deliveries} distinct={self.distinct_received} lost={len(self.lost)} "
                f"duplicates={self.duplicates} (of {self.duplicated_messages} messages) "
                f"order violations={len(self.order_violations)} unexpected={len(self.unexpected)}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


def parse_body(body: str) -> tuple[int, int]:
    key, _, seq = body[1:].partition("-")
    return int(key), int(seq)


def check(sent: list[dict], failed: list[dict], received: list[dict], kills: int = 0) -> ChaosReport:
    """``sent``/``failed``: the producers' ``sent`` and ``send_failed`` events; ``received``: the
    consumers' ``recv`` events in the order they were printed."""
    report = ChaosReport(kills=kills, send_failures=len(failed), deliveries=len(received))
    acked = {e["body"] for e in sent if e["status"] == "SEND_OK"}
    attempted = acked | {e["body"] for e in sent} | {e["body"] for e in failed}
    report.sent_ok = len(acked)
    counts = Counter(e["body"] for e in received)
    report.distinct_received = len(counts)
    report.duplicates = sum(n - 1 for n in counts.values())
    report.duplicated_messages = sum(1 for n in counts.values() if n > 1)
    report.lost = sorted(acked - counts.keys(), key=parse_body)
    report.unexpected = sorted(counts.keys() - attempted)
    seen: set[str] = set()
    last_seq: dict[int, int] = {}
    for e in received:
        body = e["body"]
        if body in seen:
            continue
        seen.add(body)
        key, seq = parse_body(body)
        if key in last_seq and seq < last_seq[key]:
            report.order_violations.append(f"key {key}: seq {seq} first received after seq {last_seq[key]}")
        last_seq[key] = max(seq, last_seq.get(key, seq))
    return report
