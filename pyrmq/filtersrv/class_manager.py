"""Which filter class a consumer group uses for a topic, and the policy for getting one.

REGISTER_MESSAGE_FILTER_CLASS names a class and carries its source. A class the operator deployed
(``class_dir``, read at start-up) is used whatever the request carries and for any group: that is
how clients use class filtering without uploading code. Any other class is an upload, refused
unless uploads are enabled and the group is on the allow-list; its CRC (crc32 & 0x7FFFFFFF of the
source) must match. ``python:Name`` classes are Python (a class with ``match(message)``), any other
name is a Java ``MessageFilter``. The Java client uploads its class in every heartbeat: an unchanged
class (same name and CRC) is answered at once.
"""

from __future__ import annotations

import logging
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import trio

from pyrmq.codec.codes import ResponseCode
from pyrmq.filtersrv.config import FiltersrvConfig
from pyrmq.filtersrv.java_toolchain import JAVA_CLASS_NAME, JavaToolchain, JavaUnavailable
from pyrmq.filtersrv.py_worker import PYTHON_CLASS_PREFIX
from pyrmq.filtersrv.workers import FilterLoadError, FilterWorker, jail_argv

log = logging.getLogger(__name__)

MAX_SOURCE_BYTES = 1024 * 1024
_PYTHON_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class RegistrationRefused(Exception):
    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass
class FilterClass:
    class_name: str
    crc: int
    deployed: bool
    worker: FilterWorker


def class_crc(source: bytes) -> int:
    """What the Java client sends as classCRC (UtilAll.crc32)."""
    return zlib.crc32(source) & 0x7FFFFFFF


def is_python_class(class_name: str) -> bool:
    return class_name.startswith(PYTHON_CLASS_PREFIX)


def check_class_name(class_name: str) -> None:
    if is_python_class(class_name):
        ok = _PYTHON_NAME.fullmatch(class_name.removeprefix(PYTHON_CLASS_PREFIX)) is not None
    else:
        ok = JAVA_CLASS_NAME.fullmatch(class_name) is not None
    if not ok:
        raise RegistrationRefused(ResponseCode.SYSTEM_ERROR, f"{class_name!r} is not a filter class name")


def load_deployed(class_dir: str) -> dict[str, bytes]:
    """``class name -> source`` of the operator's directory (Name.py, fully.qualified.Name.java)."""
    deployed: dict[str, bytes] = {}
    if not class_dir:
        return deployed
    for path in sorted(Path(class_dir).iterdir()):
        if path.suffix == ".py" and _PYTHON_NAME.fullmatch(path.stem):
            deployed[PYTHON_CLASS_PREFIX + path.stem] = path.read_bytes()
        elif path.suffix == ".java" and JAVA_CLASS_NAME.fullmatch(path.stem):
            deployed[path.stem] = path.read_bytes()
    return deployed


class FilterClassManager:
    def __init__(self, config: FiltersrvConfig, work_dir: Path, deployed: dict[str, bytes],
                 java: JavaToolchain | None, java_unavailable: str) -> None:
        self.config = config
        self.work_dir = work_dir
        self.deployed = deployed
        self.java = java
        self.java_unavailable = java_unavailable
        self.classes: dict[tuple[str, str], FilterClass] = {}
        self._lock = trio.Lock()

    def find(self, group: str, topic: str) -> FilterClass | None:
        return self.classes.get((group, topic))

    async def register(self, group: str, topic: str, class_name: str, crc: int, body: bytes) -> None:
        check_class_name(class_name)
        deployed = class_name in self.deployed
        if deployed:
            source = self.deployed[class_name]
            crc = class_crc(source)
        else:
            if not self.config.upload_enable:
                raise RegistrationRefused(
                    ResponseCode.NO_PERMISSION,
                    f"filter class upload is disabled on this FilterServer (filterClassUploadEnable=false); "
                    f"{class_name} is not one of the operator's deployed filter classes")
            if group not in self.config.upload_groups:
                raise RegistrationRefused(
                    ResponseCode.NO_PERMISSION,
                    f"consumer group {group} may not upload filter classes (not in filterClassUploadGroups); "
                    f"{class_name} is not one of the operator's deployed filter classes")
            if len(body) > MAX_SOURCE_BYTES:
                raise RegistrationRefused(ResponseCode.SYSTEM_ERROR,
                                          f"filter class source of {len(body)} bytes exceeds {MAX_SOURCE_BYTES}")
            if class_crc(body) != crc:
                raise RegistrationRefused(ResponseCode.SYSTEM_ERROR,
                                          f"classCRC {crc} does not match the source (crc32 {class_crc(body)})")
            source = body
        async with self._lock:
            current = self.classes.get((group, topic))
            if current is not None and current.class_name == class_name and current.crc == crc:
                return
            worker = await self._worker(f"{group}/{topic}/{class_name}", class_name, source)
            try:
                await worker.load()
            except FilterLoadError as exc:
                worker.close()
                raise RegistrationRefused(ResponseCode.SYSTEM_ERROR, str(exc)) from None
            self.classes[(group, topic)] = FilterClass(class_name, crc, deployed, worker)
            if current is not None:
                current.worker.close()
            log.info("filter class %s registered for group %s, topic %s (%s)", class_name, group, topic,
                     "deployed" if deployed else "uploaded")

    async def _worker(self, name: str, class_name: str, source: bytes) -> FilterWorker:
        limits = self.config.limits
        if is_python_class(class_name):
            argv = [*jail_argv(["--cpu-seconds", str(limits.cpu_seconds), "--address-space-mb", str(limits.memory_mb)],
                               str(self.work_dir / "cwd")), "python"]
            return FilterWorker(name, argv, class_name, source, limits)
        if self.java is None:
            raise RegistrationRefused(ResponseCode.SYSTEM_ERROR, f"cannot register {class_name}: {self.java_unavailable}")
        try:
            classes = await self.java.compile(class_name, source)
        except ValueError as exc:
            raise RegistrationRefused(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        except JavaUnavailable as exc:
            raise RegistrationRefused(ResponseCode.SYSTEM_ERROR, f"cannot register {class_name}: {exc}") from None
        return FilterWorker(name, self.java.worker_argv(), class_name, str(classes).encode(), limits)

    def close(self) -> None:
        for filter_class in self.classes.values():
            filter_class.worker.close()
        self.classes.clear()
