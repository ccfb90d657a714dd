package pyrmq.compat;

import java.nio.charset.StandardCharsets;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/** Where a group starts (first / last / timestamp) and offset resets. */
final class Offsets {
    private Offsets() {
    }

    static void sendBatch(DefaultMQProducer p, String topic, String prefix, int count) throws Exception {
        for (int i = 0; i < count; i++) {
            Message m = new Message(topic, "Tag" + prefix, (prefix + "-" + i).getBytes(StandardCharsets.UTF_8));
            m.setKeys("k-" + prefix + "-" + i);
            m.putUserProperty("seq", Integer.toString(i));
            Producers.emitSent(i, m, p.send(m));
        }
    }

    /** Wait until at least `gapMs` after now, then to the next whole second; that second's start. */
    static long nextSecondAfter(long gapMs) throws InterruptedException {
        long t = System.currentTimeMillis() + gapMs;
        long s = (t / 1000 + 1) * 1000;
        Thread.sleep(s - System.currentTimeMillis());
        return s;
    }

    static void awaitPhase(Consumers.Received r, int phase, int count, long deadline, Runnable poll)
        throws InterruptedException {
        while (r.distinctIn(phase) < count && System.currentTimeMillis() < deadline) {
            poll.run();
        }
        if (r.distinctIn(phase) < count) {
            throw new IllegalStateException((r.label == null ? "" : r.label + ": ") + "phase " + phase
                + " received " + r.distinctIn(phase) + " of " + count);
        }
    }

    /**
     * fromwhere --group G [--count 12] [--create-topic 4]: batch A, a pause crossing a whole
     * second T, batch B; then three brand-new groups start (G_first CONSUME_FROM_FIRST_OFFSET,
     * G_ts CONSUME_FROM_TIMESTAMP at T, G_last CONSUME_FROM_LAST_OFFSET) and, once each holds its
     * queues, batch C is sent. Meant for a broker where no message counts as "in memory"
     * (accessMessageInMemoryMaxRatio=0): otherwise QUERY_CONSUMER_OFFSET answers 0 for a new
     * group and all three start at offset 0.
     */
    static void fromWhere(Options o) throws Exception {
        String topic = o.str("topic");
        String group = o.str("group");
        int count = o.integer("count", 12);
        Producers.createTopic(o, topic, o.integer("create-topic", 4));
        long deadline = System.currentTimeMillis() + o.millis("timeout-ms", 60_000);
        DefaultMQProducer p = Producers.startProducer(o, "");
        List<DefaultMQPushConsumer> consumers = new CopyOnWriteArrayList<>();
        String[] labels = {"first", "ts", "last"};
        ConsumeFromWhere[] froms = {ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET};
        List<Consumers.Received> received = new ArrayList<>();
        try {
            sendBatch(p, topic, "A", count);
            long t = nextSecondAfter(1100);
            String ts = new SimpleDateFormat("yyyyMMddHHmmss").format(new Date(t));
            Json.event("timestamp").put("ms", t).put("text", ts).emit();
            sendBatch(p, topic, "B", count);
            Consumers.keepHeartbeating(consumers);
            for (int i = 0; i < 3; i++) {
                Consumers.Received r = new Consumers.Received().label(labels[i]);
                received.add(r);
                Consumers.PushSpec spec = new Consumers.PushSpec(group + "_" + labels[i], labels[i], i);
                spec.from = froms[i];
                spec.timestamp = i == 1 ? ts : null;
                DefaultMQPushConsumer c = Consumers.startPush(o, spec, r);
                consumers.add(c);
                List<DefaultMQPushConsumer> one = new ArrayList<>();
                one.add(c);
                Consumers.waitBalanced(one, topic, 30_000, false, labels[i]);
            }
            sendBatch(p, topic, "C", count);
            int[] expect = {3 * count, 2 * count, count};
            for (int i = 0; i < 3; i++) {
                awaitPhase(received.get(i), 0, expect[i], deadline, Consumers.sleeper());
            }
            Thread.sleep(o.millis("idle-ms", 1000));
        } finally {
            for (DefaultMQPushConsumer c : consumers) {
                consumers.remove(c);
                c.shutdown();
            }
            p.shutdown();
        }
        Json.event("summary").put("complete", true).emit();
    }

    static String brokerAddr(DefaultMQAdminExt admin, String topic) throws Exception {
        var route = admin.examineTopicRouteInfo(topic);
        return route.getBrokerDatas().get(0).selectBrokerAddr();
    }

