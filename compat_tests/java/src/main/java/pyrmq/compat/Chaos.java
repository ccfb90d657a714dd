package pyrmq.compat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * The two sides of the chaos run (compat_tests/test_chaos.py), which kills and restarts the broker
 * while they run; pytest is the checker (lost acknowledged messages, duplicates, per-key order).
 *
 * <pre>
 * chaos-produce --topic T --keys K [--threads 2] --duration-ms D [--interval-ms 0]
 * chaos-consume --topic T --group G [--consumers 2] [--orderly 1] --duration-ms D [--idle-ms 5000]
 * </pre>
 *
 * chaos-produce: each thread owns the keys k with k % threads == its index and sends them in
 * turn, orderly (MessageQueueSelector: queue = key % queues), body "K{key}-{seq}"; a key's seq
 * advances only once its message is answered SEND_OK, so an acknowledged message of a key always
 * follows the acknowledged ones before it. A failed send (the broker is down) is reported and
 * sent again, same body, at the key's next turn. Stops after --duration-ms.
 *
 * chaos-consume: --consumers push consumers of one group (MessageListenerOrderly with --orderly 1),
 * every message reported; ends once --duration-ms has passed and nothing arrived for --idle-ms.
 */
final class Chaos {
    private Chaos() {
    }

    static String body(int key, int seq) {
        return "K" + key + "-" + seq;
    }

    static void produce(Options o) throws Exception {
        String topic = o.str("topic");
        int keys = o.integer("keys", 8);
        int threads = o.integer("threads", 2);
        long intervalMs = o.millis("interval-ms", 0);
        long end = System.currentTimeMillis() + o.millis("duration-ms", 30_000);
        MessageQueueSelector byKey = (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size());
        List<Thread> workers = new ArrayList<>();
        List<DefaultMQProducer> producers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            DefaultMQProducer p = Producers.startProducer(o, "-" + t);
            producers.add(p);
            final int self = t;
            Thread w = new Thread(() -> {
                List<Integer> mine = new ArrayList<>();
                for (int k = self; k < keys; k += threads) {
                    mine.add(k);
                }
                int[] next = new int[keys];
                int turn = 0;
                while (System.currentTimeMillis() < end) {
                    int key = mine.get(turn++ % mine.size());
                    Message m = new Message(topic, "TagC", body(key, next[key]).getBytes(StandardCharsets.UTF_8));
                    m.setKeys("key-" + key);
                    m.putUserProperty("seq", Integer.toString(next[key]));
                    try {
                        SendResult r = p.send(m, byKey, key);
                        Json.event("sent").put("key", key).put("seq", next[key]).put("body", Producers.body(m))
                            .put("status", r.getSendStatus().name()).put("queueId", r.getMessageQueue().getQueueId())
                            .put("queueOffset", r.getQueueOffset()).put("offsetMsgId", r.getOffsetMsgId()).emit();
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            next[key]++;
                        }
                    } catch (Exception e) {
                        Json.event("send_failed").put("key", key).put("seq", next[key]).put("body", Producers.body(m))
                            .put("error", e.toString()).emit();
                        sleep(200);
                    }
                    if (intervalMs > 0) {
                        sleep(intervalMs);
                    }
                }
            }, "chaos-producer-" + t);
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) {
            w.join();
        }
        for (DefaultMQProducer p : producers) {
            p.shutdown();
        }
        Json.event("summary").put("threads", threads).emit();
    }

    static void consume(Options o) throws Exception {
        String group = o.str("group");
        boolean orderly = o.integer("orderly", 1) != 0;
        long end = System.currentTimeMillis() + o.millis("duration-ms", 30_000);
        long idleMs = o.millis("idle-ms", 5000);
        Consumers.Received received = new Consumers.Received();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        try {
            for (int i = 0; i < o.integer("consumers", 2); i++) {
                Consumers.PushSpec spec = new Consumers.PushSpec(group, "chaos-c" + i, i);
                spec.orderly = orderly;
                consumers.add(Consumers.startPush(o, spec, received));
            }
            Consumers.keepHeartbeating(consumers);
            while (System.currentTimeMillis() < end || System.currentTimeMillis() - received.last.get() < idleMs) {
                sleep(50);
            }
        } finally {
            for (DefaultMQPushConsumer c : consumers) {
                c.shutdown();
            }
        }
        Json.event("summary").put("distinct", received.firstSeen.size()).put("total", received.total.get()).emit();
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
