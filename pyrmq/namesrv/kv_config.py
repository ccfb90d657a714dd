"""The NameServer's namespaced key/value store, persisted as kvConfig.json
(``{"configTable":{"ns":{"k":"v"}}}``), written atomically after every change, off the event loop
when the NameServer's persister is attached.

The JSON is encoded on the loop (the table is mutated there): a 10 MB PUT_KV_CONFIG value costs a
10 MB encode on the loop per write, but the fsync never runs there, and a burst of puts shares one
write."""

from __future__ import annotations

import logging
from pathlib import Path

from pyrmq.codec import fastjson
from pyrmq.common.persister import PersistedConfig
from pyrmq.store.config_file import load_json_config

log = logging.getLogger(__name__)


class KVConfigManager(PersistedConfig):
    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        def apply(data: dict) -> None:
            self.table = {str(ns): {str(k): str(v) for k, v in kv.items()}
                          for ns, kv in (data.get("configTable") or {}).items() if isinstance(kv, dict)}

        load_json_config(self.path, apply)

    def encode(self, pretty: bool = False) -> str:
        obj = {"configTable": self.table}
        return fastjson.dumps_pretty(obj) if pretty else fastjson.dumps(obj)

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value
        self.persist_later()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        kv = self.table.get(namespace)
        if kv is not None and kv.pop(key, None) is not None:
            if not kv:
                del self.table[namespace]
            self.persist_later()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        return self.table.get(namespace)
