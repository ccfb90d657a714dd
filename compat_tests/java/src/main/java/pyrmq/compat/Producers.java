package pyrmq.compat;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/** The producer side: sends in every mode, topic creation. */
final class Producers {
    private Producers() {
    }

    static DefaultMQProducer startProducer(Options o, String suffix) throws MQClientException {
        DefaultMQProducer p = new DefaultMQProducer(o.str("producer-group", "PG_" + o.str("topic")));
        p.setNamesrvAddr(o.str("namesrv"));
        p.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-p" + suffix);
        p.setSendMsgTimeout(o.integer("send-timeout-ms", 5000));
        p.setRetryTimesWhenSendFailed(o.integer("retries", 2));
        p.setRetryTimesWhenSendAsyncFailed(o.integer("retries", 2));
        p.setSendLatencyFaultEnable(o.integer("latency-fault", 0) != 0);
        p.setPollNameServerInterval(o.integer("poll-namesrv-ms", 30_000));
        ScenarioRunner.applyTls(p, o);
        p.start();
        return p;
    }

    static Message message(Options o, int i) {
        String topic = o.str("topic");
        String body = padded(o.str("body-prefix", topic) + "-" + i, o.integer("body-size", 0));
        List<String> tags = o.list("tags");
        Message m = new Message(topic, body.getBytes(StandardCharsets.UTF_8));
        if (!tags.isEmpty()) {
            m.setTags(tags.get(i % tags.size()));
        }
        m.setKeys("k-" + i);
        m.putUserProperty("seq", Integer.toString(i));
        if (o.integer("sql-props", 0) != 0) {
            // SQL92 scenarios: "a" is i % 10 except when that is 9 (absent: NULL), "s" a string
            if (i % 10 != 9) {
                m.putUserProperty("a", Integer.toString(i % 10));
            }
            m.putUserProperty("s", "s" + (i % 3));
        }
        int delayLevel = o.integer("delay-level", 0);
        if (delayLevel > 0) {
            m.setDelayTimeLevel(delayLevel);
        }
        long timerDelay = o.millis("timer-delay-ms", 0);
        if (timerDelay > 0) {
            timer(m, o.str("timer-api", "delay"), i, timerDelay, o.millis("timer-align-ms", -1));
        }
        return m;
    }

