"""The Java client's captured SEND_MESSAGE_V2 frames replayed into our broker: the answer has the
Apache broker's fields, and the stored record's property bytes have the Apache broker's layout."""

from __future__ import annotations

from pathlib import Path

import trio

from pyrmq.codec.message import decode_messages
from pyrmq.codec.remoting import FrameDecoder
from tests.broker.rmq import pull

FRAMES = Path(__file__).resolve().parents[1] / "fixtures" / "frames"


def frame(name: str):
    decoder = FrameDecoder()
    decoder.receive_data((FRAMES / name).read_bytes())
    return decoder.next_frame()


def raw_properties(record: bytes) -> bytes:
    # the property string is the record's last field, after its int16 length
    start = record.rindex(b"UNIQ_KEY\x01")
    return record[start:]


async def test_send_replay_matches_apache(cluster):
    with trio.fail_after(10):
        host, port = cluster.broker_addr.split(":")
        stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            for suffix in ("json", "rocketmq"):
                await stream.send_all((FRAMES / f"client_send_v2_{suffix}.bin").read_bytes())
                decoder = FrameDecoder()
                while True:
                    decoder.receive_data(await stream.receive_some(65536))
                    answers = list(decoder.frames())
                    if answers:
                        break
                ours, apache = answers[0], frame(f"broker_send_response_{suffix}.bin")
                assert (ours.code, ours.opaque, ours.serialize_type) == (apache.code, apache.opaque, apache.serialize_type)
                assert set(ours.ext_fields) == set(apache.ext_fields)
                assert ours.ext_fields["queueId"] == apache.ext_fields["queueId"]
                assert (ours.ext_fields["MSG_REGION"], ours.ext_fields["TRACE_ON"]) == ("DefaultRegion", "true")
    request = frame("client_send_v2_json.bin")
    queue_id = int(request.ext_fields["e"])
    response, [stored] = await pull(cluster.client, cluster.broker_addr, "TopicTest", queue_id, 0)
    assert stored.body == request.body
    uniq = stored.properties["UNIQ_KEY"]
    ours = raw_properties(bytes(response.body))
    # Apache's stored records (pull fixture): same keys in the same order, no trailing separator
    apache_record = bytes(frame("broker_pull_found_json.bin").body)
    first = decode_messages(apache_record)[0]
    apache_props = raw_properties(apache_record[:first.store_size])
    assert ours == f"UNIQ_KEY\x01{uniq}\x02CLUSTER\x01DefaultCluster\x02TAGS\x01TagA".encode()
    assert apache_props == f"UNIQ_KEY\x01{first.properties['UNIQ_KEY']}\x02CLUSTER\x01DefaultCluster\x02TAGS\x01TagA".encode()
