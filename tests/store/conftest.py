import pytest

from store_helpers import open_store, small_config


@pytest.fixture
def config(tmp_path):
    return small_config(tmp_path / "store")


@pytest.fixture
def store(config):
    s = open_store(config)
    yield s
    s.shutdown()
