"""Finding the files of a RocketMQ store and mapping them read-only.

A path given to a data source is either a store root (``storePathRootDir``, holding
``commitlog/``, ``consumequeue/`` and ``index/``) or the files' own directory. Names follow
store.md §1: commit log and consume queue files are named by the offset of their first byte
(:func:`pyrmq.codec.commit_log_walk.file_name_to_offset`); other names are ignored, so a store
copy with stray files (``.bak``, editor droppings) still reads.

Files are mapped with ``ACCESS_READ``: the sources never write, and run against a live store.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass

from pyrmq.codec.commit_log_walk import file_name_to_offset


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One store file named by an offset: its path, the offset of its first byte, its length."""

    path: str
    from_offset: int
    size: int


def _segments(directory: str) -> list[SegmentFile]:
    out = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    for name in names:
        offset = file_name_to_offset(name)
        path = os.path.join(directory, name)
        if offset is None or not os.path.isfile(path):
            continue
        out.append(SegmentFile(path, offset, os.path.getsize(path)))
    out.sort(key=lambda s: s.from_offset)
    return out


def _split_paths(paths: str) -> list[str]:
    # Several paths separated by commas, as Java's storePathCommitLog allows.
    return [p.strip() for p in paths.split(",") if p.strip()]


def commit_log_segments(paths: str) -> list[SegmentFile]:
    """The commit log files under each path (a store root or a ``commitlog`` directory)."""
    out: list[SegmentFile] = []
    for path in _split_paths(paths):
        sub = os.path.join(path, "commitlog")
        out.extend(_segments(sub if os.path.isdir(sub) else path))
    out.sort(key=lambda s: s.from_offset)
    return out


@dataclass(frozen=True, slots=True)
class QueueFile:
    """One consume queue file of ``topic``/``queue_id``."""

    topic: str
    queue_id: int
    file: SegmentFile


def consume_queue_files(paths: str) -> list[QueueFile]:
    """Every consume queue file: ``consumequeue/<topic>/<queueId>/<offset>`` under each path."""
    out = []
    for path in _split_paths(paths):
        sub = os.path.join(path, "consumequeue")
        root = sub if os.path.isdir(sub) else path
        for topic in sorted(os.listdir(root)) if os.path.isdir(root) else []:
            topic_dir = os.path.join(root, topic)
            if not os.path.isdir(topic_dir):
                continue
            for queue in sorted(os.listdir(topic_dir)):
                if not queue.isdigit():
                    continue
                for seg in _segments(os.path.join(topic_dir, queue)):
                    out.append(QueueFile(topic, int(queue), seg))
    return out


def consume_queue_ext_segments(queue_file: QueueFile) -> list[SegmentFile]:
    """The ConsumeQueueExt files of ``queue_file``'s queue: ``consumequeue_ext/<topic>/<queueId>``
    beside the ``consumequeue`` directory it was found in."""
    queue_dir = os.path.dirname(queue_file.file.path)
    cq_root = os.path.dirname(os.path.dirname(queue_dir))
    return _segments(os.path.join(os.path.dirname(cq_root), "consumequeue_ext", queue_file.topic,
                                  str(queue_file.queue_id)))


# IndexFile names are the local creation time, yyyyMMddHHmmssSSS (store.md §5.1).
INDEX_FILE_NAME_DIGITS = 17


def index_files(paths: str) -> list[str]:
    out = []
    for path in _split_paths(paths):
        sub = os.path.join(path, "index")
        root = sub if os.path.isdir(sub) else path
        for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
            full = os.path.join(root, name)
            if len(name) == INDEX_FILE_NAME_DIGITS and name.isdigit() and os.path.isfile(full):
                out.append(full)
    return out


class ReadOnlyMap:
    """A read-only mapping of a whole file (empty files give ``b""``); a context manager."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "rb")
        try:
            size = os.fstat(self._file.fileno()).st_size
            self.buf: mmap.mmap | bytes = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except BaseException:
            self._file.close()
            raise

    def __enter__(self) -> ReadOnlyMap:
        return self

    def __exit__(self, *exc: object) -> None:
        if isinstance(self.buf, mmap.mmap):
            self.buf.close()
        self._file.close()
