package pyrmq.compat;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/** The consumer side: push, pull, lite pull, queue sharing and long polling. */
final class Consumers {
    private Consumers() {
    }

    /** Everything a consumer saw, shared by the listener threads and the main thread. */
    static final class Received {
        final Map<String, Long> firstSeen = new ConcurrentHashMap<>();
        final AtomicInteger total = new AtomicInteger();
        final AtomicLong last = new AtomicLong(System.currentTimeMillis());
        /** Put into every recv event as "g" when set (several groups in one run). */
        String label;
        /** Put into every recv event as "phase"; scenarios advance it between their steps. */
        volatile int phase;
        /** Emit every property of the message ("props"). */
        boolean withProps;
        /** Bodies are binary: emit "sha256" and "length" instead of "body", key by the digest. */
        boolean digest;

        Received label(String l) {
            label = l;
            return this;
        }

        /** Distinct bodies (or digests) seen in `phase`, counted by the caller's own map. */
        final Map<Integer, Map<String, Boolean>> perPhase = new ConcurrentHashMap<>();

        int distinctIn(int p) {
            Map<String, Boolean> m = perPhase.get(p);
            return m == null ? 0 : m.size();
        }

        void record(int consumer, MessageExt m) {
            long now = System.currentTimeMillis();
            String b = digest ? Bodies.sha256(m.getBody()) : Producers.body(m);
            int p = phase;
            firstSeen.putIfAbsent(b, now);
            perPhase.computeIfAbsent(p, k -> new ConcurrentHashMap<>()).put(b, Boolean.TRUE);
            total.incrementAndGet();
            last.set(now);
            Json e = Json.event("recv").put("c", consumer).put("topic", m.getTopic());
            if (digest) {
                e.put("sha256", b).put("length", m.getBody().length);
            } else {
                e.put("body", b);
            }
            e.put("tags", m.getTags()).put("keys", m.getKeys()).put("seq", m.getUserProperty("seq"))
                .put("msgId", m.getMsgId()).put("queueId", m.getQueueId()).put("queueOffset", m.getQueueOffset())
                .put("commitLogOffset", m.getCommitLogOffset()).put("reconsumeTimes", m.getReconsumeTimes())
                .put("bornTimestamp", m.getBornTimestamp()).put("storeTimestamp", m.getStoreTimestamp())
                .put("sysFlag", m.getSysFlag()).put("thread", Thread.currentThread().getName()).put("at", now);
            if (label != null) {
                e.put("g", label);
            }
            if (p != 0) {
                e.put("phase", p);
            }
            if (withProps) {
                e.put("props", new java.util.TreeMap<>(m.getProperties()));
            }
            e.emit();
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

    static Runnable sleeper() {
        return () -> {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
    }

    static ConsumeFromWhere fromWhere(Options o) {
        return "last".equals(o.str("consume-from", "first"))
            ? ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET : ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET;
    }

    static DefaultMQPushConsumer startPushConsumer(Options o, int index, Received received)
        throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(o.str("group"));
        c.setNamesrvAddr(o.str("namesrv"));
        c.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-c" + index);
        c.setPollNameServerInterval(o.integer("poll-namesrv-ms", 30_000));
        ScenarioRunner.applyTls(c, o);
        c.setConsumeFromWhere(fromWhere(o));
        if (o.integer("client-rebalance", 1) == 0) {
            Compat.setClientRebalance(c, false);
        }
        String filterClass = o.str("filter-class", "");
        String sql = o.str("sql-expr", "");
        if (!filterClass.isEmpty()) {
            // Class filter (FilterServers): the source is uploaded with every heartbeat, so a short
            // --heartbeat-ms lets a restarted FilterServer get it back soon.
            String source = new String(java.nio.file.Files.readAllBytes(java.nio.file.Paths.get(o.str("filter-source"))),
                java.nio.charset.StandardCharsets.UTF_8);
            c.subscribe(o.str("topic"), filterClass, source);
        } else if (!sql.isEmpty()) {
            c.subscribe(o.str("topic"), MessageSelector.bySql(sql));
        } else {
            c.subscribe(o.str("topic"), o.str("tag-expr", "*"));
        }
        c.setHeartbeatBrokerInterval(o.integer("heartbeat-ms", 30_000));
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

    /** Push consumer options beyond the basic scenario: group, listener kind, model, start point. */
    static final class PushSpec {
        String group;
        String instance;
        int index;
        boolean orderly;
        boolean broadcasting;
        ConsumeFromWhere from = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET;
        String timestamp;

        PushSpec(String group, String instance, int index) {
            this.group = group;
            this.instance = instance;
            this.index = index;
        }
    }

    static DefaultMQPushConsumer startPush(Options o, PushSpec spec, Received received) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(spec.group);
        c.setNamesrvAddr(o.str("namesrv"));
        c.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-" + spec.instance);
        // A master that went down leaves the client's route only at its next NameServer poll.
        c.setPollNameServerInterval(o.integer("poll-namesrv-ms", 30_000));
        c.setConsumeFromWhere(spec.from);
        if (spec.timestamp != null) {
            c.setConsumeTimestamp(spec.timestamp);
        }
        if (spec.broadcasting) {
            Compat.setMessageModel(c, "BROADCASTING");
        }
        c.subscribe(o.str("topic"), o.str("tag-expr", "*"));
        final int index = spec.index;
        if (spec.orderly) {
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    received.record(index, m);
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    received.record(index, m);
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        c.start();
        Json.event("consumer_started").put("c", index).put("group", spec.group).emit();
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
    static void keepHeartbeating(List<DefaultMQPushConsumer> consumers) {
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
    static Set<Integer> assignedQueues(DefaultMQPushConsumer c, String topic) {
        return assignedQueues(c, topic, false);
    }

    /** With `locked`: only queues whose broker lock the consumer holds (orderly consumers). */
    static Set<Integer> assignedQueues(DefaultMQPushConsumer c, String topic, boolean locked) {
        Set<Integer> out = new HashSet<>();
        c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().forEach((mq, pq) -> {
            if (mq.getTopic().equals(topic) && !pq.isDropped() && (!locked || pq.isLocked())) {
                out.add(mq.getQueueId());
            }
        });
        return out;
    }

    /**
     * Wait until every consumer holds at least one queue, no queue is held twice and every queue
     * of the topic is held: rebalancing has settled, so what is sent next goes to exactly one.
     */
    static void waitBalanced(List<DefaultMQPushConsumer> consumers, String topic, long timeoutMs)
        throws Exception {
        waitBalanced(consumers, topic, timeoutMs, false, null);
    }

    /** As above; `locked` counts only locked queues, `phase` labels the event. Returns the wait in ms. */
    static long waitBalanced(List<DefaultMQPushConsumer> consumers, String topic, long timeoutMs, boolean locked,
        String phase) throws Exception {
        long start = System.currentTimeMillis();
        int total = consumers.get(0).fetchSubscribeMessageQueues(topic).size();
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            List<Set<Integer>> held = new ArrayList<>();
            Set<Integer> union = new HashSet<>();
            int sum = 0;
            for (DefaultMQPushConsumer c : consumers) {
                Set<Integer> q = assignedQueues(c, topic, locked);
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
                long took = System.currentTimeMillis() - start;
                Json.event("balanced").put("queues", total).put("assignment", report).put("phase", phase)
                    .put("ms", took).emit();
                return took;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("rebalance did not settle: " + held + " of " + total + " queues");
            }
            Thread.sleep(50);
        }
    }

    static void consume(Options o) throws Exception {
        int createQueues = o.integer("create-topic", 0);
        if (createQueues > 0) {
            Producers.createTopic(o, o.str("topic"), createQueues);
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
                DefaultMQProducer p = Producers.startProducer(o, "");
                try {
                    for (int i = 0; i < produceCount; i++) {
                        Message m = Producers.message(o, i);
                        Producers.emitSent(i, m, p.send(m));
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

    static void litePull(Options o) throws Exception {
        int count = o.integer("count", 0);
        long deadline = System.currentTimeMillis() + o.millis("timeout-ms", 30_000);
        Received received = new Received();
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(o.str("group"));
        c.setNamesrvAddr(o.str("namesrv"));
        c.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-lite");
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

    static void pull(Options o) throws Exception {
        String topic = o.str("topic");
        String expr = o.str("tag-expr", "*");
        Received received = new Received();
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(o.str("group"));
        c.setNamesrvAddr(o.str("namesrv"));
        c.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-pull");
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
    static void longPoll(Options o) throws Exception {
        String topic = o.str("topic");
        Producers.createTopic(o, topic, o.integer("create-topic", 4));
        Received received = new Received();
        DefaultMQPushConsumer c = startPushConsumer(o, 0, received);
        DefaultMQProducer p = Producers.startProducer(o, "");
        try {
            List<DefaultMQPushConsumer> one = new ArrayList<>();
            one.add(c);
            keepHeartbeating(one);
            waitBalanced(one, topic, 20_000);
            for (int a = 0; a < o.integer("attempts", 3); a++) {
                // Idle first, so that every queue's pull request is suspended at the broker.
                Thread.sleep(o.millis("idle-ms", 1500));
                Message m = Producers.message(o, a);
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
                Producers.emitSent(a, m, r);
                long waitUntil = t1 + 10_000;
                Long tr;
                String b = Producers.body(m);
                while ((tr = received.firstSeen.get(b)) == null && System.currentTimeMillis() < waitUntil) {
                    Thread.sleep(1);
                }
                Json.event("latency").put("attempt", a).put("body", Producers.body(m))
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
