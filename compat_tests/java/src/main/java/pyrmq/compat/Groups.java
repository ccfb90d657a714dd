package pyrmq.compat;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/** Consumer groups: broadcasting, and a clustering group whose members join and leave. */
final class Groups {
    private Groups() {
    }

    static DefaultMQAdminExt startAdmin(Options o, String suffix) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(o.str("namesrv"));
        admin.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-admin" + suffix);
        admin.start();
        return admin;
    }

    /**
     * The broker's consume stats of (group, topic) as one event: queueId -> {brokerOffset,
     * consumerOffset, lastTimestamp}. Types are not named (their package differs per client).
     */
    static void emitConsumeStats(DefaultMQAdminExt admin, String group, String topic, String label)
        throws Exception {
        Map<String, Object> queues = new TreeMap<>();
        for (var e : consumeStats(admin, group, topic).entrySet()) {
            MessageQueue mq = e.getKey();
            long[] w = e.getValue();
            Map<String, Object> q = new TreeMap<>();
            q.put("brokerOffset", w[0]);
            q.put("consumerOffset", w[1]);
            q.put("lastTimestamp", w[2]);
            queues.put(mq.getBrokerName() + "/" + mq.getTopic() + "/" + mq.getQueueId(), q);
        }
        Json.event("consume_stats").put("label", label).put("group", group).put("queues", queues).emit();
    }

    /**
     * GET_CONSUME_STATS of (group, topic) from every broker of the topic's route, merged. Sent
     * with MQClientAPIImpl rather than DefaultMQAdminExt.examineConsumeStats: the 5.x admin first
     * asks the broker for the topic config with GET_TOPIC_CONFIG (351), which 4.9.x brokers lack.
     */
    static Map<MessageQueue, long[]> consumeStats(DefaultMQAdminExt admin, String group, String topic)
        throws Exception {
        MQClientAPIImpl api = MQClientManager.getInstance().getOrCreateMQClientInstance(admin).getMQClientAPIImpl();
        Map<MessageQueue, long[]> out = new TreeMap<>();
        for (var b : admin.examineTopicRouteInfo(topic).getBrokerDatas()) {
            var stats = api.getConsumeStats(b.selectBrokerAddr(), group, topic, 5000);
            stats.getOffsetTable().forEach((mq, w) -> out.put(mq,
                new long[] {w.getBrokerOffset(), w.getConsumerOffset(), w.getLastTimestamp()}));
        }
        return out;
    }

    /**
     * broadcast --group G [--consumers 2] [--count 20] [--create-topic 4]: consumers of one group
     * in BROADCASTING mode each hold every queue and each receive every message; their offsets
     * stay in the client (LocalFileOffsetStore), the broker keeps none for the group.
     */
    static void broadcast(Options o) throws Exception {
        String topic = o.str("topic");
        String group = o.str("group");
        int queues = o.integer("create-topic", 4);
        int n = o.integer("consumers", 2);
        int count = o.integer("count", 20);
        Producers.createTopic(o, topic, queues);
        long deadline = System.currentTimeMillis() + o.millis("timeout-ms", 60_000);
        List<Consumers.Received> received = new ArrayList<>();
        List<DefaultMQPushConsumer> consumers = new CopyOnWriteArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                Consumers.Received r = new Consumers.Received();
                received.add(r);
                Consumers.PushSpec spec = new Consumers.PushSpec(group, "b" + i, i);
                spec.broadcasting = true;
                consumers.add(Consumers.startPush(o, spec, r));
            }
            Consumers.keepHeartbeating(consumers);
            // Broadcasting: every consumer holds every queue.
            while (true) {
                boolean all = true;
                for (DefaultMQPushConsumer c : consumers) {
                    all &= Consumers.assignedQueues(c, topic).size() == queues;
                }
                if (all) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("broadcasting consumers never held every queue");
                }
                Thread.sleep(50);
            }
            List<List<Integer>> report = new ArrayList<>();
            for (DefaultMQPushConsumer c : consumers) {
                List<Integer> q = new ArrayList<>(Consumers.assignedQueues(c, topic));
                q.sort(Comparator.naturalOrder());
                report.add(q);
            }
            Json.event("balanced").put("assignment", report).emit();
            DefaultMQProducer p = Producers.startProducer(o, "");
            try {
                for (int i = 0; i < count; i++) {
                    Message m = Producers.message(o, i);
                    Producers.emitSent(i, m, p.send(m));
                }
            } finally {
                p.shutdown();
            }
            for (Consumers.Received r : received) {
                while (r.firstSeen.size() < count && System.currentTimeMillis() < deadline) {
                    Thread.sleep(20);
                }
            }
            Thread.sleep(o.millis("idle-ms", 1000));
            for (int i = 0; i < n; i++) {
                DefaultMQPushConsumer c = consumers.get(i);
                var store = c.getDefaultMQPushConsumerImpl().getOffsetStore();
                Map<String, Object> offsets = new TreeMap<>();
                for (MessageQueue mq : c.fetchSubscribeMessageQueues(topic)) {
                    offsets.put(Integer.toString(mq.getQueueId()), store.readOffset(mq, ReadOffsetType.READ_FROM_MEMORY));
                }
                Json.event("client_offsets").put("c", i).put("store", store.getClass().getSimpleName())
                    .put("clientId", c.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId())
                    .put("offsets", offsets).emit();
            }
        } finally {
            for (DefaultMQPushConsumer c : consumers) {
                consumers.remove(c);
                c.shutdown();  // persists the local offset files
            }
        }
        DefaultMQAdminExt admin = startAdmin(o, "");
        try {
            emitConsumeStats(admin, group, topic, "after");
        } finally {
            admin.shutdown();
        }
        int complete = 0;
        for (Consumers.Received r : received) {
            complete += r.firstSeen.size() >= count ? 1 : 0;
        }
        Json.event("summary").put("complete", complete == n).emit();
    }

    /**
     * churn --group G [--create-topic 4] [--interval-ms 20] [--step-ms 1500]: one producer sends
     * continuously while consumer 0 runs alone, consumer 1 joins, consumer 2 joins, consumer 1
     * leaves (shutdown: offsets persisted, client unregistered); after each change the run waits
     * for the rebalance to settle (disjoint queue sets covering the topic) and reports how long
     * that took. Then the producer stops and the run waits for every sent message.
     */
    static void churn(Options o) throws Exception {
        String topic = o.str("topic");
        String group = o.str("group");
        Producers.createTopic(o, topic, o.integer("create-topic", 4));
        long stepMs = o.millis("step-ms", 1500);
        long interval = o.millis("interval-ms", 20);
        long deadline = System.currentTimeMillis() + o.millis("timeout-ms", 100_000);
        Consumers.Received received = new Consumers.Received();
        List<DefaultMQPushConsumer> consumers = new CopyOnWriteArrayList<>();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger sent = new AtomicInteger();
        List<Throwable> producerError = new CopyOnWriteArrayList<>();
        DefaultMQProducer p = Producers.startProducer(o, "");
        Thread producer = new Thread(() -> {
            try {
                for (int i = 0; !stop.get(); i++) {
                    Message m = Producers.message(o, i);
                    try {
                        Producers.emitSent(i, m, p.send(m));
                        sent.incrementAndGet();
                    } catch (Exception e) {
                        Producers.emitSendFailed(i, m, e);
                    }
                    Thread.sleep(interval);
                }
            } catch (Throwable t) {
                producerError.add(t);
            }
        }, "compat-producer");
        DefaultMQPushConsumer[] c = new DefaultMQPushConsumer[3];
        try {
            c[0] = Consumers.startPush(o, new Consumers.PushSpec(group, "c0", 0), received);
            consumers.add(c[0]);
            Consumers.keepHeartbeating(consumers);
            Consumers.waitBalanced(consumers, topic, 30_000, false, "c0");
            producer.start();
            Thread.sleep(stepMs);
            received.phase = 1;
            c[1] = Consumers.startPush(o, new Consumers.PushSpec(group, "c1", 1), received);
            consumers.add(c[1]);
            Consumers.waitBalanced(consumers, topic, 45_000, false, "c1 joined");
            Thread.sleep(stepMs);
            received.phase = 2;
            c[2] = Consumers.startPush(o, new Consumers.PushSpec(group, "c2", 2), received);
            consumers.add(c[2]);
            Consumers.waitBalanced(consumers, topic, 45_000, false, "c2 joined");
            Thread.sleep(stepMs);
            received.phase = 3;
            consumers.remove(c[1]);
            c[1].shutdown();
            Json.event("consumer_stopped").put("c", 1).emit();
            Consumers.waitBalanced(consumers, topic, 45_000, false, "c1 left");
            Thread.sleep(stepMs);
            stop.set(true);
            producer.join(30_000);
            if (!producerError.isEmpty()) {
                throw new IllegalStateException("producer thread failed", producerError.get(0));
            }
            int total = sent.get();
            Json.event("producer_stopped").put("sent", total).emit();
            while (received.firstSeen.size() < total && System.currentTimeMillis() < deadline) {
                Thread.sleep(20);
            }
            Thread.sleep(o.millis("idle-ms", 1000));
        } finally {
            stop.set(true);
            for (DefaultMQPushConsumer x : consumers) {
                consumers.remove(x);
                x.shutdown();
            }
            p.shutdown();
        }
        Json.event("summary").put("distinct", received.firstSeen.size()).put("total", received.total.get())
            .put("complete", received.firstSeen.size() >= sent.get()).emit();
    }
}
