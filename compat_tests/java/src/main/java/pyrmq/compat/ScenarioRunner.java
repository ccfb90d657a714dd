package pyrmq.compat;

import java.io.PrintWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Drives the official RocketMQ Java client through one scenario and reports every message sent
 * or received as a JSON line on stdout (see {@link Json}); pytest makes the assertions.
 *
 * <pre>
 * java -cp ... pyrmq.compat.ScenarioRunner SCENARIO --namesrv 127.0.0.1:9876 --topic T ...
 *
 * produce       --mode sync|async|oneway|batch --count N [--tags A,B,C] [--batch-size K]
 *               [--interval-ms 0] [--stop-after-failures F] [--retries 2]
 * consume       push consumer(s): --group G --count N [--consumers K] [--tag-expr '*']
 *               [--wait-balanced 0|1] [--produce M] [--idle-ms 1000] [--timeout-ms 30000]
 * litepull      DefaultLitePullConsumer: --group G --count N [--tag-expr] [--idle-ms] [--timeout-ms]
 * pull          DefaultMQPullConsumer, every queue from offset 0 to the end: --group G [--tag-expr]
 * longpoll      one push consumer waits, then --attempts A single sends, each after --idle-ms
 * create-topic  --queues Q (UPDATE_AND_CREATE_TOPIC via the TBW102 route, then wait for the route)
 *
 * Common: --create-topic Q (create the topic first), --body-prefix P (default: the topic),
 *         --deadline-ms D (hard stop of the JVM, default 120000).
 * </pre>
 *
 * Only API present in both rocketmq-client 4.9.8 and 5.3.x is used here.
 */
public final class ScenarioRunner {
    private static final String AUTO_CREATE_TOPIC_KEY = "TBW102";
    private static final String INSTANCE_BASE = "compat" + ProcessHandle.current().pid();

    private ScenarioRunner() {
    }

    public static void main(String[] args) {
        // Clients and their libraries print to System.out now and then; keep stdout for JSON.
        System.setOut(System.err);
        int rc = 0;
        try {
            if (args.length < 1) {
                throw new IllegalArgumentException("usage: ScenarioRunner SCENARIO --option value ...");
            }
            Options o = new Options(args, 1);
            startWatchdog(o.millis("deadline-ms", 120_000));
            switch (args[0]) {
                case "produce":
                    produce(o);
                    break;
                case "consume":
                    consume(o);
                    break;
                case "litepull":
                    litePull(o);
                    break;
                case "pull":
                    pull(o);
                    break;
                case "longpoll":
                    longPoll(o);
                    break;
                case "create-topic":
                    createTopic(o, o.str("topic"), o.integer("queues", 4));
                    break;
                default:
                    throw new IllegalArgumentException("unknown scenario: " + args[0]);
            }
        } catch (Throwable t) {
            StringWriter sw = new StringWriter();
            t.printStackTrace(new PrintWriter(sw));
            Json.event("error").put("error", t.toString()).put("stack", sw.toString()).emit();
            rc = 1;
        }
        Json.event("exit").put("rc", rc).emit();
        // Client threads are not all daemons; leave without waiting for them.
        Runtime.getRuntime().halt(rc);
    }

