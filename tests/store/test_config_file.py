"""Config files: atomic replace with a .bak of the previous content; loading falls back to it."""

from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager
from pyrmq.store.config_file import load_json_config, write_atomically


def test_write_keeps_backup_and_load_falls_back(tmp_path):
    path = tmp_path / "config" / "consumerOffset.json"
    write_atomically(path, '{"offsetTable":{"T@g":{0:1}}}')
    write_atomically(path, '{"offsetTable":{"T@g":{0:2}}}')
    assert (tmp_path / "config" / "consumerOffset.json.bak").read_text() == '{"offsetTable":{"T@g":{0:1}}}'
    assert not (tmp_path / "config" / "consumerOffset.json.tmp").exists()
    manager = ConsumerOffsetManager(path)
    manager.load()
    assert manager.query_offset("g", "T", 0) == 2
    path.write_text('{"offsetTable":{"T@g":{0:')           # torn by hand: the backup is used
    manager = ConsumerOffsetManager(path)
    manager.load()
    assert manager.query_offset("g", "T", 0) == 1


def test_wrong_shape_moves_on_and_reports_nothing_loaded(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[1,2]")
    seen = []
    assert load_json_config(path, lambda data: seen.append(data["offsetTable"])) is False
    assert seen == []
