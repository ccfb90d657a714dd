package pyrmq.compat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The admin calls rocketmq-dashboard makes (through MQAdminExt), each answer reported whole as
 * the JSON fastjson makes of it, for pytest to compare pyrmq's shapes with Apache's:
 *
 * <pre>
 * dashboard --topic T --group G [--count 8]
 * </pre>
 *
 * Sets the scene first: topic T with 4 queues, `count` messages with keys sent by producer group
 * `G_producer` (left online), consumed by push consumer group G (left online, offsets committed).
 * Each call is one "call" event: name and json, or code and error.
 */
final class Dashboard {
    private Dashboard() {
    }

    private static void call(String name, Callable<Object> body) {
        try {
            Object result = body.call();
            Json.event("call").put("name", name).put("json", RemotingSerializable.toJson(result, false)).emit();
        } catch (Exception e) {
            Json.event("call").put("name", name).put("code", Admin.errorCode(e)).put("error", e.toString()).emit();
        }
    }

    static void run(Options o) throws Exception {
        String topic = o.str("topic");
        String group = o.str("group");
        int count = o.integer("count", 8);
        String namesrv = o.str("namesrv");
        DefaultMQAdminExt admin = Groups.startAdmin(o, "-dashboard");
        DefaultMQProducer producer = new DefaultMQProducer(group + "_producer");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-dashboard-producer");
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-dashboard-consumer");
        consumer.setPersistConsumerOffsetInterval(1000);   // the scene is ready sooner
        try {
            String addr = admin.examineBrokerClusterInfo().getBrokerAddrTable().values().iterator().next()
                .selectBrokerAddr();
            admin.createAndUpdateTopicConfig(addr, new TopicConfig(topic, 4, 4, 6));
            long deadline = System.currentTimeMillis() + 30_000;
            while (true) {
                try {
                    admin.examineTopicRouteInfo(topic);
                    break;
                } catch (Exception e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                    Thread.sleep(100);
                }
            }
            producer.start();
            List<String> offsetMsgIds = new ArrayList<>();
            String uniqueId = null;
            for (int i = 0; i < count; i++) {
                Message m = new Message(topic, "TagA", "key" + i, ("dashboard " + i).getBytes(StandardCharsets.UTF_8));
                var r = producer.send(m);
                offsetMsgIds.add(r.getOffsetMsgId());
                uniqueId = r.getMsgId();
            }
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) ->
                ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
            consumer.start();
            Json.event("consumer_started").emit();
            // committed offsets reach the broker every persistConsumerOffsetInterval
            while (true) {
                try {   // 206 (no offsets) until the consumer's first commit
                    var stats = admin.examineConsumeStats(group);
                    if (stats.computeTotalDiff() == 0) {
                        break;
                    }
                } catch (org.apache.rocketmq.client.exception.MQClientException e) {
                    if (e.getResponseCode() != 206) {
                        throw e;
                    }
                }
                if (System.currentTimeMillis() > deadline + 30_000) {
                    throw new IllegalStateException("group " + group + " did not catch up");
                }
                Thread.sleep(200);
            }
            Json.event("scene_ready").emit();
            String clientId = admin.examineConsumerConnectionInfo(group).getConnectionSet().iterator().next()
                .getClientId();
            final String lastUnique = uniqueId;
            final String firstOffsetId = offsetMsgIds.get(0);
            call("examineBrokerClusterInfo", admin::examineBrokerClusterInfo);
            call("fetchBrokerRuntimeStats", () -> admin.fetchBrokerRuntimeStats(addr));
            call("fetchAllTopicList", admin::fetchAllTopicList);
            call("examineTopicRouteInfo", () -> admin.examineTopicRouteInfo(topic));
            call("examineTopicStats", () -> admin.examineTopicStats(topic));
            call("getAllTopicConfig", () -> admin.getAllTopicConfig(addr, 5000));
            call("getAllSubscriptionGroup", () -> admin.getAllSubscriptionGroup(addr, 5000));
            call("examineSubscriptionGroupConfig", () -> admin.examineSubscriptionGroupConfig(addr, group));
            call("queryTopicConsumeByWho", () -> admin.queryTopicConsumeByWho(topic));
            call("examineConsumeStats", () -> admin.examineConsumeStats(group));
            call("examineConsumerConnectionInfo", () -> admin.examineConsumerConnectionInfo(group));
            call("getConsumerRunningInfo", () -> admin.getConsumerRunningInfo(group, clientId, false));
            call("examineProducerConnectionInfo", () -> admin.examineProducerConnectionInfo(group + "_producer",
                topic));
            call("getBrokerConfig", () -> admin.getBrokerConfig(addr));
            call("viewBrokerStatsData", () -> admin.viewBrokerStatsData(addr, "TOPIC_PUT_NUMS", topic));
            call("fetchConsumeStatsInBroker", () -> admin.fetchConsumeStatsInBroker(addr, false, 5000));
            call("queryConsumeTimeSpan", () -> admin.queryConsumeTimeSpan(topic, group));
            call("queryMessage", () -> admin.queryMessage(topic, "key3", 32, 0, Long.MAX_VALUE));
            call("viewMessageByUniqueKey", () -> admin.viewMessage(topic, lastUnique));
            call("viewMessageByOffsetId", () -> admin.viewMessage(topic, firstOffsetId));
            call("messageTrackDetail", () -> admin.messageTrackDetail(admin.viewMessage(topic, firstOffsetId)));
            call("consumeMessageDirectly", () -> admin.consumeMessageDirectly(group, clientId, topic, firstOffsetId));
            call("resetOffsetByTimestamp", () -> admin.resetOffsetByTimestamp(topic, group, 0L, true));
            call("getNameServerConfig", () -> admin.getNameServerConfig(List.of(namesrv)));
        } finally {
            consumer.shutdown();
            producer.shutdown();
            admin.shutdown();
        }
    }
}