    private static void startWatchdog(long deadlineMs) {
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(deadlineMs);
            } catch (InterruptedException e) {
                return;
            }
            Json.event("error").put("error", "deadline of " + deadlineMs + " ms exceeded").emit();
            Runtime.getRuntime().halt(3);
        }, "compat-watchdog");
        t.setDaemon(true);
        t.start();
    }

    // ------------------------------------------------------------------------------ producers

    private static DefaultMQProducer startProducer(Options o, String suffix) throws MQClientException {
        DefaultMQProducer p = new DefaultMQProducer(o.str("producer-group", "PG_" + o.str("topic")));
        p.setNamesrvAddr(o.str("namesrv"));
        p.setInstanceName(INSTANCE_BASE + "-p" + suffix);
        p.setSendMsgTimeout(o.integer("send-timeout-ms", 5000));
        p.setRetryTimesWhenSendFailed(o.integer("retries", 2));
        p.setRetryTimesWhenSendAsyncFailed(o.integer("retries", 2));
        p.start();
        return p;
    }

    private static Message message(Options o, int i) {
        String topic = o.str("topic");
        String body = o.str("body-prefix", topic) + "-" + i;
        List<String> tags = o.list("tags");
        Message m = new Message(topic, body.getBytes(StandardCharsets.UTF_8));
        if (!tags.isEmpty()) {
            m.setTags(tags.get(i % tags.size()));
        }
        m.setKeys("k-" + i);
        m.putUserProperty("seq", Integer.toString(i));
        return m;
    }

    private static String body(Message m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    private static void emitSent(int i, Message m, SendResult r, String msgId, String offsetMsgId,
        long queueOffset) {
        Json.event("sent").put("i", i).put("body", body(m)).put("tags", m.getTags()).put("keys", m.getKeys())
            .put("status", r.getSendStatus().name()).put("msgId", msgId).put("offsetMsgId", offsetMsgId)
            .put("broker", r.getMessageQueue().getBrokerName()).put("queueId", r.getMessageQueue().getQueueId())
            .put("queueOffset", queueOffset).emit();
    }

    private static void emitSent(int i, Message m, SendResult r) {
        emitSent(i, m, r, r.getMsgId(), r.getOffsetMsgId(), r.getQueueOffset());
    }

    private static void emitSendFailed(int i, Message m, Throwable e) {
        Json.event("send_failed").put("i", i).put("body", body(m)).put("error", e.toString()).emit();
    }

    private static void produce(Options o) throws Exception {
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
                            SendResult r = p.send(m);
                            emitSent(i, m, r);
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
            long deadline = System.currentTimeMillis() + 15_000;
            while (true) {
                try {
                    if (p.fetchPublishMessageQueues(topic).size() == queues) {
                        break;
                    }
                } catch (MQClientException e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("route of " + topic + " never showed " + queues + " queues");
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
    private static void invokeCreateTopic(DefaultMQProducer p, String topic, int queues) throws Exception {
        Method m;
        Object[] args;
        try {
            m = DefaultMQProducer.class.getMethod("createTopic", String.class, String.class, int.class, Map.class);
            args = new Object[] {AUTO_CREATE_TOPIC_KEY, topic, queues, new HashMap<String, String>()};
        } catch (NoSuchMethodException e) {
            m = DefaultMQProducer.class.getMethod("createTopic", String.class, String.class, int.class);
            args = new Object[] {AUTO_CREATE_TOPIC_KEY, topic, queues};
        }
        try {
            m.invoke(p, args);
        } catch (InvocationTargetException e) {
            throw (Exception) e.getCause();
        }
    }

    // ------------------------------------------------------------------------------ consumers

    /** Everything a consumer saw, shared by the listener threads and the main thread. */
    private static final class Received {
        final Map<String, Long> firstSeen = new ConcurrentHashMap<>();
        final AtomicInteger total = new AtomicInteger();
        final AtomicLong last = new AtomicLong(System.currentTimeMillis());

        void record(int consumer, MessageExt m) {
            long now = System.currentTimeMillis();
            String b = body(m);
            firstSeen.putIfAbsent(b, now);
            total.incrementAndGet();
            last.set(now);
            Json.event("recv").put("c", consumer).put("topic", m.getTopic()).put("body", b)
                .put("tags", m.getTags()).put("keys", m.getKeys()).put("seq", m.getUserProperty("seq"))
                .put("msgId", m.getMsgId()).put("queueId", m.getQueueId()).put("queueOffset", m.getQueueOffset())
                .put("commitLogOffset", m.getCommitLogOffset()).put("reconsumeTimes", m.getReconsumeTimes())
                .put("bornTimestamp", m.getBornTimestamp()).put("storeTimestamp", m.getStoreTimestamp())
                .emit();
        }

        /** Wait for `count` distinct bodies, then for `idleMs` without any message (to see extras). */
        boolean await(int count, long idleMs, long deadline, Runnable poll) throws InterruptedException {
            while (firstSeen.size() < count && System.currentTimeMillis() < deadline) {
                poll.run();
            }
            boolean complete = firstSeen.size() >= count;
            while (System.currentTimeMillis() < deadline
                && System.currentTimeMillis() - last.get() < idleMs) {
                poll.run();
            }
            // When the count came early, still listen `idleMs` in full.
            return complete;
        }
    }

    private static Runnable sleeper() {
        return () -> {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
    }

    private static ConsumeFromWhere fromWhere(Options o) {
        return "last".equals(o.str("consume-from", "first"))
            ? ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET : ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET;
    }

    private static DefaultMQPushConsumer startPushConsumer(Options o, int index, Received received)
        throws MQClientException {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(o.str("group"));
        c.setNamesrvAddr(o.str("namesrv"));
        c.setInstanceName(INSTANCE_BASE + "-c" + index);
        c.setConsumeFromWhere(fromWhere(o));
        c.subscribe(o.str("topic"), o.str("tag-expr", "*"));
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                received.record(index, m);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        Json.event("consumer_started").put("c", index).emit();
        return c;
    }

    /**
     * After a rebalance the client raises its subscription version and sends a heartbeat so the
     * broker learns it; until then the broker answers pulls with SUBSCRIPTION_NOT_LATEST. That
     * heartbeat is skipped when the periodic heartbeat holds the client's lock at that moment
     * (both fire about 1 s after start), and then pulls stall until the next rebalance, 20 s
     * later. Re-sending the heartbeat every second, as the client meant to, takes that client-side
     * race out of the measurements; the requests are ordinary HEART_BEAT requests.
     */
    private static void keepHeartbeating(List<DefaultMQPushConsumer> consumers) {
        Thread t = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(1000);
                    for (DefaultMQPushConsumer c : consumers) {
                        c.getDefaultMQPushConsumerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock();
                    }
                } catch (InterruptedException e) {
                    return;
                } catch (RuntimeException e) {
                    // A consumer shutting down; the next round or the scenario's end settles it.
                }
            }
        }, "compat-heartbeat");
        t.setDaemon(true);
        t.start();
    }

    /** Queues of `topic` this consumer currently holds (RebalanceImpl's process queue table). */
    private static Set<Integer> assignedQueues(DefaultMQPushConsumer c, String topic) {
        Set<Integer> out = new HashSet<>();
        c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().forEach((mq, pq) -> {
            if (mq.getTopic().equals(topic) && !pq.isDropped()) {
                out.add(mq.getQueueId());
            }
        });
        return out;
    }

    /**
     * Wait until every consumer holds at least one queue, no queue is held twice and every queue
     * of the topic is held: rebalancing has settled, so what is sent next goes to exactly one.
     */
    private static void waitBalanced(List<DefaultMQPushConsumer> consumers, String topic, long timeoutMs)
        throws Exception {
        int total = consumers.get(0).fetchSubscribeMessageQueues(topic).size();
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            List<Set<Integer>> held = new ArrayList<>();
            Set<Integer> union = new HashSet<>();
            int sum = 0;
            for (DefaultMQPushConsumer c : consumers) {
                Set<Integer> q = assignedQueues(c, topic);
                held.add(q);
                union.addAll(q);
                sum += q.size();
            }
            boolean everyoneHasOne = held.stream().noneMatch(Set::isEmpty) || total < consumers.size();
            if (everyoneHasOne && sum == union.size() && union.size() == total) {
                List<List<Integer>> report = new ArrayList<>();
                for (Set<Integer> q : held) {
                    List<Integer> sorted = new ArrayList<>(q);
                    sorted.sort(Comparator.naturalOrder());
                    report.add(sorted);
                }
                Json.event("balanced").put("queues", total).put("assignment", report).emit();
                return;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("rebalance did not settle: " + held + " of " + total + " queues");
            }
            Thread.sleep(50);
        }
    }

    private static void consume(Options o) throws Exception {
        int createQueues = o.integer("create-topic", 0);
        if (createQueues > 0) {
            createTopic(o, o.str("topic"), createQueues);
        }
        int produceCount = o.integer("produce", 0);
        int count = o.integer("count", produceCount);
        long deadline = System.currentTimeMillis() + o.millis("timeout-ms", 30_000);
        Received received = new Received();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        boolean complete;
        try {
            for (int i = 0; i < o.integer("consumers", 1); i++) {
                consumers.add(startPushConsumer(o, i, received));
            }
            keepHeartbeating(consumers);
            if (o.integer("wait-balanced", 0) != 0) {
                waitBalanced(consumers, o.str("topic"), 20_000);
            }
            if (produceCount > 0) {
                DefaultMQProducer p = startProducer(o, "");
                try {
                    for (int i = 0; i < produceCount; i++) {
                        Message m = message(o, i);
                        emitSent(i, m, p.send(m));
                    }
                } finally {
                    p.shutdown();
                }
            }
            complete = received.await(count, o.millis("idle-ms", 1000), deadline, sleeper());
        } finally {
            // Shutting down persists the consumed offsets to the broker.
            for (DefaultMQPushConsumer c : consumers) {
                c.shutdown();
            }
        }
        Json.event("summary").put("distinct", received.firstSeen.size()).put("total", received.total.get())
            .put("complete", complete).emit();
    }

    private static void litePull(Options o) throws Exception {
        int count = o.integer("count", 0);
        long deadline = System.currentTimeMillis() + o.millis("timeout-ms", 30_000);
        Received received = new Received();
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(o.str("group"));
        c.setNamesrvAddr(o.str("namesrv"));
        c.setInstanceName(INSTANCE_BASE + "-lite");
        c.setConsumeFromWhere(fromWhere(o));
        c.setAutoCommit(true);
        c.subscribe(o.str("topic"), o.str("tag-expr", "*"));
        c.start();
        boolean complete;
        try {
            complete = received.await(count, o.millis("idle-ms", 1000), deadline, () -> {
                for (MessageExt m : c.poll(100)) {
                    received.record(0, m);
                }
            });
        } finally {
            c.shutdown();
        }
        Json.event("summary").put("distinct", received.firstSeen.size()).put("total", received.total.get())
            .put("complete", complete).emit();
    }

    private static void pull(Options o) throws Exception {
        String topic = o.str("topic");
        String expr = o.str("tag-expr", "*");
        Received received = new Received();
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(o.str("group"));
        c.setNamesrvAddr(o.str("namesrv"));
        c.setInstanceName(INSTANCE_BASE + "-pull");
        c.start();
        try {
            List<MessageQueue> queues = new ArrayList<>(c.fetchSubscribeMessageQueues(topic));
            queues.sort(Comparator.comparingInt(MessageQueue::getQueueId));
            for (MessageQueue mq : queues) {
                long offset = 0;
                for (int round = 0; round < 10_000; round++) {
                    PullResult r = c.pull(mq, expr, offset, o.integer("max-nums", 32));
                    int n = r.getMsgFoundList() == null ? 0 : r.getMsgFoundList().size();
                    Json.event("pull").put("queueId", mq.getQueueId()).put("offset", offset)
                        .put("status", r.getPullStatus().name()).put("found", n)
                        .put("nextBeginOffset", r.getNextBeginOffset()).put("minOffset", r.getMinOffset())
                        .put("maxOffset", r.getMaxOffset()).emit();
                    if (n > 0) {
                        for (MessageExt m : r.getMsgFoundList()) {
                            received.record(0, m);
                        }
                    }
                    if (r.getPullStatus() != PullStatus.FOUND && r.getPullStatus() != PullStatus.NO_MATCHED_MSG) {
                        break;
                    }
                    offset = r.getNextBeginOffset();
                }
                c.updateConsumeOffset(mq, offset);
            }
        } finally {
            c.shutdown();
        }
        Json.event("summary").put("distinct", received.firstSeen.size()).put("total", received.total.get())
            .put("complete", true).emit();
    }

    /**
     * A push consumer whose pull requests are parked at the broker (long polling) must see a new
     * message at once, not at the broker's next periodic re-check. Both clocks are this JVM's.
     */
    private static void longPoll(Options o) throws Exception {
        String topic = o.str("topic");
        createTopic(o, topic, o.integer("create-topic", 4));
        Received received = new Received();
        DefaultMQPushConsumer c = startPushConsumer(o, 0, received);
        DefaultMQProducer p = startProducer(o, "");
        try {
            List<DefaultMQPushConsumer> one = new ArrayList<>();
            one.add(c);
            keepHeartbeating(one);
            waitBalanced(one, topic, 20_000);
            for (int a = 0; a < o.integer("attempts", 3); a++) {
                // Idle first, so that every queue's pull request is suspended at the broker.
                Thread.sleep(o.millis("idle-ms", 1500));
                Message m = message(o, a);
                // How long ago each queue's current pull request left the client. A broker that
                // holds (suspends) pulls leaves these old; one that answers at once makes the
                // client pull again and again, and then they are a few ms.
                List<Long> pullAges = new ArrayList<>();
                long now = System.currentTimeMillis();
                c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().forEach((mq, pq) -> {
                    if (mq.getTopic().equals(topic) && !pq.isDropped()) {
                        pullAges.add(now - pq.getLastPullTimestamp());
                    }
                });
                long t0 = System.currentTimeMillis();
                SendResult r = p.send(m);
                long t1 = System.currentTimeMillis();
                emitSent(a, m, r);
                long waitUntil = t1 + 10_000;
                Long tr;
                while ((tr = received.firstSeen.get(body(m))) == null && System.currentTimeMillis() < waitUntil) {
                    Thread.sleep(1);
                }
                Json.event("latency").put("attempt", a).put("body", body(m))
                    .put("queueId", r.getMessageQueue().getQueueId()).put("sendStart", t0).put("sendReturn", t1)
                    .put("received", tr).put("deltaMs", tr == null ? null : tr - t1).put("pullAgesMs", pullAges)
                    .emit();
            }
        } finally {
            p.shutdown();
            c.shutdown();
        }
        Json.event("summary").put("distinct", received.firstSeen.size()).put("total", received.total.get())
            .put("complete", true).emit();
    }
}
