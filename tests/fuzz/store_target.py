"""The recovery fuzz target: a store directory built from fuzzed files, loaded by the real
``DefaultMessageStore`` (recovery, consume queue and index loading, replay), read, written to,
stopped and loaded again.

An input is a sequence of entries ``kind:u8 length:u32 payload``.  The kind (low 7 bits) names a
file of the store the Apache 4.9.8 fixture has (commit log files, consume queue files, the
checkpoint, an index file, the ``abort`` marker, a queue directory with a fuzzed topic name);
the payload is the file's head, zero-padded to the configured size -- or, with the high bit
set, written as is, so a file of the wrong length is tried too.

``decode`` is the first start and the reads a broker serves right after it: only ``StoreError``
(or a ``ProtocolError``) may stop it.  ``reencode`` then puts a fresh message, stops, starts
again and reads it back: a store that started once must keep what it acknowledged.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import struct
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from pyrmq.codec.commit_log_walk import offset_to_file_name
from pyrmq.codec.message import properties_to_string, tags_string_to_tags_code
from pyrmq.store.message_store import DefaultMessageStore, MessageExtBrokerInner, MessageStoreConfig, PutMessageStatus
from pyrmq.store.model import GetMessageStatus
from tests.fuzz import mutate, seeds
from tests.fuzz.oracle import expect

# The sizes of the Apache fixture's broker (tests/fixtures/store/README.md), so it can seed.
COMMIT_LOG_FILE_SIZE = 131072
CONSUME_QUEUE_FILE_SIZE = 2000
HASH_SLOTS = 64
INDEX_ITEMS = 2048
INDEX_FILE_SIZE = 40 + HASH_SLOTS * 4 + INDEX_ITEMS * 20
CHECKPOINT_SIZE = 4096

_ENTRY = struct.Struct(">BI")
_RAW_SIZE = 0x80
_TOPIC_DIR = 9

# kind -> (path in the store root, size the store expects)
FILES: tuple[tuple[str, int], ...] = (
    ("commitlog/" + offset_to_file_name(0), COMMIT_LOG_FILE_SIZE),
    ("commitlog/" + offset_to_file_name(COMMIT_LOG_FILE_SIZE), COMMIT_LOG_FILE_SIZE),
    ("consumequeue/TopicTest/0/" + offset_to_file_name(0), CONSUME_QUEUE_FILE_SIZE),
    ("consumequeue/TopicTest/0/" + offset_to_file_name(CONSUME_QUEUE_FILE_SIZE), CONSUME_QUEUE_FILE_SIZE),
    ("consumequeue/TopicTest/1/" + offset_to_file_name(0), CONSUME_QUEUE_FILE_SIZE),
    ("checkpoint", CHECKPOINT_SIZE),
    ("index/20261122074637923", INDEX_FILE_SIZE),
    ("abort", 0),
    ("commitlog/" + offset_to_file_name(3 * COMMIT_LOG_FILE_SIZE), COMMIT_LOG_FILE_SIZE),
    ("consumequeue/{topic}/0/" + offset_to_file_name(0), CONSUME_QUEUE_FILE_SIZE),
)

CANARY_TOPIC = "FuzzCanary"


def pack_entries(entries: list[tuple[int, bytes]]) -> bytes:
    return b"".join(_ENTRY.pack(kind, len(payload)) + payload for kind, payload in entries)


def unpack_entries(data: bytes) -> list[tuple[int, bytes]]:
    out = []
    pos = 0
    while pos + _ENTRY.size <= len(data):
        kind, length = _ENTRY.unpack_from(data, pos)
        pos += _ENTRY.size
        out.append((kind, data[pos:pos + length]))
        pos += length
    return out


def _topic_dir_name(payload: bytes) -> str:
    """A name the file system takes (no separator, NUL, '.' or '..'), as odd as the payload."""
    name = payload[:200].decode("utf-8", "replace").replace("/", "_").replace("\x00", "_")
    name = name.encode()[:255].decode("utf-8", "ignore")   # NAME_MAX is in bytes
    return name if name not in ("", ".", "..") else "_"


def write_store(root: str, data: bytes) -> None:
    for kind, payload in unpack_entries(data):
        path, size = FILES[(kind & ~_RAW_SIZE) % len(FILES)]
        if "{topic}" in path:
            path, payload = path.format(topic=_topic_dir_name(payload)), b""
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            if kind & _RAW_SIZE:
                f.write(payload)
            else:
                f.write(payload[:size])
                f.truncate(size)


def store_config(root: str) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=COMMIT_LOG_FILE_SIZE,
                              mapped_file_size_consume_queue=CONSUME_QUEUE_FILE_SIZE,
                              max_hash_slot_num=HASH_SLOTS, max_index_num=INDEX_ITEMS)


def _canary(body: bytes) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(
        topic=CANARY_TOPIC, queue_id=0, flag=0, body=body,
        properties_string=properties_to_string({"TAGS": "t", "KEYS": "canary"}), sys_flag=0,
        born_timestamp=1_700_000_000_000, born_host=("127.0.0.1", 5000), store_host=("127.0.0.1", 10911),
        tags_code=tags_string_to_tags_code("t"))


def _serve_reads(store: DefaultMessageStore) -> None:
    """What a broker answers right after a start: every queue's first messages, offset lookups,
    a key query, the first record."""
    for cq in store.consume_queues:
        topic, queue_id = cq.topic, cq.queue_id
        low = store.get_min_offset_in_queue(topic, queue_id)
        store.get_max_offset_in_queue(topic, queue_id)
        store.get_message("g", topic, queue_id, low, 32, None)
        store.get_offset_in_queue_by_time(topic, queue_id, 1_700_000_000_000)
        store.get_earliest_message_time(topic, queue_id)
    store.look_message_by_offset(store.get_min_phy_offset())
    store.query_message("TopicTest", "OrderID001", 32, 0, 2**62)


@dataclass
class StoreTarget:
    name: str = "store_recovery"
    max_len: int = 32768
    # Fixed costs whatever the input: the loader reads a short store file in 1 MiB chunks to see
    # whether it is all zeros (mapped_file_queue.is_all_zero), plus the index and checkpoint files.
    memory_slack: int = 4 * 1024 * 1024
    workdir: str | None = None

    def __post_init__(self) -> None:
        logging.getLogger("pyrmq.store").setLevel(logging.CRITICAL)   # recovery narrates every file

    def _root(self) -> str:
        if self.workdir is None:
            # tmpfs when there is one: a run creates and syncs thousands of small stores
            shm = "/dev/shm"
            self.workdir = tempfile.mkdtemp(prefix="pyrmq-fuzz-store-",
                                            dir=shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None)
        root = os.path.join(self.workdir, "store")
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        return root

    def decode(self, data: bytes) -> DefaultMessageStore:
        root = self._root()
        write_store(root, data)
        store = DefaultMessageStore(store_config(root))
        store.load()
        try:
            _serve_reads(store)
        except BaseException:
            store.shutdown()
            raise
        return store

    def reencode(self, store: DefaultMessageStore) -> None:
        try:
            result = store.put_message(_canary(b"after recovery"))
            expect(result.status is PutMessageStatus.PUT_OK, lambda: f"put after recovery: {result.status}")
            assert result.append_result is not None
            offset = result.append_result.logics_offset
        finally:
            store.shutdown()
        again = DefaultMessageStore(store_config(store.config.store_path_root_dir))
        again.load()
        try:
            found = again.get_message("g", CANARY_TOPIC, 0, offset, 1, None)
            expect(found.status is GetMessageStatus.FOUND and found.message_count == 1,
                   lambda: f"the message put after recovery is gone after a restart: {found.status}")
        finally:
            again.shutdown()

    def mutate(self, data: bytes, rng: random.Random, others: Sequence[bytes]) -> bytes:
        """An edit of one file of the image (its bytes, its kind, its length), a file more or less."""
        entries = unpack_entries(data)
        choice = rng.random()
        if not entries or choice < 0.1:
            donor = unpack_entries(rng.choice(others)) if others else []
            kind, payload = rng.choice(donor) if donor else (rng.randrange(len(FILES)), b"")
            entries.insert(rng.randrange(len(entries) + 1), (kind, payload))
        elif choice < 0.2:
            del entries[rng.randrange(len(entries))]
        elif choice < 0.3:
            i = rng.randrange(len(entries))
            kind = entries[i][0] ^ _RAW_SIZE if rng.random() < 0.5 else rng.randrange(256)
            entries[i] = (kind, entries[i][1])
        else:
            i = rng.randrange(len(entries))
            kind, payload = entries[i]
            entries[i] = (kind, mutate.mutate_bytes(payload, rng, [p for _, p in entries]))
        return pack_entries(entries)

    def seeds(self) -> list[bytes]:
        files = seeds.apache_store_files()
        kinds = {path: kind for kind, (path, _) in enumerate(FILES)}

        def head(path: str, size: int) -> bytes:
            return files[path][:size].rstrip(b"\x00")

        # the head of each file: the first ~60 records of the commit log and the units that
        # point at them, so an input stays small and a run fast
        apache = [(kinds[p], head(p, 12000 if p.startswith("commitlog/") else 400)) for p in kinds if p in files]
        small = [(0, head(FILES[0][0], 1500)), (2, head(FILES[2][0], 200)), (5, head("checkpoint", 24))]
        return [pack_entries(apache), pack_entries(small), pack_entries([*small, (7, b"")]),
                pack_entries([(0, head(FILES[0][0], 3000)), (1, b""), (7, b"")])]

    def close(self) -> None:
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
