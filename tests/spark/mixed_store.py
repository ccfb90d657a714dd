"""A store with a known mix of messages, written by a real in-process pyrmq broker, then damaged.

Several topics, tags and keys, zlib/LZ4/zstd-compressed bodies (sys_flag as Java 4.x and 5.x
clients set it), a 4 MiB body (which rolls the commit log to a new segment), a delayed message
(its SCHEDULE_TOPIC_XXXX record and the delivered copy), then a torn tail after the last record and
two damaged records in the middle: one whose head is overwritten (the reader must resynchronise)
and one whose body no longer matches its CRC.
"""

from __future__ import annotations

import os
import zlib
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator

import lz4.frame
import trio
import zstandard

from pyrmq.broker.config import build_config
from pyrmq.broker.controller import BrokerController
from pyrmq.broker.topic_config import TopicConfig
from pyrmq.codec.message import MessageSysFlag, decode_offset_msg_id
from pyrmq.namesrv.controller import NamesrvConfig, NamesrvController
from pyrmq.remoting.client import RemotingClient
from tests.broker.conftest import broker_properties
from tests.broker.rmq import pull, send

SEGMENT_BYTES = 4 * 1024 * 1024 + 2048   # the 4 MiB body does not fit after the small ones: a second segment
BIG_BODY = bytes(range(256)) * (4 * 1024 * 1024 // 256)   # 4 MiB
ZLIB = MessageSysFlag.COMPRESSED_FLAG
LZ4 = MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_LZ4_TYPE
ZSTD = MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZSTD_TYPE


@dataclass
class Sent:
    """One message as sent and as the broker answered it; ``body`` is the uncompressed body."""

    topic: str
    queue_id: int
    body: bytes
    tags: str | None = None
    keys: str | None = None
    sys_flag: int = 0
    stored_body: bytes = b""
    queue_offset: int = -1
    phy_offset: int = -1
    uniq_key: str = ""
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class MixedStore:
    root: str
    sent: list[Sent]                 # every message that reads back intact, in commit log order
    head_damaged: Sent               # overwritten head: a _corrupt row of its size, nothing else
    crc_damaged: Sent                # body flipped: a row with _corrupt set
    delayed_copy: Sent               # the delivered copy of the delayed message
    schedule_record_offset: int      # phy_offset of its SCHEDULE_TOPIC_XXXX record


def _plan() -> list[Sent]:
    text = b"order %d " * 20
    plan = [Sent("TopicA", i % 4, b"a-%d" % i, tags="TagA" if i % 2 else "TagB", keys=f"ka{i} kb{i}") for i in range(12)]
    plan += [Sent("TopicB", i % 2, b"b-%d" % i, tags="TagC") for i in range(6)]
    plan += [Sent("TopicC", 0, text % tuple(range(20)), tags="Z", keys="zlib", sys_flag=ZLIB),
             Sent("TopicC", 1, text % tuple(range(20, 40)), tags="L", keys="lz4", sys_flag=LZ4),
             Sent("TopicC", 2, text % tuple(range(40, 60)), tags="S", keys="zstd", sys_flag=ZSTD)]
    plan += [Sent("TopicV", 0, b"victim-head"), Sent("TopicA", 0, b"after-victim", tags="TagA"),
             Sent("TopicV", 1, b"victim-crc"), Sent("TopicB", 0, b"after-crc", tags="TagC")]
    plan += [Sent("TopicBig", 0, BIG_BODY, tags="Big", keys="big"),
             Sent("TopicA", 1, b"after-big", tags="TagA", keys="last")]
    return plan


def _compress(body: bytes, sys_flag: int) -> bytes:
    if sys_flag == ZLIB:
        return zlib.compress(body, 5)
    if sys_flag == LZ4:
        return lz4.frame.compress(body)
    if sys_flag == ZSTD:
        return zstandard.ZstdCompressor().compress(body)
    return body


@asynccontextmanager
async def running_broker(root: str, topics: dict[str, int], **overrides: object) -> AsyncIterator[Running]:
    """A NameServer and a broker on loopback with their store under ``root/store`` and the
    ``topics`` (name: queues) created; stopped cleanly (configs persisted) on exit."""
    namesrv = NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1",
                                              kv_config_path=os.path.join(root, "kv.json")))
    props = broker_properties(_Root(root), 0, **overrides)
    async with trio.open_nursery() as nursery:
        await nursery.start(namesrv.run)
        props["namesrvAddr"] = f"127.0.0.1:{namesrv.port}"
        loaded = build_config(props)
        broker = BrokerController(loaded)
        await nursery.start(broker.run)
        for topic, queues in topics.items():
            broker.topic_config_manager.update(TopicConfig(topic, queues, queues))
        async with RemotingClient() as client:
            yield Running(broker, loaded.broker.broker_addr, client)
        broker.stop()
        await broker.wait_stopped()
        namesrv.server.close()
        nursery.cancel_scope.cancel()


