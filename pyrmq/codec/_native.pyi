# The C functions of _native.c; their Python twins and documentation are in native.py.
from pyrmq.codec.message import WriteBuffer

INDEX_HEADER_SIZE: int
INDEX_SLOT_SIZE: int
INDEX_ITEM_SIZE: int

def topic_key_hash(topic: str, key: str, /) -> int: ...
def index_put(mm: WriteBuffer, hash_slot_num: int, count: int, key_hash: int, phy_offset: int,
              time_diff: int, begin_timestamp: int, end_timestamp: int, begin_phy_offset: int,
              end_phy_offset: int, hash_slot_count: int, /) -> int: ...
