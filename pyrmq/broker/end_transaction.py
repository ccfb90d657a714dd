"""END_TRANSACTION (37): a producer commits or rolls back a half message (spec/codes.md 3.5).

Commit: the half message is read back by its commit log offset, checked against the request
(producer group, queue offset, commit log offset), put to its real topic as a COMMIT message, and
an op message marks the half resolved. Rollback: only the op message. Both puts happen in one
synchronous step of the event loop, so no kill of the process can leave a committed message
without its op (the check service would otherwise ask the producer again and commit twice).

The clients send this request oneway; the answer codes and remarks are Apache's all the same
(a client that waits for an answer gets them).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from pyrmq.broker.config import BrokerRole
from pyrmq.broker.transaction_messages import final_message, op_message
from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.message import MessageConst, MessageExt, MessageSysFlag
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.headers import optional_bool, required_int, required_str
from pyrmq.store.message_store import PutMessageStatus

if TYPE_CHECKING:
    from pyrmq.broker.config import BrokerConfig
    from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger("pyrmq.transaction")

_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
# Put outcomes that still stored the message count as success, as Apache's sendFinalMessage.
_STORED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
           PutMessageStatus.SLAVE_NOT_AVAILABLE)


class EndTransactionProcessor:
    def __init__(self, *, config: BrokerConfig, store: DefaultMessageStore) -> None:
        self.config = config
        self.store = store
        self.store_host = (config.broker_ip1, config.listen_port)
        self.max_message_size = store.config.max_message_size
        self.commits = 0
        self.rollbacks = 0

    def process(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        if self.config.broker_role is BrokerRole.SLAVE:
            log.warning("Message store is slave mode, so end transaction is forbidden.")
            return request.response(ResponseCode.SLAVE_NOT_AVAILABLE)
        producer_group = required_str(request, "producerGroup")
        table_offset = required_int(request, "tranStateTableOffset")
        commit_log_offset = required_int(request, "commitLogOffset")
        kind = required_int(request, "commitOrRollback")
        from_check = optional_bool(request, "fromTransactionCheck")
        if kind not in (_COMMIT, _ROLLBACK):
            # NOT_TYPE (the producer does not know yet) and anything else: no answer, as Apache.
            log.warning("%s producer[%s] %s, and it's pending status. RequestHeader: %s Remark: %s",
                        "Check" if from_check else "The", channel.remote_addr,
                        "transaction state" if from_check else "end transaction in sending message",
                        request.ext_fields, request.remark)
            return None
        if from_check or kind == _ROLLBACK:
            what = "the producer commit the message" if kind == _COMMIT else "rollback the message"
            log.warning("%s producer[%s] %s. RequestHeader: %s Remark: %s",
                        "Check" if from_check else "The", channel.remote_addr, what, request.ext_fields,
                        request.remark)
        half = self.store.look_message_by_offset(commit_log_offset)
        refused = self._check_half(half, producer_group, table_offset, commit_log_offset)
        if refused is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, refused)
        assert half is not None
        if kind == _ROLLBACK:
            self._put_op(half)
            self.rollbacks += 1
            return request.response(ResponseCode.SUCCESS)
        code, remark = self._put_final(half, commit_log_offset)
        if code == ResponseCode.SUCCESS:
            self._put_op(half)
            self.commits += 1
        return request.response(code, remark)

    @staticmethod
    def _check_half(half: MessageExt | None, producer_group: str, table_offset: int,
                    commit_log_offset: int) -> str | None:
        if half is None:
            return "Find prepared transaction message failed"
        if half.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP) != producer_group:
            return "The producer group wrong"
        if half.queue_offset != table_offset:
            return "The transaction state table offset wrong"
        if half.commit_log_offset != commit_log_offset:
            return "The commit log offset wrong"
        return None

    def _put_final(self, half: MessageExt, commit_log_offset: int) -> tuple[int, str | None]:
        try:
            inner = final_message(half, commit_log_offset)
        except (KeyError, ValueError):
            return ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed"
        status = self.store.put_message(inner).status
        if status in _STORED:
            return ResponseCode.SUCCESS, None
        if status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED:
            return ResponseCode.SYSTEM_ERROR, "Create mapped file failed."
        if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
            return ResponseCode.MESSAGE_ILLEGAL, (
                f"The message is illegal, maybe msg body or properties length not matched. msg body length limit "
                f"{self.max_message_size}B, msg properties length limit 32KB.")
        if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
            return ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."
        if status is PutMessageStatus.OS_PAGECACHE_BUSY:
            return ResponseCode.SYSTEM_ERROR, "OS page cache busy, please try another machine"
        return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"

    def _put_op(self, half: MessageExt) -> None:
        result = self.store.put_message(op_message(half, self.store_host, int(time.time() * 1000)))
        if result.status is not PutMessageStatus.PUT_OK:
            log.error("Transaction op message write failed. messageId is %s, queueId is %d: %s",
                      half.msg_id, half.queue_id, result.status.name)
