"""The trio remoting layer over real loopback sockets: dispatch rules, oneway, server-to-client
requests, response batching, and every kind of bad input closing only the offending connection."""

from __future__ import annotations

import logging
import struct

import pytest
import trio

from pyrmq.codec.remoting import (
    FrameDecoder,
    RemotingCommand,
    SerializeType,
    encode_command,
    make_request,
)
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.client import RemotingClient
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.server import RemotingServer

ECHO = 1000
FAIL = 1001
NOTE = 1002
ASK_CLIENT = 1003


class Harness:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.server_channels: list[Channel] = []
        table = ProcessorTable("test")
        table.register(ECHO, lambda ch, req: req.response(0, remark=req.field("x"), body=req.body))
        table.register(FAIL, self._fail)
        table.register(NOTE, self._note)
        self.table = table

    @staticmethod
    def _fail(channel, request):
        raise RuntimeError("boom")

    def _note(self, channel, request):
        self.notes.append(request.field("x"))
        return request.response(0)


@pytest.fixture
async def server(nursery):
    harness = Harness()
    srv = RemotingServer(harness.table, "127.0.0.1", 0, on_channel=harness.server_channels.append)
    await nursery.start(srv.serve)
    harness.addr = f"127.0.0.1:{srv.port}"
    harness.port = srv.port
    yield harness
    srv.close()


async def raw_exchange(port: int, data: bytes) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(data)
        received = b""
        with trio.move_on_after(2):
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return received
                received += chunk
        return received + b"<still open>"


async def test_echo_json_and_binary(server):
    with trio.fail_after(5):
        async with RemotingClient() as client:
            for st in SerializeType:
                req = make_request(ECHO, {"x": "hello"}, b"\x00\x01", serialize_type=st)
                resp = await client.invoke(server.addr, req)
                assert (resp.code, resp.remark, resp.body) == (0, "hello", b"\x00\x01")
                assert resp.serialize_type is st          # the response mirrors the request
                assert resp.version == 409 and resp.language == "JAVA"


async def test_unknown_code_and_failing_processor(server):
    with trio.fail_after(5):
        async with RemotingClient() as client:
            resp = await client.invoke(server.addr, make_request(4242))
            assert (resp.code, resp.remark) == (3, " request type 4242 not supported")
            resp = await client.invoke(server.addr, make_request(FAIL))
            assert resp.code == 1 and "boom" in resp.remark


async def test_oneway_gets_no_answer(server):
    with trio.fail_after(5):
        frames = encode_command(make_request(NOTE, {"x": "one"}, oneway=True)) + \
            encode_command(RemotingCommand(code=ECHO, opaque=5, ext_fields={"x": "two"}))
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with stream:
            await stream.send_all(frames)
            decoder = FrameDecoder()
            while True:
                decoder.receive_data(await stream.receive_some(4096))
                got = list(decoder.frames())
                if got:
                    break
        assert [r.opaque for r in got] == [5]
        assert server.notes == ["one"]


async def test_batch_of_requests_answered_in_order(server):
    with trio.fail_after(5):
        data = b"".join(encode_command(RemotingCommand(code=ECHO, opaque=i, ext_fields={"x": str(i)}))
                        for i in range(1, 201))
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with stream:
            await stream.send_all(data)
            decoder = FrameDecoder()
            got = []
            while len(got) < 200:
                decoder.receive_data(await stream.receive_some(65536))
                got.extend(decoder.frames())
        assert [r.opaque for r in got] == list(range(1, 201))
        assert [r.remark for r in got] == [str(i) for i in range(1, 201)]


async def test_server_to_client_request(server):
    client_table = ProcessorTable("client")
    client_table.register(40, lambda ch, req: req.response(0, remark="client saw " + req.field("consumerGroup")))
    with trio.fail_after(5):
        async with RemotingClient(client_table) as client:
            await client.invoke(server.addr, make_request(ECHO))
            [channel] = server.server_channels
            resp = await channel.invoke(make_request(40, {"consumerGroup": "g"}), timeout=2)
            assert resp.remark == "client saw g"


def _frame(header: bytes, serialize_type: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header), (serialize_type << 24) | len(header)) + header


BAD_INPUT = [
    ("frame length over 16 MiB", struct.pack(">II", 16 * 1024 * 1024, 10), "exceeds the limit"),
    ("header length larger than the frame", struct.pack(">II", 8, 1000) + b"{}{}", "larger than the frame"),
    ("unknown serialize type", struct.pack(">II", 6, (9 << 24) | 2) + b"{}", "unknown serialize type 9"),
    ("malformed JSON header", _frame(b'{"code":1,'), "malformed JSON header"),
    ("malformed binary header", _frame(struct.pack(">hBhiii", 1, 0, 1, 1, 0, 99) + b"\x00" * 4, 1), "remark length"),
    ("truncated frame", struct.pack(">II", 100, 2) + b"{}", "truncated frame"),
]


@pytest.mark.parametrize("name,data,reason", BAD_INPUT, ids=[b[0] for b in BAD_INPUT])
async def test_bad_input_closes_only_that_connection(server, caplog, name, data, reason):
    caplog.set_level(logging.DEBUG, logger="pyrmq.remoting")
    with trio.fail_after(10):
        async with RemotingClient() as client:
            # a healthy connection opened before the bad one
            assert (await client.invoke(server.addr, make_request(ECHO, {"x": "a"}))).remark == "a"
            stream = await trio.open_tcp_stream("127.0.0.1", server.port)
            async with stream:
                local = stream.socket.getsockname()
                await stream.send_all(data)
                if name == "truncated frame":
                    await stream.send_eof()
                leftover = b""
                while True:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        break
                    leftover += chunk
            assert leftover == b""    # no answer, just closed
            # the healthy connection keeps working
            assert (await client.invoke(server.addr, make_request(ECHO, {"x": "b"}))).remark == "b"
    closing = [r for r in caplog.records if r.getMessage().startswith("closing connection from")]
    assert len(closing) == 1
    message = closing[0].getMessage()
    assert f"{local[0]}:{local[1]}" in message and reason in message
