"""Hostile input over a real socket to a running NameServer + Broker process (`pyrmq standalone`).

Each fault class of issue 7 point 1 is sent as bytes; after each one the process must be alive,
the offending request answered with a RocketMQ code and remark or its connection closed, the
config files still readable, and a canary client must still send and consume.  The peer that
does not read its answers is measured in anonymous memory (RssAnon: pull answers are slices of
mapped files, the heap is what a peer could make grow) and must be disconnected.
"""

from __future__ import annotations

import json
import socket
import struct
import uuid

import pytest
import trio

from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import FrameDecoder, RemotingCommand, encode_command, make_request
from pyrmq.remoting.client import RemotingClient
from tests.broker.rmq import pull, pull_request, send
from tests.test_process import Standalone

pytestmark = pytest.mark.slow

SYSTEM_ERROR = 1


def raw_frame(header: str | bytes, body: bytes = b"") -> bytes:
    """A frame whose JSON header is given as text (escapes and all), not built by our encoder."""
    if isinstance(header, str):
        header = header.encode("utf-8")
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def json_header(code: int, ext: dict[str, str], opaque: int = 7) -> str:
    """A request header whose extFields are written with json.dumps, so "\\ud800" stays an escape."""
    return json.dumps({"code": code, "flag": 0, "language": "JAVA", "opaque": opaque, "version": 401,
                       "extFields": ext})


async def exchange(port: int, data: bytes, timeout: float = 10) -> RemotingCommand | None:
    """Send ``data`` on a new connection; the first answer, or None when the server closed it."""
    with trio.fail_after(timeout):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            try:
                await stream.send_all(data)
            except trio.BrokenResourceError:
                return None   # closed before we finished sending
            decoder = FrameDecoder()
            while True:
                try:
                    chunk = await stream.receive_some(65536)
                except trio.BrokenResourceError:
                    return None
                if not chunk:
                    return None
                decoder.receive_data(chunk)
                for cmd in decoder.frames():
                    return cmd


class Server(Standalone):
    @property
    def port(self) -> int:
        return self.listen_port

    def rss_anon_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
        raise AssertionError("no RssAnon in /proc status")

    async def canary(self) -> None:
        """The process is alive and another client still sends and consumes."""
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        body = uuid.uuid4().bytes
        async with RemotingClient() as client:
            sent = await send(client, self.broker_addr, "CanaryTopic", body)
            assert sent.code == 0, sent.remark
            offset = int(sent.ext_fields["queueOffset"])
            response, messages = await pull(client, self.broker_addr, "CanaryTopic", 0, offset)
            assert response.code == 0 and [m.body for m in messages] == [body]
        for name in ("topics.json", "subscriptionGroup.json"):
            path = self.store / "config" / name
            if path.exists():
                fastjson.loads(path.read_bytes())   # still readable
        kv = self.store / "namesrv" / "kvConfig.json"
        if kv.exists():
            fastjson.loads(kv.read_bytes())


@pytest.fixture
async def server(tmp_path):
    srv = Server(tmp_path, serverChannelWriteTimeoutSeconds=3)
    srv.start()
    try:
        async with RemotingClient() as client:
            await srv.wait_ready(client)
        await srv.canary()
        yield srv
        await srv.canary()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()


SEND_EXT = {"a": "pg", "b": "T\ud800", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0",
            "i": "", "j": "0", "k": "false"}


async def test_lone_surrogates_are_refused_with_a_code(server):
    # a topic name: would have been written to topics.json and the commit log
    answer = await exchange(server.port, raw_frame(json_header(RequestCode.SEND_MESSAGE_V2, SEND_EXT), b"hello"))
    assert (answer.code, answer.opaque) == (SYSTEM_ERROR, 7)
    assert "header field 'b' is not valid Unicode text" in answer.remark
    # a KV value at the NameServer
    kv = {"namespace": "ns", "key": "k", "value": "v\ud800"}
    answer = await exchange(server.namesrv_port, raw_frame(json_header(RequestCode.PUT_KV_CONFIG, kv)))
    assert answer.code == SYSTEM_ERROR and "not valid Unicode text" in answer.remark
    # a consumer group inside a JSON body
    body = json.dumps({"clientID": "c1", "producerDataSet": [], "consumerDataSet": [{
        "groupName": "g\ud800", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [], "unitMode": False}]})
    answer = await exchange(server.port, raw_frame(json_header(RequestCode.HEART_BEAT, {}), body.encode()))
    assert answer.code == SYSTEM_ERROR and "lone UTF-16 surrogate" in answer.remark
    # the remark of a request
    header = json.dumps({"code": RequestCode.HEART_BEAT, "opaque": 3, "remark": "\udfff", "extFields": {}})
    answer = await exchange(server.port, raw_frame(header, b"{}"))
    assert (answer.code, answer.opaque) == (SYSTEM_ERROR, 3)
    await server.canary()
    topics = (server.store / "config" / "topics.json").read_text()
    assert "\\ud800" not in topics and "CanaryTopic" in topics


