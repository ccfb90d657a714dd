"""Helpers shared by the store tests."""

from __future__ import annotations

from pyrmq.codec.message import properties_to_string, tags_string_to_tags_code
from pyrmq.store.message_store import (
    DefaultMessageStore,
    MessageExtBatch,
    MessageExtBrokerInner,
    MessageStoreConfig,
)

STORE_HOST = ("10.0.0.1", 10911)
BORN_HOST = ("192.168.1.7", 50000)


def small_config(root, **overrides) -> MessageStoreConfig:
    # small index files too: a default one is 420 MB (sparse, but copied whole by copytree)
    values = dict(store_path_root_dir=str(root), mapped_file_size_commit_log=4096,
                  mapped_file_size_consume_queue=20 * 10, max_hash_slot_num=64, max_index_num=256)
    values.update(overrides)
    return MessageStoreConfig(**values)


def make_msg(topic="TopicTest", queue_id=0, body=b"hello", tags="TagA", sys_flag=0,
             props=None, **kw) -> MessageExtBrokerInner:
    p = {"TAGS": tags} if tags else {}
    p.update(props or {})
    p.setdefault("CLUSTER", "DefaultCluster")
    return MessageExtBrokerInner(
        topic=topic, queue_id=queue_id, flag=0, body=body,
        properties_string=properties_to_string(p), sys_flag=sys_flag,
        born_timestamp=1_700_000_000_000, born_host=BORN_HOST, store_host=STORE_HOST,
        tags_code=tags_string_to_tags_code(tags), **kw)


def make_batch(body: bytes, topic="TopicTest", queue_id=0, props="CLUSTER\x01c\x02") -> MessageExtBatch:
    return MessageExtBatch(
        topic=topic, queue_id=queue_id, flag=0, body=body, properties_string=props, sys_flag=0,
        born_timestamp=1_700_000_000_000, born_host=BORN_HOST, store_host=STORE_HOST)


def open_store(config, **kw) -> DefaultMessageStore:
    store = DefaultMessageStore(config, **kw)
    store.start()
    return store
