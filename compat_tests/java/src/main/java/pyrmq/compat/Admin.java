package pyrmq.compat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * DefaultMQAdminExt basics, each result reported as an event:
 *
 * <pre>
 * admin --group G [--queues 3] [--count 9] [--cluster DefaultCluster] [--broker-name broker-a]
 * </pre>
 *
 * cluster (examineBrokerClusterInfo), create (createAndUpdateTopicConfig on the broker), route
 * (examineTopicRouteInfo), topics (fetchAllTopicList), send `count` messages, message i to queue
 * i % queues, each viewed (viewMessage by offset msgId) and then queried by key (queryMessage);
 * topic_stats (GET_TOPIC_STATS_INFO per broker); consume them all with a push consumer and report
 * consume_stats (examineConsumeStats) once committed; delete (deleteTopicInBroker +
 * deleteTopicInNameServer), then route / topics / topic_stats again.
 */
final class Admin {
    private Admin() {
    }

    static Map<String, Object> route(DefaultMQAdminExt admin, String topic) throws Exception {
        var r = admin.examineTopicRouteInfo(topic);
        List<Object> queues = new ArrayList<>();
        for (var q : r.getQueueDatas()) {
            Map<String, Object> m = new TreeMap<>();
            m.put("brokerName", q.getBrokerName());
            m.put("readQueueNums", q.getReadQueueNums());
            m.put("writeQueueNums", q.getWriteQueueNums());
            m.put("perm", q.getPerm());
            m.put("topicSysFlag", q.getTopicSysFlag());
            queues.add(m);
        }
        List<Object> brokers = new ArrayList<>();
        for (var b : r.getBrokerDatas()) {
            Map<String, Object> m = new TreeMap<>();
            m.put("cluster", b.getCluster());
            m.put("brokerName", b.getBrokerName());
            m.put("brokerAddrs", new TreeMap<>(b.getBrokerAddrs()));
            brokers.add(m);
        }
        Map<String, Object> out = new TreeMap<>();
        out.put("queueDatas", queues);
        out.put("brokerDatas", brokers);
        return out;
    }

    static int errorCode(Exception e) {
        if (e instanceof MQClientException) {
            return ((MQClientException) e).getResponseCode();
        }
        if (e instanceof MQBrokerException) {
            return ((MQBrokerException) e).getResponseCode();
        }
        return -1;
    }

    static void topicStats(DefaultMQAdminExt admin, String topic, String label) {
        try {
            // GET_TOPIC_STATS_INFO to each broker of the route, as examineTopicStats does; sent
            // with MQClientAPIImpl because the 5.x admin first asks GET_TOPIC_CONFIG (351), which
            // 4.9.x brokers do not know.
            MQClientAPIImpl api = MQClientManager.getInstance().getOrCreateMQClientInstance(admin).getMQClientAPIImpl();
            Map<String, Object> queues = new TreeMap<>();
            for (var b : admin.examineTopicRouteInfo(topic).getBrokerDatas()) {
                var stats = api.getTopicStatsInfo(b.selectBrokerAddr(), topic, 5000);
                for (var e : stats.getOffsetTable().entrySet()) {
                    Map<String, Object> q = new TreeMap<>();
                    q.put("minOffset", e.getValue().getMinOffset());
                    q.put("maxOffset", e.getValue().getMaxOffset());
                    q.put("lastUpdateTimestamp", e.getValue().getLastUpdateTimestamp());
                    queues.put(e.getKey().getBrokerName() + "/" + e.getKey().getQueueId(), q);
                }
            }
            Json.event("topic_stats").put("label", label).put("queues", queues).emit();
        } catch (Exception e) {
            Json.event("topic_stats").put("label", label).put("code", errorCode(e)).put("error", e.toString()).emit();
        }
    }

