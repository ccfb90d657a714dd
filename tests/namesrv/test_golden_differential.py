"""Differential: the Apache broker's REGISTER_BROKER frames and the Java client's route request,
replayed byte for byte into our NameServer, get the bytes the Apache NameServer answered."""

from __future__ import annotations

from pathlib import Path

import trio

from pyrmq.codec.remoting import FrameDecoder, SerializeType

FRAMES = Path(__file__).resolve().parents[1] / "fixtures" / "frames"


async def exchange(stream, data: bytes):
    await stream.send_all(data)
    decoder = FrameDecoder()
    while True:
        decoder.receive_data(await stream.receive_some(65536))
        frames = list(decoder.frames())
        if frames:
            return frames[0]


def frame(name: str):
    decoder = FrameDecoder()
    decoder.receive_data((FRAMES / name).read_bytes())
    return decoder.next_frame()


async def test_route_bytes_match_apache(namesrv):
    with trio.fail_after(5):
        stream = await trio.open_tcp_stream("127.0.0.1", namesrv.port)
        async with stream:
            register = await exchange(stream, (FRAMES / "broker_register_broker_json.bin").read_bytes())
            apache_register = frame("namesrv_register_broker_response_json.bin")
            assert (register.code, register.ext_fields) == (apache_register.code, apache_register.ext_fields)
            # the oneway re-registration after TopicTest was auto-created: no answer, TopicTest routed
            await stream.send_all((FRAMES / "broker_register_broker_oneway_json.bin").read_bytes())
            for suffix in ("json", "rocketmq"):
                ours = await exchange(stream, (FRAMES / f"client_get_route_{suffix}.bin").read_bytes())
                apache = frame(f"namesrv_route_response_{suffix}.bin")
                assert ours.serialize_type is (SerializeType.JSON if suffix == "json" else SerializeType.ROCKETMQ)
                assert (ours.code, ours.opaque, ours.remark) == (apache.code, apache.opaque, apache.remark)
                assert ours.body == apache.body
