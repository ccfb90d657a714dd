"""The NameServer's namespaced key/value store, persisted as kvConfig.json
(``{"configTable":{"ns":{"k":"v"}}}``), written atomically on every change."""

from __future__ import annotations

import logging
from pathlib import Path

from pyrmq.codec import fastjson
from pyrmq.store.config_file import load_json_config, write_atomically

log = logging.getLogger(__name__)


class KVConfigManager:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        def apply(data: dict) -> None:
            self.table = {str(ns): {str(k): str(v) for k, v in kv.items()}
                          for ns, kv in (data.get("configTable") or {}).items() if isinstance(kv, dict)}

        load_json_config(self.path, apply)

    def _persist(self) -> None:
        write_atomically(self.path, fastjson.dumps_pretty({"configTable": self.table}))

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value
        self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        kv = self.table.get(namespace)
        if kv is not None and kv.pop(key, None) is not None:
            if not kv:
                del self.table[namespace]
            self._persist()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        return self.table.get(namespace)
