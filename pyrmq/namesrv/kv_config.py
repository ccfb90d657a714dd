"""The NameServer's namespaced key/value store, persisted as kvConfig.json
(``{"configTable":{"ns":{"k":"v"}}}``), written atomically after every change, off the event loop
when the NameServer's persister is attached.

The JSON is encoded on the loop (the table is mutated there), so the table is bounded: names of at
most 255 characters, values of at most 64 KiB and 4 MiB in all -- the largest encode stays a few
milliseconds, and a stranger cannot make the NameServer's memory or its writes grow.  The fsync
never runs on the loop, and a burst of puts shares one write."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

from pyrmq.codec import fastjson
from pyrmq.common.persister import PersistedConfig
from pyrmq.store.config_file import load_json_config

log = logging.getLogger(__name__)

MAX_NAME_CHARS: Final = 255
MAX_VALUE_CHARS: Final = 64 * 1024
MAX_TABLE_CHARS: Final = 4 * 1024 * 1024


class KVLimitError(ValueError):
    """A put the table's bounds refuse; the message is the remark for the client."""


class KVConfigManager(PersistedConfig):
    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.table: dict[str, dict[str, str]] = {}
        self.chars = 0   # namespace + key + value characters of every entry

    @staticmethod
    def _entry_chars(namespace: str, key: str, value: str) -> int:
        return len(namespace) + len(key) + len(value)

    def load(self) -> None:
        def apply(data: dict) -> None:
            self.table = {str(ns): {str(k): str(v) for k, v in kv.items()}
                          for ns, kv in (data.get("configTable") or {}).items() if isinstance(kv, dict)}

        load_json_config(self.path, apply)
        self.chars = sum(self._entry_chars(ns, k, v) for ns, kv in self.table.items() for k, v in kv.items())

    def encode(self, pretty: bool = False) -> str:
        obj = {"configTable": self.table}
        return fastjson.dumps_pretty(obj) if pretty else fastjson.dumps(obj)

    def put(self, namespace: str, key: str, value: str) -> None:
        """Set one entry; raises KVLimitError when it would pass the table's bounds."""
        if len(namespace) > MAX_NAME_CHARS or len(key) > MAX_NAME_CHARS:
            raise KVLimitError(f"KV config namespace and key are limited to {MAX_NAME_CHARS} characters")
        if len(value) > MAX_VALUE_CHARS:
            raise KVLimitError(f"KV config value of {len(value)} characters exceeds the limit of {MAX_VALUE_CHARS}")
        old = self.table.get(namespace, {}).get(key)
        old_chars = 0 if old is None else self._entry_chars(namespace, key, old)
        new_chars = self.chars - old_chars + self._entry_chars(namespace, key, value)
        if new_chars > MAX_TABLE_CHARS:
            raise KVLimitError(f"KV config table is full ({MAX_TABLE_CHARS} characters); delete entries first")
        self.table.setdefault(namespace, {})[key] = value
        self.chars = new_chars
        self.persist_later()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        kv = self.table.get(namespace)
        value = None if kv is None else kv.pop(key, None)
        if kv is not None and value is not None:
            self.chars -= self._entry_chars(namespace, key, value)
            if not kv:
                del self.table[namespace]
            self.persist_later()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        return self.table.get(namespace)
