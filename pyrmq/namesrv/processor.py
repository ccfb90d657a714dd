"""NameServer request processors, keyed by request code (spec/codes.md section 7)."""

from __future__ import annotations

import logging
import struct
import zlib
from typing import TYPE_CHECKING, Any, Callable

from pyrmq.codec import fastjson
from pyrmq.codec.admin_bodies import KVTable
from pyrmq.codec.codes import RequestCode, ResponseCode, TopicSysFlag
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.namesrv_bodies import TopicList
from pyrmq.codec.register_body import decode_register_body, register_body_of_json
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.namesrv.kv_config import KVLimitError
from pyrmq.namesrv.runtime_config import UPDATE_NAMESRV_CONFIG, parse_runtime_changes
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.deferred import Deferred
from pyrmq.remoting.dispatch import ProcessorTable, RequestError
from pyrmq.remoting.headers import optional_bool, optional_int, required_int, required_str

if TYPE_CHECKING:
    from pyrmq.common.persister import ConfigPersister
    from pyrmq.namesrv.controller import NamesrvConfig
    from pyrmq.namesrv.kv_config import KVConfigManager
    from pyrmq.namesrv.route_info import RouteInfoManager

log = logging.getLogger(__name__)

# Request version from which the Java NameServer answers routes in standard JSON (V4_9_4).
STANDARD_JSON_MIN_VERSION = 401
ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"
FAQ_URL = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
# Bounds for the compressed RegisterBrokerBody: a broker with a million topics is not one we serve.
MAX_REGISTER_TOPICS = 1_000_000
MAX_REGISTER_INFLATED_BYTES = 256 * 1024 * 1024

_INT32 = struct.Struct(">i")


def _body_json(request: RemotingCommand) -> Any:
    if not request.body:
        return None
    try:
        return fastjson.loads(request.body)
    except ProtocolError as exc:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"malformed body: {exc}") from None


def decode_compressed_register_body(data: bytes) -> dict[str, Any]:
    """RegisterBrokerBody as Java writes it with ``compressedRegister=true`` (codes.md §7)."""
    inflater = zlib.decompressobj()
    raw = inflater.decompress(data, MAX_REGISTER_INFLATED_BYTES)
    if inflater.unconsumed_tail:
        raise ValueError("compressed register body inflates beyond the limit")
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(raw):
            raise ValueError("truncated compressed register body")
        chunk = raw[pos:pos + n]
        pos += n
        return chunk

    def take_int() -> int:
        return _INT32.unpack(take(4))[0]

    data_version = fastjson.loads(take(take_int()))
    count = take_int()
    if not 0 <= count <= MAX_REGISTER_TOPICS:
        raise ValueError(f"bad topic count {count}")
    table = {}
    for _ in range(count):
        tokens = take(take_int()).decode("utf-8").split(" ", 5)
        if len(tokens) < 5:
            raise ValueError("bad topic config entry")
        name, read, write, perm, filter_type = tokens[:5]
        table[name] = {"topicName": name, "readQueueNums": int(read), "writeQueueNums": int(write),
                       "perm": int(perm), "topicFilterType": filter_type}
    filter_servers = fastjson.loads(take(take_int())) if pos < len(raw) else []
    return {"topicConfigSerializeWrapper": {"dataVersion": data_version, "topicConfigTable": table},
            "filterServerList": filter_servers or []}