@dataclass
class Running:
    broker: BrokerController
    addr: str
    client: RemotingClient

    async def wait_for_messages(self, topic: str, queue_id: int, count: int = 1, timeout: float = 15) -> list:
        with trio.fail_after(timeout):
            while True:
                _, messages = await pull(self.client, self.addr, topic, queue_id, 0)
                if len(messages) >= count:
                    return messages
                await trio.sleep(0.1)


async def _write(root: str) -> tuple[list[Sent], Sent]:
    topics = {t: 4 for t in ("TopicA", "TopicB", "TopicC", "TopicV", "TopicBig", "TopicD")}
    async with running_broker(root, topics, mappedFileSizeCommitLog=SEGMENT_BYTES, messageDelayLevel="1s 2s",
                              flushIntervalCommitLog=50) as run:
        client, addr = run.client, run.addr
        sent = _plan()
        for s in sent:
            s.stored_body = _compress(s.body, s.sys_flag)
            resp = await send(client, addr, s.topic, s.stored_body, tags=s.tags, keys=s.keys,
                              queue_id=s.queue_id, sys_flag=s.sys_flag)
            assert resp.code == 0, resp.remark
            _, _, s.phy_offset = decode_offset_msg_id(resp.ext_fields["msgId"])
            s.queue_offset = int(resp.ext_fields["queueOffset"])
        delayed = Sent("TopicD", 3, b"later", tags="TagD", extra={"DELAY": "1"})
        resp = await send(client, addr, "TopicD", b"later", tags="TagD", queue_id=3, extra={"DELAY": "1"})
        assert resp.code == 0, resp.remark
        _, _, delayed.phy_offset = decode_offset_msg_id(resp.ext_fields["msgId"])
        [copy] = await run.wait_for_messages("TopicD", 3)
        delivered = Sent("TopicD", 3, b"later", tags="TagD", queue_offset=copy.queue_offset,
                         phy_offset=copy.commit_log_offset, stored_body=b"later",
                         extra={"schedule_offset": str(delayed.phy_offset)})
    return sent, delivered


class _Root:
    """What broker_properties wants of tmp_path: ``/ "store"``."""

    def __init__(self, root: str) -> None:
        self.root = root

    def __truediv__(self, name: str) -> str:
        return os.path.join(self.root, name)


def damage_store(store: str, head_offset: int, crc_offset: int, segment_bytes: int) -> None:
    """Damage a stopped broker's commit log (pyrmq's or Apache's, IPv4 hosts) in three ways a reader
    must survive: overwrite the MAGIC and offsets of the record at ``head_offset``, flip bit 5 (ASCII case) of
    the first body byte of the record at ``crc_offset`` (its CRC no longer matches), and leave a torn
    record after the last one: the first 40 bytes of a plausible record, then zeros."""
    commitlog = os.path.join(store, "commitlog")
    names = sorted(os.listdir(commitlog))

    def path_of(offset: int) -> tuple[str, int]:
        return os.path.join(commitlog, names[offset // segment_bytes]), offset % segment_bytes

    def patch(offset: int, data: bytes) -> None:
        path, pos = path_of(offset)
        with open(path, "r+b") as f:
            f.seek(pos)
            f.write(data)

    patch(head_offset + 4, b"\xde\xad\xbe\xef" * 8)
    # the body starts after the 88-byte IPv4 prefix (TOTALSIZE .. BODYLEN)
    path, pos = path_of(crc_offset + 88)
    with open(path, "rb") as f:
        f.seek(pos)
        first = f.read(1)[0]
    patch(crc_offset + 88, bytes([first ^ 0x20]))
    last = os.path.join(commitlog, names[-1])
    with open(last, "r+b") as f:
        data = f.read()
    end = len(data.rstrip(b"\x00"))
    with open(last, "r+b") as f:
        f.seek(end)
        f.write(data[:40])   # a head copied from the file's first record: right magic, wrong offset, cut off


def write_mixed_store(root: str) -> MixedStore:
    sent, delivered = trio.run(_write, root)
    store = os.path.join(root, "store")
    head = next(s for s in sent if s.body == b"victim-head")
    crc = next(s for s in sent if s.body == b"victim-crc")
    damage_store(store, head.phy_offset, crc.phy_offset, SEGMENT_BYTES)
    intact = [s for s in sent if s is not head and s is not crc]
    return MixedStore(store, intact, head, crc, delivered, int(delivered.extra["schedule_offset"]))
