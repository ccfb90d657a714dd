"""Hot reload of ``plain_acl.yml``: a trio task polls the file's identity (inode, size, mtime,
ctime) every ``interval_s`` seconds -- Apache's AclFileWatchService polls modification times
every 5 s -- and on a change reads and parses it in a worker thread, then swaps the validator's
config in one assignment on the loop.

- A file that does not parse keeps the previous config; the error is logged once per version of
  the file, not at every poll.
- A file that changes while it is read (an editor writing in place) is read again at the next
  poll, so a half-written file is never applied.
- A deleted file is an empty config: every request not from a global white address is refused,
  as Apache does (it recreates the file empty).
- The broker's own rewrites (the ACL admin requests, ``admin.py``) take ``lock`` and hand the
  new config and file identity to ``apply_own_write``: the poll, which takes the same lock, then
  sees nothing new, so our own write is not read back as a foreign change.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import trio

from pyrmq.broker.acl.plain_config import AclConfigError, PlainAclConfig, load_plain_acl
from pyrmq.broker.acl.validator import AclValidator

log = logging.getLogger(__name__)

__all__ = ["AclFileWatcher", "DEFAULT_INTERVAL_S", "FileIdentity", "file_identity"]

DEFAULT_INTERVAL_S = 5.0

FileIdentity = tuple[int, int, int, int] | None


def file_identity(path: Path) -> FileIdentity:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class AclFileWatcher:
    def __init__(self, path: Path, validator: AclValidator, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.path = path
        self.validator = validator
        self.interval_s = interval_s
        self.reloads = 0
        self._seen: FileIdentity = None
        # Held by a poll and by a rewrite of the broker's own: one of them at a time.
        self.lock = trio.Lock()

    def load_initial(self) -> None:
        """At start-up (before the loop serves anyone): a broken file is an error the operator
        sees at once; a missing one refuses every request until it appears."""
        self._seen = file_identity(self.path)
        if self._seen is None:
            log.warning("ACL is enabled but %s does not exist: every request not from a global white "
                        "address is refused until it does", self.path)
            self.validator.config = PlainAclConfig()
            return
        self.validator.config = load_plain_acl(self.path)
        log.info("ACL enabled: %d accounts, %d global white addresses from %s",
                 len(self.validator.config.accounts), len(self.validator.config.global_white), self.path)

    def _read_if_changed(self, seen: FileIdentity) -> tuple[FileIdentity, PlainAclConfig | None, str | None]:
        """Worker thread: (identity, new config or None, error or None)."""
        before = file_identity(self.path)
        if before == seen:
            return seen, None, None
        if before is None:
            return None, PlainAclConfig(), None
        try:
            config = load_plain_acl(self.path)
        except FileNotFoundError:
            return seen, None, None          # removed while we read it: the next poll sees that
        except (AclConfigError, OSError) as exc:
            return before, None, str(exc)
        if file_identity(self.path) != before:
            return seen, None, None          # written while we read it: read it again next time
        return before, config, None

    def apply_own_write(self, config: PlainAclConfig, identity: FileIdentity) -> None:
        """The broker wrote the file itself (holding ``lock``): apply it now, and remember its
        identity so that the next poll does not read it again."""
        self.validator.config = config
        self._seen = identity

    async def poll_once(self) -> bool:
        """One look at the file; True when a new config was applied."""
        async with self.lock:
            return await self._poll_locked()

    async def _poll_locked(self) -> bool:
        identity, config, error = await trio.to_thread.run_sync(self._read_if_changed, self._seen)
        changed = identity != self._seen
        self._seen = identity
        if error is not None and changed:
            log.error("ACL file changed but cannot be used, the previous rules stay in force: %s", error)
        if config is None:
            return False
        self.validator.config = config
        self.reloads += 1
        if identity is None:
            log.warning("ACL file %s was removed: every request not from a global white address is refused",
                        self.path)
        else:
            log.info("ACL file %s reloaded: %d accounts, %d global white addresses", self.path,
                     len(config.accounts), len(config.global_white))
        return True

    async def run(self) -> None:
        while True:
            await trio.sleep(self.interval_s)
            try:
                await self.poll_once()
            except Exception:   # the watcher must outlive any surprise; the rules in force stay
                log.exception("ACL file watch of %s failed; trying again in %.0f s", self.path, self.interval_s)
