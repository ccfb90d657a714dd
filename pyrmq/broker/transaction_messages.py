"""The records of a transaction, built as Apache 4.9.x builds them (its TransactionalMessageBridge,
EndTransactionProcessor and check listener), so that a store holding pending transactions opens
in either broker:

- the half message: the producer's message parked in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with
  ``REAL_TOPIC``/``REAL_QID``, its transaction bits reset to NOT_TYPE (so it has a consume queue
  unit in the half topic, and no consumer subscribes to that topic);
- the op message: ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, tag ``d``, body the half's queue offset in
  decimal -- "this half is resolved" (committed or rolled back);
- the final message of a commit: the half restored to its real topic and queue, COMMIT type,
  ``preparedTransactionOffset`` = the half's commit log offset;
- the re-put half of a check (``TRANSACTION_CHECK_TIMES`` counted up), and the discarded one in
  ``TRANS_CHECK_MAX_TIME_TOPIC`` once the checks ran out.

Pure functions: message in, ``MessageExtBrokerInner`` out; the callers put them.
"""

from __future__ import annotations

from pyrmq.codec.message import (
    MessageConst,
    MessageExt,
    MessageSysFlag,
    properties_to_string,
    tags_string_to_tags_code,
)
from pyrmq.store.message_store import MessageExtBrokerInner
from pyrmq.codec.system_topics import TRANS_HALF_TOPIC as HALF_TOPIC, TRANS_OP_HALF_TOPIC as OP_TOPIC

CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
# The consumer group whose offsets on the half and op queues are the check service's progress.
CHECK_GROUP = "CID_RMQ_SYS_TRANS"
REMOVE_TAG = "d"
# Op messages are a Java Message(topic, "d", body): TAGS then WAIT=true in its property map.
_OP_PROPERTIES = properties_to_string({MessageConst.PROPERTY_TAGS: REMOVE_TAG,
                                       MessageConst.PROPERTY_WAIT_STORE_MSG_OK: "true"})
_OP_TAGS_CODE = tags_string_to_tags_code(REMOVE_TAG)


def half_message(msg: MessageExtBrokerInner, properties: dict[str, str]) -> MessageExtBrokerInner:
    """Park a producer's half message: ``properties`` is its map as the send path left it (WAIT
    put back, as Java's map still holds it); REAL_TOPIC/REAL_QID are added and the whole map is
    written, as Apache's parseHalfMessageInner."""
    properties[MessageConst.PROPERTY_REAL_TOPIC] = msg.topic
    properties[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.properties_string = properties_to_string(properties)
    msg.sys_flag = MessageSysFlag.reset_transaction_value(msg.sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE)
    msg.topic = HALF_TOPIC
    msg.queue_id = 0
    msg.tags_code = tags_string_to_tags_code(properties.get(MessageConst.PROPERTY_TAGS))
    return msg


def op_message(half: MessageExt, store_host: tuple[str, int], now_ms: int) -> MessageExtBrokerInner:
    """The "resolved" mark of ``half`` in the op queue of the half's queue."""
    return MessageExtBrokerInner(
        topic=OP_TOPIC, queue_id=half.queue_id, flag=0, body=str(half.queue_offset).encode(),
        properties_string=_OP_PROPERTIES, sys_flag=0, born_timestamp=now_ms, born_host=store_host,
        store_host=store_host, tags_code=_OP_TAGS_CODE)


def final_message(half: MessageExt, commit_log_offset: int) -> MessageExtBrokerInner:
    """The committed message: the half restored to its real topic and queue. As Apache, the stored
    property string is written before REAL_TOPIC, REAL_QID and TRAN_MSG leave the map, so it keeps
    them (consumers see them, as with Apache)."""
    props = half.properties
    return MessageExtBrokerInner(
        topic=props[MessageConst.PROPERTY_REAL_TOPIC], queue_id=int(props[MessageConst.PROPERTY_REAL_QUEUE_ID]),
        flag=half.flag, body=half.body, properties_string=properties_to_string(props),
        sys_flag=MessageSysFlag.reset_transaction_value(half.sys_flag, MessageSysFlag.TRANSACTION_COMMIT_TYPE),
        born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host,
        reconsume_times=half.reconsume_times, prepared_transaction_offset=commit_log_offset,
        tags_code=tags_string_to_tags_code(props.get(MessageConst.PROPERTY_TAGS)))


def renewed_half(half: MessageExt) -> MessageExtBrokerInner:
    """A half message written again at the end of its queue (before a check, or while immune).
    As Apache's renewHalfMessageInner: flag and reconsume times are not carried over."""
    props = half.properties
    return MessageExtBrokerInner(
        topic=half.topic, queue_id=half.queue_id, flag=0, body=half.body,
        properties_string=properties_to_string(props), sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host,
        tags_code=tags_string_to_tags_code(props.get(MessageConst.PROPERTY_TAGS)))


def immune_half(half: MessageExt) -> MessageExtBrokerInner:
    """The renewed half of a message still inside its CHECK_IMMUNITY_TIME: it remembers the queue
    offset of the first copy (TRAN_PREPARED_QUEUE_OFFSET), whose op the producer's answer writes."""
    key = MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET
    half.properties[key] = half.properties.get(key, str(half.queue_offset))
    return renewed_half(half)


def discarded_half(half: MessageExt) -> MessageExtBrokerInner:
    """A half message checked too often, kept for the operator in TRANS_CHECK_MAX_TIME_TOPIC."""
    props = half.properties
    return MessageExtBrokerInner(
        topic=CHECK_MAX_TIME_TOPIC, queue_id=0, flag=half.flag, body=half.body,
        properties_string=properties_to_string(props), sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host,
        reconsume_times=half.reconsume_times,
        tags_code=tags_string_to_tags_code(props.get(MessageConst.PROPERTY_TAGS)))
