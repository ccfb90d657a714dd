"""Broker config files: a named table with a DataVersion (topics.json, subscriptionGroup.json) and
an ``offsetTable`` file (consumerOffset.json, delayOffset.json); load with backup fallback,
fastjson encode, atomic persist."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Generic, TypeVar

from pyrmq.codec import fastjson
from pyrmq.common.persister import PersistedConfig
from pyrmq.store.config_file import load_json_config

T = TypeVar("T")


class DataVersion:
    def __init__(self) -> None:
        self.timestamp = int(time.time() * 1000)
        self.counter = 0

    def next_version(self) -> None:
        self.timestamp = int(time.time() * 1000)
        self.counter += 1

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    def load(self, obj: dict[str, Any] | None) -> None:
        if isinstance(obj, dict):
            self.counter = int(obj.get("counter", 0))
            self.timestamp = int(obj.get("timestamp", self.timestamp))


class VersionedConfigTable(PersistedConfig, Generic[T]):
    """Subclasses name the JSON member of the table and how an entry reads and writes itself."""

    table_member: str = ""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.table: dict[str, T] = {}
        self.data_version = DataVersion()

    def entry_from_json(self, obj: dict[str, Any]) -> T:
        raise NotImplementedError

    def entry_to_json(self, entry: T) -> dict[str, Any]:
        raise NotImplementedError

    def load(self) -> None:
        def apply(data: dict[str, Any]) -> None:
            entries = {str(name): self.entry_from_json(obj) for name, obj in (data.get(self.table_member) or {}).items()}
            self.table.update(entries)
            self.data_version.load(data.get("dataVersion"))

        load_json_config(self.path, apply)

    def encode(self, pretty: bool = False) -> str:
        obj = {"dataVersion": self.data_version.to_json(),
               self.table_member: {n: self.entry_to_json(e) for n, e in self.table.items()}}
        return fastjson.dumps_pretty(obj) if pretty else fastjson.dumps(obj)


class OffsetTableFile(PersistedConfig):
    """``{"offsetTable": {...}}``; subclasses say how the table reads back (``parse_table``).

    Offsets change with every commit, so they are written periodically when ``dirty``, not on
    every change.
    """

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.offset_table: dict = {}
        self.dirty = False

    def parse_table(self, table: dict[Any, Any]) -> dict:
        raise NotImplementedError

    def load(self) -> None:
        def apply(data: dict[str, Any]) -> None:
            self.offset_table = self.parse_table(data.get("offsetTable") or {})

        load_json_config(self.path, apply)

    def encode(self, pretty: bool = False) -> str:
        obj = {"offsetTable": self.offset_table}
        return fastjson.dumps_pretty(obj) if pretty else fastjson.dumps(obj)

    def persist(self) -> None:
        self.dirty = False
        super().persist()

    def persist_if_dirty(self) -> None:
        """Schedule a write if anything changed since the last one."""
        if self.dirty:
            self.dirty = False
            self.persist_later()
