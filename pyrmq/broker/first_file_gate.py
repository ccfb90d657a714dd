"""Sends to a queue that has no consume queue file yet wait for it off the event loop.

The first record of a new queue needs its consume queue file: makedirs, open, ftruncate,
fallocate and mmap, about a millisecond that would block every connection of the broker (8,000
of them when a producer starts on 1,000 topics of 8 queues). The send processor hands such a
send here instead: a worker thread creates the file (``DefaultMessageStore.first_file_preparation``),
then the sends parked for that queue are stored in the order they arrived -- a queue keeps the
order of one connection's pipelined sends -- and each is answered as it would have been at once.
Sends arriving while a queue is being prepared park behind the first, so none overtakes it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

import trio

from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.deferred import Deferred
from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

# The put and its answer, run on the loop once the file exists: a response, an answer to await
# (a SYNC_FLUSH or SYNC_MASTER send), or None for a oneway send.
PutAndAnswer = Callable[[], RemotingCommand | Deferred | None]


@dataclass(slots=True)
class _Parked:
    put_and_answer: PutAndAnswer
    done: trio.Event = field(default_factory=trio.Event)
    answer: RemotingCommand | Deferred | None = None
    error: Exception | None = None


class FirstFileGate:
    def __init__(self, store: DefaultMessageStore) -> None:
        self.store = store
        self._parked: dict[tuple[str, int], list[_Parked]] = {}
        self.prepared_queues = 0   # statistics: queue files created by the gate's worker

    def park(self, topic: str, queue_id: int, sys_flag: int, put_and_answer: PutAndAnswer) -> Deferred | None:
        """The answer to await for a send whose queue is being given its first file, or None when
        the send can be stored now (the common case: a queue with a file and room in it)."""
        parked = self._parked.get((topic, queue_id))
        if parked is not None:
            entry = _Parked(put_and_answer)
            parked.append(entry)
            return self._follow(entry)
        prepare = self.store.first_file_preparation(topic, queue_id, sys_flag)
        if prepare is None:
            return None
        entry = _Parked(put_and_answer)
        self._parked[(topic, queue_id)] = [entry]
        return self._lead((topic, queue_id), prepare, entry)

    def needs_gate(self, topic: str, queue_id: int) -> bool:
        """Cheap test for the send path: True when the send may have to park (then call park);
        False also says the queue can take the record's unit now (the store's ``can_take_unit``)."""
        return bool(self._parked) or not self.store.consume_queues.can_take_unit(topic, queue_id)

    async def _lead(self, key: tuple[str, int], prepare: Callable[[], bool], entry: _Parked) -> RemotingCommand | None:
        try:
            # shielded: the sends parked behind this one are stored whatever happens to its connection
            with trio.CancelScope(shield=True):
                if await trio.to_thread.run_sync(prepare):
                    self.prepared_queues += 1
        finally:
            self._release(key)
        return await self._follow(entry)

    def _release(self, key: tuple[str, int]) -> None:
        """Store the sends parked for ``key`` in arrival order, on the loop, in one step."""
        for parked in self._parked.pop(key, []):
            try:
                parked.answer = parked.put_and_answer()
            except Exception as exc:   # answered by resolve() as the processor's own failure
                parked.error = exc
            parked.done.set()

    @staticmethod
    async def _follow(entry: _Parked) -> RemotingCommand | None:
        await entry.done.wait()
        if entry.error is not None:
            raise entry.error
        answer = entry.answer
        if answer is None or isinstance(answer, RemotingCommand):
            return answer
        return await answer
