"""The group commit's syncers: the C ``_syncer.Syncer`` and its Python twin ``ThreadSyncer`` sync
the file they are handed, signal its end through ``fileno()``, report fdatasync's errno, and
refuse the same misuse."""

from __future__ import annotations

import errno
import os
import select

import pytest

from pyrmq.store import file_syncer
from pyrmq.store.file_syncer import ThreadSyncer

try:
    from pyrmq.store._syncer import Syncer
except ImportError:   # built without a C compiler
    Syncer = None   # type: ignore[assignment,misc]

IMPLEMENTATIONS = [pytest.param(ThreadSyncer, id="python")]
if Syncer is not None:
    IMPLEMENTATIONS.append(pytest.param(Syncer, id="c"))


def test_the_c_syncer_is_built_and_chosen():
    if Syncer is None:
        if os.environ.get("CI") == "true":
            pytest.fail("pyrmq.store._syncer was not built (CI=true: pip install -e . must compile it)",
                        pytrace=False)
        pytest.skip("pyrmq.store._syncer not built (no C compiler): the Python twin runs")
    if os.environ.get("PYRMQ_NATIVE", "1") != "0":
        syncer = file_syncer.new_syncer()
        try:
            assert type(syncer) is Syncer
        finally:
            syncer.close()


def _readable(syncer, timeout: float = 10.0) -> bool:
    return bool(select.select([syncer.fileno()], [], [], timeout)[0])


@pytest.fixture(params=IMPLEMENTATIONS)
def syncer(request):
    s = request.param()
    yield s
    s.close()


@pytest.fixture
def fd(tmp_path):
    """A file open for writing."""
    opened = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    yield opened
    os.close(opened)


def test_a_sync_ends_readable_and_finishes_once(syncer, fd):
    os.write(fd, b"x" * 4096)
    assert not _readable(syncer, 0)
    for _ in range(3):   # one thread, many syncs
        syncer.start(fd)
        assert _readable(syncer)
        assert syncer.finish() is None
        assert not _readable(syncer, 0)
    with pytest.raises(RuntimeError, match="no sync was started"):
        syncer.finish()


def test_synced_says_a_sync_ended_well_and_consumes_nothing(syncer, fd):
    """synced(): True from a successful sync's end until the next start, False for a failed
    one; the end stays to be finished (fileno() still readable)."""
    os.write(fd, b"x" * 4096)
    assert not syncer.synced()   # nothing started
    syncer.start(fd)
    assert _readable(syncer)
    assert syncer.synced() and syncer.synced()
    assert _readable(syncer, 0)   # the look read nothing
    syncer.finish()
    assert not syncer.synced()   # finished: no sync to speak of
    read_end, write_end = os.pipe()   # fdatasync of a pipe: EINVAL
    try:
        syncer.start(read_end)
        assert _readable(syncer)
        assert not syncer.synced()
        with pytest.raises(OSError):
            syncer.finish()
    finally:
        os.close(read_end)
        os.close(write_end)


def test_one_sync_at_a_time(syncer, fd):
    syncer.start(fd)
    with pytest.raises(RuntimeError, match="already under way"):
        syncer.start(fd)
    assert _readable(syncer)
    syncer.finish()


def test_the_file_may_be_closed_while_it_is_synced(syncer, fd):
    """The thread syncs a duplicate: closing the caller's descriptor (a file deleted by the clean
    service meanwhile) neither fails the sync nor syncs whatever reuses the number."""
    caller_fd = os.dup(fd)
    syncer.start(caller_fd)
    os.close(caller_fd)
    assert _readable(syncer)
    assert syncer.finish() is None


def test_a_failed_fdatasync_is_its_oserror(syncer):
    read_end, write_end = os.pipe()   # fdatasync of a pipe: EINVAL
    try:
        syncer.start(read_end)
        assert _readable(syncer)
        with pytest.raises(OSError) as failed:
            syncer.finish()
        assert failed.value.errno == errno.EINVAL
        with pytest.raises(OSError) as bad:
            syncer.start(write_end + 1000)   # not open
        assert bad.value.errno == errno.EBADF
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_finish_before_the_end_is_refused(syncer, fd):
    syncer.start(fd)
    try:
        syncer.finish()   # may come before the thread's fdatasync ends, or just after
    except RuntimeError as e:
        assert "not done yet" in str(e)
        assert _readable(syncer)
        syncer.finish()


def test_close_is_idempotent_and_final(syncer, fd):
    syncer.start(fd)
    syncer.close()   # the sync under way ends first
    syncer.close()
    with pytest.raises(ValueError, match="closed"):
        syncer.start(fd)
    with pytest.raises(ValueError, match="closed"):
        syncer.fileno()
