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
