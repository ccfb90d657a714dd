# The C functions of _native.c; pyrmq.codec.native binds them, their Python twins sit next to their formats.
from pyrmq.codec.message import RecordInfo, WriteBuffer

INDEX_HEADER_SIZE: int
INDEX_SLOT_SIZE: int
INDEX_ITEM_SIZE: int
TRANSACTION_MASK: int
TRANSACTION_ROLLBACK_TYPE: int
KEY_SEPARATOR_CHAR: int
BATCH_ENTRY_HEAD_SIZE: int
QUEUE_OFFSET_POSITION: int
PHYSICAL_OFFSET_POSITION: int
RECORD_PREFIX_V4_SIZE: int
MAGIC_CODE_V1: int
MAGIC_CODE_V2: int
MAX_TOPIC_LENGTH_V1: int
MAX_PROPERTIES_LENGTH: int
BORNHOST_V6_FLAG: int
STOREHOSTADDRESS_V6_FLAG: int
HASHMAP_INITIAL_BUCKETS: int
ROCKETMQ_FIXED_SIZE: int
FRAME_PREFIX_SIZE: int
MAX_HEADER_LENGTH: int
ROCKETMQ_SERIALIZE_TYPE: int
SEND_HEADER_FIELD_COUNT: int

def topic_key_hash(topic: str, key: str, /) -> int: ...
def index_put(mm: WriteBuffer, hash_slot_num: int, count: int, key_hash: int, phy_offset: int,
              time_diff: int, begin_timestamp: int, end_timestamp: int, begin_phy_offset: int,
              end_phy_offset: int, hash_slot_count: int, /) -> int: ...
def index_build_records(mm: WriteBuffer, hash_slot_num: int, count_limit: int, records: list[RecordInfo], start: int,
                        uniq_key_name: str, keys_name: str, count: int, hash_slot_count: int, begin_timestamp: int,
                        begin_phy_offset: int, end_phy_offset: int, end_timestamp: int,
                        /) -> tuple[int, int, int, int, int]: ...
def decode_ext_fields(data: bytes | memoryview, max_fields: int, /) -> dict[str, str]: ...
def encode_ext_fields(ext: dict[str, str], /) -> bytes: ...
def decode_rocketmq_header(data: bytes | memoryview, max_fields: int, /) -> tuple[
    int, int, int, int, int, str | None, dict[str, str] | None]: ...
def decode_frames(buffer: bytes | bytearray | memoryview, pos: int, max_frame_bytes: int, max_header_bytes: int,
                  max_fields: int, /) -> tuple[list[tuple[int, int, int, int, int, str | None, dict[str, str] | None,
                                                         bytes | None]], int]: ...
def encode_rocketmq_frame_head(code: int, language: int, version: int, opaque: int, flag: int,
                               remark: str | None, ext: dict[str, str], body_len: int, /) -> bytes: ...
def split_batch(body: bytes | memoryview, max_entries: int, /) -> list[tuple[int, bytes, str]]: ...
def string_to_properties(s: str | None, /) -> dict[str, str]: ...
def plain_send_fields(header: dict[str, str], names: tuple[str, ...], property_names: tuple[str, ...], cluster: str,
                      /) -> tuple[str, int, int, int, int, str, bool, int, int] | None: ...
def property_value(properties: str, name: str, /) -> str | None: ...
def encode_record(buf: WriteBuffer, pos: int, limit: int, topic: str, properties: str, body: bytes | memoryview,
                  queue_id: int, flag: int, sys_flag: int, born_timestamp: int, born_ip: bytes, born_port: int,
                  store_ip: bytes, store_port: int, reconsume_times: int, prepared_transaction_offset: int,
                  queue_offset: int, physical_offset: int, store_timestamp: int, /) -> int: ...
def encode_records(buf: WriteBuffer, pos: int, room: int, max_size: int, topic: str, properties: list[str],
                   entries: list[tuple[int, bytes, str]], queue_id: int, sys_flag: int, born_timestamp: int,
                   born_ip: bytes, born_port: int, store_ip: bytes, store_port: int, reconsume_times: int,
                   first_queue_offset: int, base_offset: int, store_timestamp: int, /) -> list[int] | None: ...
def parse_java_int(text: str, bits: int = 64) -> int: ...
def properties_to_string(props: dict[str, str], entries_held: int = 0, /) -> str: ...
def merge_queue_datas(table: dict[str, dict[str, object]], broker_name: str, rows: list[object],
                      interned: dict[object, object], make: object, /) -> list[str]: ...
