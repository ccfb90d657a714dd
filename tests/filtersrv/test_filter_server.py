"""A broker (the real `pyrmq standalone` process) with filterServerNums=1: the FilterServer it
starts registers and appears in routes, refuses uploads from groups off the allow-list, serves
class-filter pulls through a Python filter class that loops, exhausts memory and raises on some
messages, and is started again within one check period after a kill -9."""

from __future__ import annotations

import os
import signal
import tempfile
import time
import zlib
from pathlib import Path

import pytest
import trio

from pyrmq.broker.filter_server_manager import CHECK_PERIOD_S
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message import decode_messages
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient
from tests.broker.rmq import pull_request, send
from tests.test_process import standalone  # noqa: F401 -- the fixture

TOPIC = "FilterTopic"
FLAG_CLASS_FILTER = 0x8

EVEN_SEQ = b'''
class EvenSeq:
    def match(self, message):
        seq = int(message.properties["seq"])
        if seq == 4:
            while True:
                pass
        if seq == 6:
            hoard = []
            while True:
                hoard.append(bytearray(1 << 24))
        if seq == 8:
            raise ValueError("a filter bug")
        return seq % 2 == 0 and message.tags == "T" + str(seq % 3) and message.topic == "FilterTopic"
'''


def filter_server_pids(parent: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"filtersrv" in cmdline:
            pids.append(int(entry.name))
    return pids


async def route_filter_servers(client: RemotingClient, server) -> list[str]:
    route = await client.invoke(server.namesrv_addr, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                  {"topic": TOPIC}), timeout=3)
    if route.code != 0:
        return []
    table = fastjson.loads(route.body).get("filterServerTable") or {}
    return table.get(server.broker_addr, [])


async def wait_for_filter_server(client: RemotingClient, server, timeout: float) -> str:
    with trio.fail_after(timeout):
        while True:
            servers = await route_filter_servers(client, server)
            if servers:
                return servers[0]
            await trio.sleep(0.2)


def register_request(group: str, source: bytes, class_name: str = "python:EvenSeq", crc: int | None = None):
    return make_request(RequestCode.REGISTER_MESSAGE_FILTER_CLASS, {
        "consumerGroup": group, "topic": TOPIC, "className": class_name,
        "classCRC": str(zlib.crc32(source) & 0x7FFFFFFF if crc is None else crc)}, source)


async def pull_through(client: RemotingClient, fs_addr: str, group: str, end: int) -> tuple[list[str], list]:
    """Pull queue 0 through the FilterServer from offset 0 until nextBeginOffset reaches ``end``."""
    bodies: list[str] = []
    answers = []
    offset = 0
    while offset < end:
        response = await client.invoke(fs_addr, pull_request(TOPIC, 0, offset, group=group,
                                                             sys_flag=FLAG_CLASS_FILTER), timeout=30)
        answers.append(response)
        assert response.code in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY), response
        if response.code == ResponseCode.SUCCESS:
            bodies += [m.body.decode() for m in decode_messages(response.body)]
        offset = int(response.ext_fields["nextBeginOffset"])
    return bodies, answers


@pytest.mark.slow
async def test_broker_started_filter_server(standalone):  # noqa: F811
    server = standalone(filterServerNums=1, filterClassUploadEnable="true", filterClassUploadGroups="G_OK;G_TWO",
                        filterMatchTimeoutMillis=500)
    server.start()
    async with RemotingClient() as client:
        await server.wait_ready(client)
        for i in range(12):
            answer = await send(client, server.broker_addr, TOPIC, f"m-{i}".encode(), tags=f"T{i % 3}",
                                extra={"seq": str(i)})
            assert answer.code == 0
        fs_addr = await wait_for_filter_server(client, server, 20)
        [pid] = filter_server_pids(server.proc.pid)

        # Not on the allow-list: refused, with the reason.
        refused = await client.invoke(fs_addr, register_request("G_BAD", EVEN_SEQ), timeout=10)
        assert refused.code == ResponseCode.NO_PERMISSION
        assert "G_BAD may not upload filter classes" in refused.remark and "filterClassUploadGroups" in refused.remark
        unknown = await client.invoke(fs_addr, pull_request(TOPIC, 0, 0, group="G_BAD", sys_flag=FLAG_CLASS_FILTER))
        assert (unknown.code, unknown.remark) == (ResponseCode.SYSTEM_ERROR, "Find Filter class failed, not registered")
        # A CRC that does not match the source is refused too.
        bad_crc = await client.invoke(fs_addr, register_request("G_OK", EVEN_SEQ, crc=1), timeout=10)
        assert bad_crc.code == ResponseCode.SYSTEM_ERROR and "classCRC" in bad_crc.remark

        ok = await client.invoke(fs_addr, register_request("G_OK", EVEN_SEQ), timeout=10)
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        bodies, answers = await pull_through(client, fs_addr, "G_OK", 12)
        # 4 loops, 6 exhausts its memory, 8 raises: each rejected alone; odd ones do not match.
        assert bodies == ["m-0", "m-2", "m-10"]
        assert all(a.ext_fields["suggestWhichBrokerId"] == "0" and a.ext_fields["maxOffset"] == "12" for a in answers)

        # kill -9: a new FilterServer within one check period, registered and routed again.
        killed_at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        with trio.fail_after(CHECK_PERIOD_S + 2):
            while not [p for p in filter_server_pids(server.proc.pid) if p != pid]:
                await trio.sleep(0.1)
        restarted_s = time.monotonic() - killed_at
        fs_addr2 = await wait_for_filter_server(client, server, 10)
        # the killed one's work directory (compiled classes, copied jars) is gone
        assert not list(Path(tempfile.gettempdir()).glob(f"pyrmq-filtersrv-{pid}-*"))
        assert fs_addr2 == fs_addr   # the same port: clients' routes stay valid
        ok = await client.invoke(fs_addr2, register_request("G_TWO", EVEN_SEQ), timeout=10)
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        bodies, _ = await pull_through(client, fs_addr2, "G_TWO", 12)
        assert bodies == ["m-0", "m-2", "m-10"]
        print(f"FilterServer back {restarted_s:.1f} s after kill -9")

        assert server.stop() == 0
        assert filter_server_pids(server.proc.pid) == []