    static void run(Options o) throws Exception {
        String topic = o.str("topic");
        String group = o.str("group");
        int queues = o.integer("queues", 3);
        int count = o.integer("count", 9);
        String clusterName = o.str("cluster", "DefaultCluster");
        String brokerName = o.str("broker-name", "broker-a");
        long deadline = System.currentTimeMillis() + o.millis("timeout-ms", 60_000);
        DefaultMQAdminExt admin = Groups.startAdmin(o, "");
        try {
            var cluster = admin.examineBrokerClusterInfo();
            Map<String, Object> clusters = new TreeMap<>();
            cluster.getClusterAddrTable().forEach((k, v) -> clusters.put(k, new ArrayList<>(new java.util.TreeSet<>(v))));
            Map<String, Object> brokers = new TreeMap<>();
            cluster.getBrokerAddrTable().forEach((k, b) -> {
                Map<String, Object> m = new TreeMap<>();
                m.put("cluster", b.getCluster());
                m.put("brokerName", b.getBrokerName());
                m.put("brokerAddrs", new TreeMap<>(b.getBrokerAddrs()));
                brokers.put(k, m);
            });
            Json.event("cluster").put("clusterAddrTable", clusters).put("brokerAddrTable", brokers).emit();
            String addr = cluster.getBrokerAddrTable().get(brokerName).selectBrokerAddr();

            admin.createAndUpdateTopicConfig(addr, new TopicConfig(topic, queues, queues, 6));
            Json.event("created").put("addr", addr).emit();
            Map<String, Object> route = null;
            while (route == null) {
                try {
                    route = route(admin, topic);
                } catch (MQClientException e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                    Thread.sleep(100);
                }
            }
            Json.event("route").put("route", route).emit();
            Set<String> list = admin.fetchAllTopicList().getTopicList();
            Json.event("topics").put("hasTopic", list.contains(topic)).put("hasTBW102", list.contains("TBW102"))
                .emit();

            DefaultMQProducer p = Producers.startProducer(o, "");
            long t0 = System.currentTimeMillis();
            try {
                MessageQueueSelector byIndex = (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size());
                for (int i = 0; i < count; i++) {
                    Message m = new Message(topic, "TagA", (topic + "-" + i).getBytes(StandardCharsets.UTF_8));
                    m.setKeys("k-" + i);
                    m.putUserProperty("seq", Integer.toString(i));
                    org.apache.rocketmq.client.producer.SendResult sr = p.send(m, byIndex, i);
                    Producers.emitSent(i, m, sr);
                    var v = admin.viewMessage(topic, sr.getOffsetMsgId());
                    Json.event("view").put("offsetMsgId", sr.getOffsetMsgId()).put("body",
                        new String(v.getBody(), StandardCharsets.UTF_8)).put("keys", v.getKeys())
                        .put("queueId", v.getQueueId()).put("queueOffset", v.getQueueOffset())
                        .put("msgId", v.getMsgId()).emit();
                }
            } finally {
                p.shutdown();
            }
            Json.event("sent_window").put("t0", t0).put("t1", System.currentTimeMillis()).emit();
            // QUERY_MESSAGE by key (the broker's index) and VIEW_MESSAGE_BY_ID by offset msgId.
            for (int i = 0; i < count; i++) {
                List<String> bodies = new ArrayList<>();
                try {
                    for (var m : admin.queryMessage(topic, "k-" + i, 32, 0, Long.MAX_VALUE).getMessageList()) {
                        bodies.add(new String(m.getBody(), StandardCharsets.UTF_8));
                    }
                    Json.event("query_key").put("key", "k-" + i).put("bodies", bodies).emit();
                } catch (MQClientException e) {
                    Json.event("query_key").put("key", "k-" + i).put("code", e.getResponseCode())
                        .put("error", e.toString()).emit();
                }
            }
            topicStats(admin, topic, "after send");

            Consumers.Received r = new Consumers.Received();
            var c = Consumers.startPush(o, new Consumers.PushSpec(group, "c0", 0), r);
            try {
                List<org.apache.rocketmq.client.consumer.DefaultMQPushConsumer> one = new ArrayList<>();
                one.add(c);
                Consumers.keepHeartbeating(one);
                Offsets.awaitPhase(r, 0, count, deadline, Consumers.sleeper());
                Offsets.awaitCommitted(admin, c, group, topic, deadline, "consumed");
            } finally {
                c.shutdown();
            }

            Set<String> brokerAddrs = new HashSet<>();
            brokerAddrs.add(addr);
            admin.deleteTopicInBroker(brokerAddrs, topic);
            Set<String> nameServers = new HashSet<>();
            nameServers.add(o.str("namesrv"));
            Compat.deleteTopicInNameServer(admin, nameServers, topic, clusterName);
            Json.event("deleted").emit();
            try {
                Json.event("route_after_delete").put("route", route(admin, topic)).emit();
            } catch (Exception e) {
                Json.event("route_after_delete").put("code", errorCode(e)).put("error", e.toString()).emit();
            }
            list = admin.fetchAllTopicList().getTopicList();
            Json.event("topics_after_delete").put("hasTopic", list.contains(topic)).emit();
            topicStats(admin, topic, "after delete");
        } finally {
            admin.shutdown();
        }
        Json.event("summary").put("complete", true).emit();
    }

    static List<Integer> queueIds(List<MessageQueue> mqs) {
        List<Integer> out = new ArrayList<>();
        for (MessageQueue mq : mqs) {
            out.add(mq.getQueueId());
        }
        return out;
    }
}
