"""What the broker's ACL check costs per request, in process: a signed SEND_MESSAGE_V2 (the Java
client's header fields) through ``AclValidator.validate`` for a few body sizes.

    .venv/bin/python bench/acl_check.py
"""

from __future__ import annotations

import time

from pyrmq.broker.acl.plain_config import parse_plain_acl
from pyrmq.broker.acl.validator import AclValidator
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import make_request
from pyrmq.common.acl.signature import sign_ext_fields

RULES = """
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    defaultTopicPerm: DENY
    topicPerms: [topicB=PUB|SUB]
"""
HEADER = {"a": "pg", "b": "topicB", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000", "h": "0",
          "i": "UNIQ_KEY\x01AC1100000000000000000000000001\x02WAIT\x01true\x02", "j": "0", "k": "false",
          "l": "0", "m": "false"}
ROUNDS = 50_000


def main() -> None:
    validator = AclValidator(parse_plain_acl(RULES))
    for size in (128, 1024, 16 * 1024, 256 * 1024):
        body = b"x" * size
        request = make_request(RequestCode.SEND_MESSAGE_V2, sign_ext_fields(HEADER, body, "RocketMQ", "12345678"), body)
        rounds = max(1000, ROUNDS * 1024 // max(size, 1024))
        start = time.perf_counter()
        for _ in range(rounds):
            validator.validate(request, "127.0.0.1")
        per_call = (time.perf_counter() - start) / rounds
        print(f"body {size:>7} B: {per_call * 1e6:6.1f} us per check ({rounds} checks)")


if __name__ == "__main__":
    main()