    /** Until the broker's committed offsets of (group, topic) reach the queues' max offsets. */
    static void awaitCommitted(DefaultMQAdminExt admin, DefaultMQPushConsumer c, String group, String topic,
        long deadline, String label) throws Exception {
        while (true) {
            if (c != null) {
                c.getDefaultMQPushConsumerImpl().persistConsumerOffset();
            }
            Thread.sleep(200);
            boolean done = true;
            for (long[] w : Groups.consumeStats(admin, group, topic).values()) {
                done &= w[1] == w[0];
            }
            if (done) {
                Groups.emitConsumeStats(admin, group, topic, label);
                return;
            }
            if (System.currentTimeMillis() > deadline) {
                Groups.emitConsumeStats(admin, group, topic, label + " (timeout)");
                throw new IllegalStateException("offsets of " + group + " never reached the end");
            }
        }
    }

    static Map<String, Object> byQueue(Map<MessageQueue, Long> offsets) {
        Map<String, Object> out = new TreeMap<>();
        offsets.forEach((mq, off) -> out.put(Integer.toString(mq.getQueueId()), off));
        return out;
    }

    /**
     * reset --group G [--count 12] [--create-topic 4]: batches A and B with a pause before a
     * timestamp T (ms) taken just before B. One consumer reads both (phase 1) and commits; then
     * DefaultMQAdminExt.resetOffsetByTimestamp(T, force) with the consumer online (phase 2: the
     * broker tells the client, RESET_CONSUMER_CLIENT_OFFSET); then, with the consumer stopped,
     * offsets set by searchOffset(T) + updateConsumeOffset and a new consumer of the group
     * started (phase 3). Each phase must receive B exactly.
     */
    static void reset(Options o) throws Exception {
        String topic = o.str("topic");
        String group = o.str("group");
        int count = o.integer("count", 12);
        Producers.createTopic(o, topic, o.integer("create-topic", 4));
        long deadline = System.currentTimeMillis() + o.millis("timeout-ms", 110_000);
        DefaultMQProducer p = Producers.startProducer(o, "");
        DefaultMQAdminExt admin = Groups.startAdmin(o, "");
        Consumers.Received r = new Consumers.Received();
        List<DefaultMQPushConsumer> consumers = new CopyOnWriteArrayList<>();
        try {
            sendBatch(p, topic, "A", count);
            Thread.sleep(1500);
            long t = System.currentTimeMillis();
            Json.event("timestamp").put("ms", t).emit();
            sendBatch(p, topic, "B", count);
            Consumers.keepHeartbeating(consumers);

            r.phase = 1;
            DefaultMQPushConsumer c = Consumers.startPush(o, new Consumers.PushSpec(group, "r1", 0), r);
            consumers.add(c);
            awaitPhase(r, 1, 2 * count, deadline, Consumers.sleeper());
            awaitCommitted(admin, c, group, topic, deadline, "consumed");

            r.phase = 2;
            Map<MessageQueue, Long> reset = admin.resetOffsetByTimestamp(topic, group, t, true);
            Json.event("reset").put("how", "online").put("offsets", byQueue(reset)).emit();
            // The client drops its queues, waits 10 s, stores the new offsets and re-adds the
            // queues at its next rebalance (every 20 s); ask for that rebalance now and then.
            long[] nextKick = {System.currentTimeMillis() + 10_500};
            awaitPhase(r, 2, count, deadline, () -> {
                if (System.currentTimeMillis() > nextKick[0]) {
                    c.getDefaultMQPushConsumerImpl().getmQClientFactory().rebalanceImmediately();
                    nextKick[0] += 2000;
                }
                Consumers.sleeper().run();
            });
            Thread.sleep(o.millis("idle-ms", 1000));
            awaitCommitted(admin, c, group, topic, deadline, "reconsumed");
            consumers.remove(c);
            c.shutdown();

            r.phase = 3;
            String addr = brokerAddr(admin, topic);
            Map<MessageQueue, Long> offline = new TreeMap<>();
            for (MessageQueue mq : p.fetchPublishMessageQueues(topic)) {
                long off = admin.searchOffset(mq, t);
                admin.updateConsumeOffset(addr, group, mq, off);
                offline.put(mq, off);
            }
            Json.event("reset").put("how", "offline").put("offsets", byQueue(offline)).emit();
            DefaultMQPushConsumer c3 = Consumers.startPush(o, new Consumers.PushSpec(group, "r3", 1), r);
            consumers.add(c3);
            awaitPhase(r, 3, count, deadline, Consumers.sleeper());
            Thread.sleep(o.millis("idle-ms", 1000));
        } finally {
            for (DefaultMQPushConsumer c : consumers) {
                consumers.remove(c);
                c.shutdown();
            }
            admin.shutdown();
            p.shutdown();
        }
        Json.event("summary").put("complete", true).emit();
    }
}
