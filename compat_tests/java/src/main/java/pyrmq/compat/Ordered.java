package pyrmq.compat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Orderly consumption: messages sent with a MessageQueueSelector by key (every message of a key
 * goes to queue key % queues), consumed with MessageListenerOrderly, which locks its queues at
 * the broker (LOCK_BATCH_MQ) before consuming them.
 *
 * <pre>
 * orderly --group G [--keys 8] [--per-key 10] [--create-topic 4]
 * </pre>
 *
 * Steps: consumer 0 starts and locks every queue; a probe (another client id, same group) asks
 * the broker for the same locks and must get none; the first half of each key's messages is sent
 * and consumed by consumer 0; consumer 1 joins, and the run waits until the two hold disjoint
 * locked queue sets covering the topic; the second half is sent; consumer 0 leaves and consumer 1
 * locks every queue; consumer 1 leaves (unlocking); the probe must now get every lock, releases
 * them (UNLOCK_BATCH_MQ), and another client id gets them all.
 */
final class Ordered {
    private Ordered() {
    }

    static final String SELECTOR_NOTE = "queue = key % queues";

    static Message message(String topic, int key, int seq) {
        Message m = new Message(topic, "TagO", ("K" + key + "-" + seq).getBytes(StandardCharsets.UTF_8));
        m.setKeys("key-" + key);
        m.putUserProperty("seq", Integer.toString(seq));
        return m;
    }

    static void send(DefaultMQProducer p, String topic, int keys, int from, int to) throws Exception {
        MessageQueueSelector byKey = (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size());
        for (int seq = from; seq < to; seq++) {
            for (int key = 0; key < keys; key++) {
                Message m = message(topic, key, seq);
                SendResult r = p.send(m, byKey, key);
                Json.event("sent").put("i", key * 1000 + seq).put("key", key).put("seq", seq)
                    .put("body", Producers.body(m)).put("tags", m.getTags()).put("keys", m.getKeys())
                    .put("status", r.getSendStatus().name()).put("msgId", r.getMsgId())
                    .put("offsetMsgId", r.getOffsetMsgId()).put("broker", r.getMessageQueue().getBrokerName())
                    .put("queueId", r.getMessageQueue().getQueueId()).put("queueOffset", r.getQueueOffset()).emit();
            }
        }
    }

    static List<Integer> ids(Set<MessageQueue> mqs) {
        List<Integer> out = new ArrayList<>();
        for (MessageQueue mq : mqs) {
            out.add(mq.getQueueId());
        }
        out.sort(Comparator.naturalOrder());
        return out;
    }

    static void await(Consumers.Received received, int count, long deadline) throws InterruptedException {
        while (received.firstSeen.size() < count && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        if (received.firstSeen.size() < count) {
            throw new IllegalStateException("received " + received.firstSeen.size() + " of " + count);
        }
    }

    static void run(Options o) throws Exception {
        String topic = o.str("topic");
        String group = o.str("group");
        int keys = o.integer("keys", 8);
        int perKey = o.integer("per-key", 10);
        int half = perKey / 2;
        Producers.createTopic(o, topic, o.integer("create-topic", 4));
        long deadline = System.currentTimeMillis() + o.millis("timeout-ms", 90_000);
        Consumers.Received received = new Consumers.Received();
        List<DefaultMQPushConsumer> consumers = new CopyOnWriteArrayList<>();
        DefaultMQProducer p = Producers.startProducer(o, "");
        String probeId = "compat-probe-" + ProcessHandle.current().pid();
        try {
            Consumers.PushSpec spec0 = new Consumers.PushSpec(group, "c0", 0);
            spec0.orderly = true;
            consumers.add(Consumers.startPush(o, spec0, received));
            Consumers.keepHeartbeating(consumers);
            Consumers.waitBalanced(consumers, topic, 30_000, true, "one");

            Set<MessageQueue> all = new HashSet<>(p.fetchPublishMessageQueues(topic));
            // The consumer's factory knows the broker's address (the producer's has only sent to
            // the NameServer so far).
            String addr = consumers.get(0).getDefaultMQPushConsumerImpl().getmQClientFactory()
                .findBrokerAddressInPublish(all.iterator().next().getBrokerName());
            if (addr == null) {
                throw new IllegalStateException("no address for " + all.iterator().next().getBrokerName());
            }
            MQClientAPIImpl api = p.getDefaultMQProducerImpl().getmQClientFactory().getMQClientAPIImpl();
            Set<MessageQueue> got = Compat.lockBatch(api, addr, group, probeId, all);
            Json.event("probe").put("when", "held").put("asked", ids(all)).put("locked", ids(got)).emit();

            received.phase = 1;
            send(p, topic, keys, 0, half);
            await(received, keys * half, deadline);

            Consumers.PushSpec spec1 = new Consumers.PushSpec(group, "c1", 1);
            spec1.orderly = true;
            consumers.add(Consumers.startPush(o, spec1, received));
            Consumers.waitBalanced(consumers, topic, 60_000, true, "two");

            received.phase = 2;
            send(p, topic, keys, half, perKey);
            await(received, keys * perKey, deadline);
            Thread.sleep(o.millis("idle-ms", 1000));

            // Consumer 0 leaves; consumer 1 takes (locks) its queues too, and only then leaves,
            // unlocking all four (a consumer leaving mid-rebalance may keep fresh locks until
            // they expire, which would make the probe below depend on timing).
            DefaultMQPushConsumer first = consumers.get(0);
            consumers.remove(first);
            first.shutdown();
            Consumers.waitBalanced(consumers, topic, 60_000, true, "handover");
            for (DefaultMQPushConsumer c : consumers) {
                consumers.remove(c);
                c.shutdown();
            }
            got = Compat.lockBatch(api, addr, group, probeId, all);
            Json.event("probe").put("when", "released").put("asked", ids(all)).put("locked", ids(got)).emit();
            Compat.unlockBatch(api, addr, group, probeId, all);
            // Unlocked again: a lock request of yet another client succeeds for every queue.
            got = Compat.lockBatch(api, addr, group, probeId + "-2", all);
            Json.event("probe").put("when", "unlocked").put("asked", ids(all)).put("locked", ids(got)).emit();
            Compat.unlockBatch(api, addr, group, probeId + "-2", all);
        } finally {
            for (DefaultMQPushConsumer c : consumers) {
                c.shutdown();
            }
            p.shutdown();
        }
        Json.event("summary").put("distinct", received.firstSeen.size()).put("total", received.total.get())
            .put("complete", received.firstSeen.size() == keys * perKey).emit();
    }
}
