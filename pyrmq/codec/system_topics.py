"""The names RocketMQ reserves: system topics, the retry and dead-letter topic prefixes, and the
separator of consumerOffset.json's ``topic@group`` keys.

One definition for the broker, the store and the readers of store files (pyrmq_spark), which
must agree with Apache RocketMQ on every one of them.
"""

from __future__ import annotations

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"              # delay-level messages wait here (queue = level - 1)
TIMER_TOPIC = "rmq_sys_wheel_timer"                 # 5.x timer messages wait here
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"                # + group: the group's retry topic
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"                    # + group: the group's dead-letter topic
TOPIC_GROUP_SEPARATOR = "@"                         # consumerOffset.json keys: topic@group
LMQ_PREFIX = "%LMQ%"                                # Apache's light message queues (pyrmq makes none)

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"               # the template auto-created topics copy
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"                  # <cluster>_REPLY_TOPIC

# Clients may not send to these (TopicValidator.isNotAllowedSendTopic).
NOT_ALLOWED_SEND_TOPICS = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC,
                                     TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT})
SYSTEM_TOPICS = frozenset(NOT_ALLOWED_SEND_TOPICS | {AUTO_CREATE_TOPIC_KEY_TOPIC, BENCHMARK_TOPIC, TRACE_TOPIC})


def is_system_topic(topic: str) -> bool:
    """A topic the broker keeps for itself (TopicValidator.isSystemTopic): not created, changed or
    deleted by an admin request."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)