    /**
     * --timer-delay-ms D: a 5.x timer message, by Message.setDelayTimeMs(D) or (--timer-api
     * deliver) setDeliverTimeMs(now + D); "mixed" alternates. Reflection, as 4.9.8 has neither
     * method. The user property "created" is the wall clock when the time was set.
     */
    static void timer(Message m, String api, int i, long delayMs, long alignMs) {
        boolean deliver = "deliver".equals(api) || ("mixed".equals(api) && i % 2 == 1);
        if (alignMs >= 0) {
            // --timer-align-ms A: set the time when the clock's milliseconds are A, so that the
            // due time falls at a known point of the broker's one-second slots
            long wait = Math.floorMod(alignMs - System.currentTimeMillis() % 1000, 1000);
            try {
                Thread.sleep(wait);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        long now = System.currentTimeMillis();
        m.putUserProperty("created", Long.toString(now));
        try {
            if (deliver) {
                Message.class.getMethod("setDeliverTimeMs", long.class).invoke(m, now + delayMs);
            } else {
                Message.class.getMethod("setDelayTimeMs", long.class).invoke(m, delayMs);
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("this client has no timer message API (5.x only)", e);
        }
    }

    /** `head` + "|" + 0123456789abcdef repeated, `size` bytes in all (ASCII); `head` when size is 0. */
    static String padded(String head, int size) {
        if (size <= 0) {
            return head;
        }
        StringBuilder sb = new StringBuilder(size).append(head).append('|');
        while (sb.length() < size) {
            sb.append("0123456789abcdef".charAt((sb.length() - head.length() - 1) % 16));
        }
        sb.setLength(size);
        return sb.toString();
    }

    static String body(Message m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    static Json sentEvent(int i, Message m, SendResult r, String msgId, String offsetMsgId, long queueOffset) {
        return Json.event("sent").put("i", i).put("body", body(m)).put("tags", m.getTags()).put("keys", m.getKeys())
            .put("status", r.getSendStatus().name()).put("msgId", msgId).put("offsetMsgId", offsetMsgId)
            .put("broker", r.getMessageQueue().getBrokerName()).put("queueId", r.getMessageQueue().getQueueId())
            .put("queueOffset", queueOffset).put("at", System.currentTimeMillis())
            .put("created", m.getUserProperty("created"));
    }

    static void emitSent(int i, Message m, SendResult r, String msgId, String offsetMsgId,
        long queueOffset) {
        sentEvent(i, m, r, msgId, offsetMsgId, queueOffset).emit();
    }

    static void emitSent(int i, Message m, SendResult r) {
        emitSent(i, m, r, r.getMsgId(), r.getOffsetMsgId(), r.getQueueOffset());
    }

    /** A sync send's event with its round trip ("rtMs": from the send call to its result). */
    static void emitSent(int i, Message m, SendResult r, long rtMs) {
        sentEvent(i, m, r, r.getMsgId(), r.getOffsetMsgId(), r.getQueueOffset()).put("rtMs", rtMs).emit();
    }

    static void emitSendFailed(int i, Message m, Throwable e) {
        Json.event("send_failed").put("i", i).put("body", body(m)).put("error", e.toString()).emit();
    }

    static void produce(Options o) throws Exception {
        int createQueues = o.integer("create-topic", 0);
        if (createQueues > 0) {
            createTopic(o, o.str("topic"), createQueues);
        }
        String mode = o.str("mode", "sync");
        int count = o.integer("count", 10);
        long intervalMs = o.millis("interval-ms", 0);
        int stopAfterFailures = o.integer("stop-after-failures", 0);
        DefaultMQProducer p = startProducer(o, "");
        int ok = 0;
        int failed = 0;
        try {
            switch (mode) {
                case "sync": {
                    int consecutive = 0;
                    for (int i = 0; i < count; i++) {
                        Message m = message(o, i);
                        try {
                            long t0 = System.nanoTime();
                            SendResult r = p.send(m);
                            emitSent(i, m, r, (System.nanoTime() - t0) / 1_000_000);
                            ok++;
                            consecutive = 0;
                        } catch (Exception e) {
                            emitSendFailed(i, m, e);
                            failed++;
                            consecutive++;
                            if (stopAfterFailures > 0 && consecutive >= stopAfterFailures) {
                                break;
                            }
                        }
                        if (intervalMs > 0) {
                            Thread.sleep(intervalMs);
                        }
                    }
                    break;
                }
                case "async": {
                    CountDownLatch done = new CountDownLatch(count);
                    AtomicInteger asyncOk = new AtomicInteger();
                    for (int i = 0; i < count; i++) {
                        final int idx = i;
                        final Message m = message(o, i);
                        p.send(m, new SendCallback() {
                            @Override
                            public void onSuccess(SendResult r) {
                                emitSent(idx, m, r);
                                asyncOk.incrementAndGet();
                                done.countDown();
                            }

                            @Override
                            public void onException(Throwable e) {
                                emitSendFailed(idx, m, e);
                                done.countDown();
                            }
                        });
                    }
                    if (!done.await(o.millis("timeout-ms", 30_000), TimeUnit.MILLISECONDS)) {
                        throw new IllegalStateException("async callbacks missing: " + done.getCount());
                    }
                    ok = asyncOk.get();
                    failed = count - ok;
                    break;
                }
                case "oneway": {
                    for (int i = 0; i < count; i++) {
                        Message m = message(o, i);
                        p.sendOneway(m);
                        Json.event("sent").put("i", i).put("body", body(m)).put("tags", m.getTags())
                            .put("keys", m.getKeys()).put("status", "ONEWAY").emit();
                        ok++;
                    }
                    // A oneway request has no answer; give the last frames time to leave the socket.
                    Thread.sleep(300);
                    break;
                }
                case "batch": {
                    int batchSize = o.integer("batch-size", count);
                    for (int start = 0; start < count; start += batchSize) {
                        List<Message> batch = new ArrayList<>();
                        for (int i = start; i < Math.min(count, start + batchSize); i++) {
                            batch.add(message(o, i));
                        }
                        SendResult r = p.send(batch);
                        // A batch answers with one result: comma-joined ids, the first queue offset.
                        String[] ids = r.getMsgId().split(",");
                        String[] offsetIds = r.getOffsetMsgId().split(",");
                        if (ids.length != batch.size() || offsetIds.length != batch.size()) {
                            throw new IllegalStateException("batch of " + batch.size() + " got msgId "
                                + r.getMsgId() + " offsetMsgId " + r.getOffsetMsgId());
                        }
                        for (int j = 0; j < batch.size(); j++) {
                            emitSent(start + j, batch.get(j), r, ids[j], offsetIds[j], r.getQueueOffset() + j);
                        }
                        ok += batch.size();
                    }
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown --mode " + mode);
            }
        } finally {
            p.shutdown();
        }
        Json.event("summary").put("ok", ok).put("failed", failed).emit();
    }

    static void createTopic(Options o, String topic, int queues) throws Exception {
        DefaultMQProducer p = startProducer(o, "-admin");
        try {
            invokeCreateTopic(p, topic, queues);
            // Every broker of the TBW102 route gets `queues` queues: with several brokers the
            // route shows --expect-queues in all.
            int expected = o.integer("expect-queues", queues);
            long deadline = System.currentTimeMillis() + 15_000;
            while (true) {
                try {
                    if (p.fetchPublishMessageQueues(topic).size() == expected) {
                        break;
                    }
                } catch (MQClientException e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("route of " + topic + " never showed " + expected + " queues");
                }
                Thread.sleep(100);
            }
        } finally {
            p.shutdown();
        }
        Json.event("topic_created").put("topic", topic).put("queues", queues).emit();
    }

    /**
     * DefaultMQProducer.createTopic(key, topic, queueNum) in 4.9.8; 5.x replaced it with
     * createTopic(key, topic, queueNum, Map attributes). The only API split this runner meets,
     * so it is bridged by reflection instead of a source tree per client version.
     */
    static void invokeCreateTopic(DefaultMQProducer p, String topic, int queues) throws Exception {
        Method m;
        Object[] args;
        try {
            m = DefaultMQProducer.class.getMethod("createTopic", String.class, String.class, int.class, Map.class);
            args = new Object[] {ScenarioRunner.AUTO_CREATE_TOPIC_KEY, topic, queues, new HashMap<String, String>()};
        } catch (NoSuchMethodException e) {
            m = DefaultMQProducer.class.getMethod("createTopic", String.class, String.class, int.class);
            args = new Object[] {ScenarioRunner.AUTO_CREATE_TOPIC_KEY, topic, queues};
        }
        try {
            m.invoke(p, args);
        } catch (InvocationTargetException e) {
            throw (Exception) e.getCause();
        }
    }
}
