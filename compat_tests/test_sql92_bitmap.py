"""SQL92 bloom bitmaps end to end (filter.md section 3.5), on pyrmq and on Apache 4.9.7, both with
``enablePropertyFilter``, ``enableCalcFilterBitMap`` and ``enableConsumeQueueExt``: the Java 4.9.8
push consumer (``MessageSelector.bySql``) subscribes, then messages are produced; it receives exactly
the matching ones, and each message's ConsumeQueueExt unit in the broker's store files holds exactly
the group's three bloom bits when its properties match, none otherwise -- the same bytes from both
implementations.
"""

from __future__ import annotations

import pytest

from compat_tests.checks import assert_received_exactly
from pyrmq.codec.store_formats import CQ_EXT_UNIT_HEAD, CQ_UNIT, ext_undecorate, is_ext_addr
from pyrmq.filter.bloom import BloomFilter

pytestmark = [pytest.mark.compat, pytest.mark.slow,
              pytest.mark.compat_exclude("pyrmq", "client5"), pytest.mark.compat_exclude("apache", "client5")]

COUNT = 40
SELECTOR = "a = 3"
EXT_FILE_SIZE = 48 * 1024 * 1024   # the default: Apache finds ext units by offset % file size


@pytest.fixture(scope="module")
def bitmap_server(module_server_factory):
    return module_server_factory(enablePropertyFilter="true", enableCalcFilterBitMap="true",
                                 enableConsumeQueueExt="true")


def _ext_unit_bitmaps(store_dir, topic: str) -> dict[tuple[int, int], bytes | None]:
    """(queueId, queueOffset) -> the filter bitmap of the unit's ext unit, read from the files."""
    found = {}
    for qdir in (store_dir / "consumequeue" / topic).iterdir():
        files = sorted(qdir.iterdir())
        data = b"".join(f.read_bytes() for f in files)
        base = int(files[0].name)
        ext_dir = store_dir / "consumequeue_ext" / topic / qdir.name
        for n, (offset, size, tags_code) in enumerate(CQ_UNIT.iter_unpack(data[: len(data) // 20 * 20])):
            if not (offset >= 0 and 0 < size < 0x7FFFFFFF):
                continue
            assert is_ext_addr(tags_code), (qdir, n, tags_code)
            real = ext_undecorate(tags_code)
            ext_file = ext_dir / f"{real - real % EXT_FILE_SIZE:020d}"
            with open(ext_file, "rb") as f:
                f.seek(real % EXT_FILE_SIZE)
                head = f.read(CQ_EXT_UNIT_HEAD.size)
                _, _, _, bit_map_size = CQ_EXT_UNIT_HEAD.unpack(head)
                found[(int(qdir.name), base // 20 + n)] = f.read(bit_map_size) if bit_map_size > 0 else None
    return found


def test_java_sql92_consumer_with_bitmaps(bitmap_server, java_client, names):
    group = names.another_group("bitmap")
    consumed = java_client.run("consume", namesrv=bitmap_server.namesrv_addr, topic=names.topic, group=group,
                               sql_expr=SELECTOR, create_topic=4, wait_balanced=1, produce=COUNT, sql_props=1,
                               count=COUNT // 10, idle_ms=2500)
    assert len(consumed.sent) == COUNT
    wanted = [e for e in consumed.sent if e["i"] % 10 == 3]
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(wanted, consumed.received)

    bloom = BloomFilter.from_config(20, 32)
    group_bits = bloom.new_bits()
    bloom.hash_to(bloom.generate(f"{group}#{names.topic}"), group_bits)
    bitmaps = _ext_unit_bitmaps(bitmap_server.config.store_dir, names.topic)
    assert len(bitmaps) == COUNT
    for e in consumed.sent:
        expected = bytes(group_bits) if e["i"] % 10 == 3 else bytes(bloom.m // 8)
        assert bitmaps[(e["queueId"], e["queueOffset"])] == expected, e