async def test_malformed_headers_close_the_connection(server):
    cases = {
        "UTF-8-encoded surrogate": b'{"code":34,"opaque":1,"extFields":{"x":"\xed\xa0\x80"}}',
        "deep nesting": '{"code":34,"extFields":' + "[" * 100_000 + "]" * 100_000 + "}",
        "Arabic-Indic digits in code": '{"code":"\u0663\u0664","opaque":1}',
        "Arabic-Indic digits in opaque": '{"code":105,"opaque":"\u0661\u0662","extFields":{"topic":"TBW102"}}',
        "5000-digit opaque": '{"code":105,"opaque":"' + "9" * 5000 + '"}',
        "5000-digit code": '{"code":' + "9" * 5000 + ',"opaque":1}',
        "code beyond int32": '{"code":4294967296,"opaque":1}',
        "not an object": '["code", 34]',
    }
    for name, header in cases.items():
        for port in (server.port, server.namesrv_port):
            assert await exchange(port, raw_frame(header)) is None, name
        assert server.proc.poll() is None, name
    await server.canary()
    log = server.log.read_text()
    assert log.count("closing connection from") >= 2 * len(cases)
    assert "Traceback" not in log


async def test_oversized_header_closes_and_oversized_kv_is_refused(server):
    # 10 MB in one PUT_KV_CONFIG header: more than any header may hold
    huge = {"namespace": "ns", "key": "k", "value": "x" * 10_000_000}
    assert await exchange(server.namesrv_port, raw_frame(json_header(RequestCode.PUT_KV_CONFIG, huge))) is None
    # 100 KB: a header we read, a value the KV table refuses
    big = {"namespace": "ns", "key": "k", "value": "x" * 100_000}
    answer = await exchange(server.namesrv_port, raw_frame(json_header(RequestCode.PUT_KV_CONFIG, big)))
    assert answer.code == SYSTEM_ERROR and "exceeds the limit of 65536" in answer.remark
    long_key = {"namespace": "ns", "key": "k" * 300, "value": "v"}
    answer = await exchange(server.namesrv_port, raw_frame(json_header(RequestCode.PUT_KV_CONFIG, long_key)))
    assert answer.code == SYSTEM_ERROR and "255 characters" in answer.remark
    ok = {"namespace": "ns", "key": "k", "value": "v"}
    answer = await exchange(server.namesrv_port, raw_frame(json_header(RequestCode.PUT_KV_CONFIG, ok)))
    assert answer.code == 0


async def test_numbers_and_names_are_checked_by_java_rules(server):
    bad_numbers = [("\u0661", "queueId"), ("1_0", "queueId"), (" 1", "queueId"), ("9" * 40, "queueOffset")]
    for value, field in bad_numbers:
        request = pull_request("CanaryTopic", 0, 0)
        request.ext_fields[field] = value
        answer = await exchange(server.port, encode_command(request))
        assert answer.code == SYSTEM_ERROR and f"<{field}> is not a number" in answer.remark, (value, answer.remark)
    for group in ("g\n", "g" * 256, "g.h", ""):
        request = pull_request("CanaryTopic", 0, 0, group=group)
        answer = await exchange(server.port, encode_command(request))
        assert answer.code == SYSTEM_ERROR, group
    request = make_request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "bad group", "topic": "CanaryTopic",
                                                                "queueId": "0"})
    answer = await exchange(server.port, encode_command(request))
    assert answer.code == SYSTEM_ERROR and "contains illegal characters" in answer.remark
    answer = await exchange(server.port, raw_frame(json_header(RequestCode.HEART_BEAT, {}), b"[" * 100_000))
    assert answer.code == SYSTEM_ERROR and "nesting too deep" in answer.remark


async def test_a_peer_that_does_not_read_its_answers_is_bounded_then_dropped(server):
    body = b"m" * 60_000
    async with RemotingClient() as client:
        for _ in range(64):
            assert (await send(client, server.broker_addr, "BigTopic", body, queue_id=0)).code == 0
    before = server.rss_anon_kib()
    # 20,000 long polls held on an empty queue, then 20,000 pulls of the same 32 messages (1.9 MB
    # of answers each), never reading an answer.
    held = b"".join(encode_command(pull_request("BigTopic", 1, 0, sys_flag=0x6, suspend_ms=600_000))
                    for _ in range(20_000))
    pulls = b"".join(encode_command(pull_request("BigTopic", 0, 0, max_nums=32)) for _ in range(20_000))
    peak = before

    async def sample(seconds: float) -> None:
        nonlocal peak
        for _ in range(int(seconds / 0.05)):
            await trio.sleep(0.05)
            peak = max(peak, server.rss_anon_kib())

    with trio.fail_after(60):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        async with stream:
            async def write(data: bytes) -> None:
                try:
                    await stream.send_all(data)
                except trio.BrokenResourceError:
                    pass   # the server dropped us while we were still sending

            async with trio.open_nursery() as nursery:
                nursery.start_soon(write, held + pulls)
                await sample(5)
                await server.canary()   # others are served meanwhile
                # one message wakes every held poll: more answers than a connection may queue
                async with RemotingClient() as client:
                    assert (await send(client, server.broker_addr, "BigTopic", body, queue_id=1)).code == 0
                await sample(2)
                with trio.fail_after(20):
                    while "does not read its answers" not in server.log.read_text():
                        await sample(0.2)
                nursery.cancel_scope.cancel()
    growth_mib = (peak - before) / 1024
    assert growth_mib < 200, f"anonymous memory grew by {growth_mib:.0f} MiB"