def build_processors(*, config: NamesrvConfig, routes: RouteInfoManager, kv: KVConfigManager,
                     persister: ConfigPersister) -> ProcessorTable:
    """The NameServer's processors over the route table, the KV table and their persister."""
    table = ProcessorTable("namesrv")

    def register_broker(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        broker_name = required_str(request, "brokerName")
        broker_addr = required_str(request, "brokerAddr")
        cluster = required_str(request, "clusterName")
        ha_server_addr = required_str(request, "haServerAddr")
        broker_id = required_int(request, "brokerId")
        body_crc = optional_int(request, "bodyCrc32", 0) or 0
        if body_crc and request.body and (zlib.crc32(request.body) & 0x7FFFFFFF) != body_crc:
            return request.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        if request.body and optional_bool(request, "compressed"):
            try:
                body = decode_compressed_register_body(request.body)
            except (ValueError, zlib.error, ProtocolError, UnicodeDecodeError) as exc:
                return request.response(ResponseCode.SYSTEM_ERROR, f"bad compressed register body: {exc}")
            registered = register_body_of_json(body)
        else:   # the usual body in one typed pass; any other through the generic parse
            registered = ((decode_register_body(request.body) if request.body else None)
                          or register_body_of_json(_body_json(request) or {}))
        result = routes.register_broker(
            cluster, broker_addr, broker_name, broker_id, ha_server_addr,
            registered.data_version, registered.topics, registered.filter_servers, channel)
        ext: dict[str, str] = {}
        if result.ha_server_addr:
            ext["haServerAddr"] = result.ha_server_addr
        if result.master_addr:
            ext["masterAddr"] = result.master_addr
        order_conf = kv.namespace(ORDER_TOPIC_CONFIG_NAMESPACE)
        resp_body = KVTable(order_conf).encode() if order_conf else None
        return request.response(ResponseCode.SUCCESS, ext_fields=ext, body=resp_body)

    def unregister_broker(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        routes.unregister_broker(required_str(request, "clusterName"), required_str(request, "brokerAddr"),
                                 required_str(request, "brokerName"), required_int(request, "brokerId"))
        return request.response(ResponseCode.SUCCESS)

    def query_data_version(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        broker_addr = required_str(request, "brokerAddr")
        data_version = _body_json(request) or {}
        changed = routes.is_data_version_changed(broker_addr, data_version)
        if not changed:
            routes.update_broker_timestamp(broker_addr)
        stored = routes.broker_data_version(broker_addr)
        return request.response(ResponseCode.SUCCESS, ext_fields={"changed": "true" if changed else "false"},
                                body=fastjson.dumps(stored).encode() if stored else None)

    def get_route(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = required_str(request, "topic")
        standard = (request.version >= STANDARD_JSON_MIN_VERSION
                    or optional_bool(request, "acceptStandardJsonOnly"))
        order_conf = kv.get(ORDER_TOPIC_CONFIG_NAMESPACE, topic) if config.order_message_enable else None
        body = routes.topic_route_body(topic, standard, order_conf or None)
        if body is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST,
                                    f"No topic route info in name server for the topic: {topic}{FAQ_URL}")
        return request.response(ResponseCode.SUCCESS, body=body)

    def cluster_info(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=routes.cluster_info().encode())

    def topic_list(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=TopicList(tuple(routes.all_topics())).encode())

    def topics_by_cluster(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topics = routes.topics_by_cluster(required_str(request, "cluster"))
        return request.response(ResponseCode.SUCCESS, body=TopicList(tuple(topics)).encode())

    def system_topics(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=routes.system_topic_list().encode())

    # GET_UNIT_TOPIC_LIST (311), GET_HAS_UNIT_SUB_TOPIC_LIST (312), GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST
    # (313): topics by the unit bits of their topicSysFlag
    def unit_topics(pick: Callable[[int], bool]):
        def process(channel: Channel, request: RemotingCommand) -> RemotingCommand:
            return request.response(ResponseCode.SUCCESS, body=TopicList(tuple(routes.topics_by_sys_flag(pick))).encode())
        return process

    def delete_topic(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        routes.delete_topic(required_str(request, "topic"))
        return request.response(ResponseCode.SUCCESS)

    def change_write_perm(wipe: bool, key: str):
        def process(channel: Channel, request: RemotingCommand) -> RemotingCommand:
            count = routes.change_write_perm(required_str(request, "brokerName"), wipe)
            return request.response(ResponseCode.SUCCESS, ext_fields={key: str(count)})
        return process

    def put_kv(channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred:
        try:
            kv.put(required_str(request, "namespace"), required_str(request, "key"), required_str(request, "value"))
        except KVLimitError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        return persister.answer_when_written(request, kv.path.name)

    def get_kv(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        namespace = required_str(request, "namespace")
        key = required_str(request, "key")
        value = kv.get(namespace, key)
        if value is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND,
                                    f"No config item, Namespace: {namespace} Key: {key}")
        return request.response(ResponseCode.SUCCESS, ext_fields={"value": value})

    def delete_kv(channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred:
        kv.delete(required_str(request, "namespace"), required_str(request, "key"))
        return persister.answer_when_written(request, kv.path.name)

    def kv_list(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        namespace = required_str(request, "namespace")
        table_ = kv.namespace(namespace)
        if table_ is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return request.response(ResponseCode.SUCCESS, body=KVTable(table_).encode())

    def update_config(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        if request.body:
            changes = parse_runtime_changes(request.body)
            config.order_message_enable = changes.get("orderMessageEnable", config.order_message_enable)
            log.info("NameServer config changed by %s: %s", channel.remote_addr, changes)
        return request.response(ResponseCode.SUCCESS)

    def get_config(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in sorted(config.as_properties().items()))
        return request.response(ResponseCode.SUCCESS, body=text.encode())

    table.register(RequestCode.REGISTER_BROKER, register_broker)
    table.register(RequestCode.UNREGISTER_BROKER, unregister_broker)
    table.register(RequestCode.QUERY_DATA_VERSION, query_data_version)
    table.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, get_route)
    table.register(RequestCode.GET_BROKER_CLUSTER_INFO, cluster_info)
    table.register(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, topic_list)
    table.register(RequestCode.GET_TOPICS_BY_CLUSTER, topics_by_cluster)
    table.register(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, system_topics)
    table.register(RequestCode.DELETE_TOPIC_IN_NAMESRV, delete_topic)
    unit, unit_sub = TopicSysFlag.FLAG_UNIT, TopicSysFlag.FLAG_UNIT_SUB
    table.register(RequestCode.GET_UNIT_TOPIC_LIST, unit_topics(lambda flag: bool(flag & unit)))
    table.register(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST, unit_topics(lambda flag: bool(flag & unit_sub)))
    table.register(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
                   unit_topics(lambda flag: not flag & unit and bool(flag & unit_sub)))
    table.register(RequestCode.WIPE_WRITE_PERM_OF_BROKER, change_write_perm(True, "wipeTopicCount"))
    table.register(RequestCode.ADD_WRITE_PERM_OF_BROKER, change_write_perm(False, "addTopicCount"))
    table.register(RequestCode.PUT_KV_CONFIG, put_kv)
    table.register(RequestCode.GET_KV_CONFIG, get_kv)
    table.register(RequestCode.DELETE_KV_CONFIG, delete_kv)
    table.register(RequestCode.GET_KVLIST_BY_NAMESPACE, kv_list)
    table.register(UPDATE_NAMESRV_CONFIG, update_config)
    table.register(319, get_config)  # GET_NAMESRV_CONFIG
    return table
