"""Durable config files (topics.json, consumerOffset.json, ...): temp file, fsync, rename.

Java's ``MixAll.string2File`` writes ``<file>.tmp``, keeps the previous content as ``<file>.bak``
and renames; a loader falls back to ``.bak`` when the file is missing, empty or unreadable.  We do
the same, adding the fsyncs Java leaves out, so an acknowledged change survives a power cut.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Callable

from pyrmq.codec import fastjson
from pyrmq.codec.errors import ProtocolError
from pyrmq.store import crash_points

log = logging.getLogger(__name__)


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make the creations and renames in ``directory`` durable (its entries, not the files)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike[str], text: str, *, keep_backup: bool = True,
                     keep_mode: bool = False) -> None:
    """Replace ``path`` by ``text`` so that a crash leaves either the old or the new content.

    ``keep_backup``: the previous content stays as ``<file>.bak`` (Java's string2File).
    ``keep_mode``: the new file gets the permissions of the one it replaces -- for a file that
    holds secrets (plain_acl.yml), whose 0600 must stay 0600 and which wants no backup copy."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    data = text.encode("utf-8")
    mode = 0o644
    if keep_mode:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        if keep_mode:
            os.fchmod(fd, mode)   # O_CREAT's mode is filtered by the umask; a kept mode is not
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    crash_points.reach("config.tmp_written")
    if keep_backup and path.exists():
        bak = path.with_name(path.name + ".bak")
        try:
            bak_tmp = path.with_name(path.name + ".bak.tmp")
            bak_tmp.write_bytes(path.read_bytes())
            os.replace(bak_tmp, bak)
        except OSError as exc:   # the backup is a convenience; the new content still goes in
            log.warning("could not keep a backup of %s: %s", path, exc)
    os.replace(tmp, path)
    crash_points.reach("config.renamed")
    fsync_dir(path.parent)


def read_with_backup(path: str | os.PathLike[str]) -> list[tuple[Path, str]]:
    """The candidate contents to load, best first: the file, then its ``.bak``."""
    path = Path(path)
    found = []
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text("utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("cannot read %s: %s", candidate, exc)
            continue
        if text.strip():
            found.append((candidate, text))
    return found


def load_json_config(path: str | os.PathLike[str], apply: Callable[[Any], None]) -> bool:
    """Parse the file (or its ``.bak``) as fastjson and hand it to ``apply``; False if neither was usable.

    ``apply`` raises KeyError/TypeError/ValueError/AttributeError on content of the wrong shape,
    which moves on to the backup.
    """
    for candidate, text in read_with_backup(path):
        try:
            apply(fastjson.loads(text))
            return True
        except (ProtocolError, AttributeError, KeyError, TypeError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", candidate, exc)
    return False
