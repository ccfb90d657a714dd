package pyrmq.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAccumulator;
import java.util.concurrent.atomic.LongAdder;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * A load generator for a RocketMQ broker, on the official Java client: N threads share one
 * {@link DefaultMQProducer} and send in a loop (sync send, one message or one batch per call),
 * while a push consumer (clustering, from the first offset) in the same JVM counts what arrives.
 *
 * <pre>
 * java -Drocketmq.serialize.type=ROCKETMQ -cp CLASSPATH pyrmq.bench.LoadGen \
 *     --namesrv 127.0.0.1:9876 --topic T [--threads 16] [--size 1024] [--batch 1]
 *     [--warmup 5] [--duration 15] [--consume true] [--drain-timeout 30] [--send-timeout 3000]
 *     [--transaction false] [--topics 1] [--mode load] [--messages 0] [--group bench_cg]
 * </pre>
 *
 * --topics N (N > 1) sends round robin to the topics T_0 .. T_{N-1} instead of T (the consumer,
 * if any, subscribes to all of them).
 *
 * --mode fill sends exactly --messages messages (no warm-up, no window, no consumer) and reports
 * how long that took; --mode drain starts only the consumer (--group, from the first offset) and
 * reports how long it takes to receive --messages messages (a backlog read).
 *
 * With --transaction true the producer is a TransactionMQProducer whose local transaction commits
 * at once: each call is a half message, the local transaction and a oneway END_TRANSACTION; the
 * consumer counts the committed messages.
 *
 * Phases: warm-up (sending, not counted), measurement (--duration seconds), then the producers
 * stop and the consumer is given up to --drain-timeout seconds to receive every message that was
 * acknowledged with SEND_OK. The topic must exist (bench/side_by_side.py creates it).
 *
 * Output on stdout, one JSON object per line: {@code start}, a {@code tick} per second (rates of
 * that second), a {@code phase} when the measurement window opens and closes, and a final
 * {@code summary}:
 * <ul>
 * <li>send_tps: messages acknowledged SEND_OK per second during the measurement window
 *     (a batch counts as its number of messages); send_calls_tps: send calls per second;</li>
 * <li>avg_rt_ms / max_rt_ms: round trip of one successful send call in the window;</li>
 * <li>send_failed: calls that threw (timeouts, broker errors, ...); send_not_ok: calls answered
 *     with a status other than SEND_OK;</li>
 * <li>consume_tps: messages the consumer received during the window, per second;</li>
 * <li>sent_total / consumed_total / lag: after the drain; drain_s: how long the drain took;</li>
 * <li>b2c_avg_ms / b2c_max_ms: born-to-consume latency over every consumed message;</li>
 * <li>s2c_p50_ms / s2c_p99_ms / s2c_avg_ms and b2c_p50_ms / b2c_p99_ms: store-to-consume and
 *     born-to-consume latency (now minus the message's storeTimestamp / bornTimestamp when the
 *     listener gets it) of the messages consumed during the window, from a 1 ms histogram.</li>
 * </ul>
 */
public final class LoadGen {

    private final Map<String, String> opts;
    private final String namesrv;
    private final String topic;
    private final int threads;
    private final int size;
    private final int batch;
    private final int warmupS;
    private final int durationS;
    private final boolean consume;
    private final int drainTimeoutS;
    private final int sendTimeoutMs;
    private final boolean transaction;
    private final List<String> topics = new ArrayList<>();
    private final String mode;
    private final long messages;

    private final LongAdder sentMsgs = new LongAdder();
    private final LongAdder sendCalls = new LongAdder();
    private final LongAdder rtSumNanos = new LongAdder();
    private final LongAccumulator rtMaxNanos = new LongAccumulator(Math::max, 0);
    private final LongAccumulator tickRtMaxNanos = new LongAccumulator(Math::max, 0);
    private final LongAdder sendFailed = new LongAdder();
    private final LongAdder sendNotOk = new LongAdder();
    private final LongAdder consumed = new LongAdder();
    private final LongAdder b2cSumMs = new LongAdder();
    private final LongAccumulator b2cMaxMs = new LongAccumulator(Math::max, 0);
    private final Map<String, LongAdder> errors = new ConcurrentHashMap<>();
    // 1 ms buckets up to a minute (the last bucket takes everything slower): window latencies
    private static final int HIST_MS = 60_000;
    private final AtomicLongArray s2cHist = new AtomicLongArray(HIST_MS + 1);
    private final AtomicLongArray b2cHist = new AtomicLongArray(HIST_MS + 1);
    private final LongAdder s2cSumMs = new LongAdder();
    // fill mode: messages still to send (shared by the sender threads)
    private final AtomicLong toSend = new AtomicLong();
    private final AtomicLong topicTurn = new AtomicLong();

    private volatile boolean stop;
    private volatile String phase = "warmup";
    private final long t0 = System.nanoTime();

    private LoadGen(Map<String, String> opts) {
        this.opts = opts;
        namesrv = required(opts, "namesrv");
        topic = required(opts, "topic");
        threads = Integer.parseInt(opts.getOrDefault("threads", "16"));
        size = Integer.parseInt(opts.getOrDefault("size", "1024"));
        batch = Integer.parseInt(opts.getOrDefault("batch", "1"));
        warmupS = Integer.parseInt(opts.getOrDefault("warmup", "5"));
        durationS = Integer.parseInt(opts.getOrDefault("duration", "15"));
        consume = Boolean.parseBoolean(opts.getOrDefault("consume", "true"));
        drainTimeoutS = Integer.parseInt(opts.getOrDefault("drain-timeout", "30"));
        sendTimeoutMs = Integer.parseInt(opts.getOrDefault("send-timeout", "3000"));
        transaction = Boolean.parseBoolean(opts.getOrDefault("transaction", "false"));
        int topicCount = Integer.parseInt(opts.getOrDefault("topics", "1"));
        if (topicCount <= 1) {
            topics.add(topic);
        } else {
            for (int i = 0; i < topicCount; i++) {
                topics.add(topic + "_" + i);
            }
        }
        mode = opts.getOrDefault("mode", "load");
        messages = Long.parseLong(opts.getOrDefault("messages", "0"));
        if (!mode.equals("load") && !mode.equals("fill") && !mode.equals("drain")) {
            throw new IllegalArgumentException("--mode is load, fill or drain");
        }
        if (!mode.equals("load") && messages < 1) {
            throw new IllegalArgumentException("--mode " + mode + " needs --messages >= 1");
        }
        if (transaction && batch != 1) {
            throw new IllegalArgumentException("--transaction true sends single messages (--batch 1)");
        }
        if (threads < 1 || size < 1 || batch < 1 || durationS < 1 || warmupS < 0) {
            throw new IllegalArgumentException("threads, size, batch, duration must be >= 1, warmup >= 0");
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --option value, got " + args[i]);
            }
            opts.put(args[i].substring(2), args[i + 1]);
        }
        if (args.length % 2 != 0) {
            throw new IllegalArgumentException("option without a value: " + args[args.length - 1]);
        }
        int code = new LoadGen(opts).run();
        System.out.flush();
        // The client's shutdown can linger (unregistering, persisting offsets); the numbers are out.
        Runtime.getRuntime().halt(code);
    }

    private int run() throws Exception {
        // The serialize type is read once, when RemotingCommand is loaded: report what it is.
        String serialize = RemotingCommand.createRequestCommand(0, null).getSerializeTypeCurrentRPC().name();
        emit("start", obj("serialize", serialize, "client_version", MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION),
                "topic", topic, "topics", topics.size(), "mode", mode, "messages", messages, "threads", threads, "size", size, "batch", batch, "transaction", transaction,
                "warmup_s", warmupS,
                "duration_s", durationS, "consume", consume, "send_timeout_ms", sendTimeoutMs));

        String instance = "bench-" + ProcessHandle.current().pid();
        if (mode.equals("drain")) {
            return drain(instance);
        }
        DefaultMQPushConsumer consumer = consume && mode.equals("load") ? startConsumer(instance) : null;

        DefaultMQProducer producer;
        if (transaction) {
            TransactionMQProducer tx = new TransactionMQProducer(opts.getOrDefault("producer-group", "bench_pg"));
            tx.setTransactionListener(new TransactionListener() {
                @Override
                public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                    return LocalTransactionState.COMMIT_MESSAGE;
                }

                @Override
                public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
            });
            producer = tx;
        } else {
            producer = new DefaultMQProducer(opts.getOrDefault("producer-group", "bench_pg"));
        }
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(instance + "-p");
        producer.setSendMsgTimeout(sendTimeoutMs);
        producer.start();

        byte[] body = new byte[size];
        new Random(42).nextBytes(body);

        List<Thread> senders = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            Thread t = new Thread(() -> sendLoop(producer, body), "sender-" + i);
            t.setDaemon(true);
            senders.add(t);
        }

        ScheduledExecutorService ticker = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "ticker");
            t.setDaemon(true);
            return t;
        });
        long[] last = snapshot();
        long[] lastAt = {System.nanoTime()};
        ticker.scheduleAtFixedRate(() -> {
            long[] now = snapshot();
            long at = System.nanoTime();
            double secs = (at - lastAt[0]) / 1e9;
            long calls = now[1] - last[1];
            emit("tick", obj("phase", phase, "t", round((at - t0) / 1e9, 1),
                    "send_tps", round((now[0] - last[0]) / secs, 1),
                    "send_calls_tps", round(calls / secs, 1),
                    "avg_rt_ms", calls == 0 ? 0.0 : round((now[2] - last[2]) / 1e6 / calls, 3),
                    "max_rt_ms", round(tickRtMaxNanos.getThenReset() / 1e6, 3),
                    "send_failed", now[3] - last[3], "send_not_ok", now[4] - last[4],
                    "consume_tps", round((now[5] - last[5]) / secs, 1)));
            System.arraycopy(now, 0, last, 0, now.length);
            lastAt[0] = at;
        }, 1, 1, TimeUnit.SECONDS);

        if (mode.equals("fill")) {
            return fill(senders, ticker, producer);
        }
        for (Thread t : senders) {
            t.start();
        }
        Thread.sleep(warmupS * 1000L);

        phase = "measure";
        rtMaxNanos.reset();
        long[] a = snapshot();
        long winStart = System.nanoTime();
        emit("phase", obj("phase", phase, "t", round((winStart - t0) / 1e9, 3)));
        Thread.sleep(durationS * 1000L);
        long[] b = snapshot();
        long rtMaxWindow = rtMaxNanos.get();
        long winEnd = System.nanoTime();
        double window = (winEnd - winStart) / 1e9;
        stop = true;
        phase = "drain";
        emit("phase", obj("phase", phase, "t", round((winEnd - t0) / 1e9, 3)));

        for (Thread t : senders) {
            t.join(sendTimeoutMs * 3L + 1000);
        }
        long sentTotal = sentMsgs.sum();
        long drainStart = System.nanoTime();
        long drainDeadline = drainStart + drainTimeoutS * 1_000_000_000L;
        while (consume && consumed.sum() < sentTotal && System.nanoTime() < drainDeadline) {
            Thread.sleep(50);
        }
        double drainS = (System.nanoTime() - drainStart) / 1e9;
        ticker.shutdownNow();

        long calls = b[1] - a[1];
        long consumedTotal = consumed.sum();
        Map<String, Object> summary = obj(
                "serialize", serialize, "threads", threads, "size", size, "batch", batch, "transaction", transaction,
                "window_s", round(window, 3),
                "send_tps", round((b[0] - a[0]) / window, 1),
                "send_calls_tps", round(calls / window, 1),
                "avg_rt_ms", calls == 0 ? 0.0 : round((b[2] - a[2]) / 1e6 / calls, 3),
                "max_rt_ms", round(rtMaxWindow / 1e6, 3),
                "send_failed", b[3] - a[3], "send_not_ok", b[4] - a[4],
                "send_failed_total", sendFailed.sum(), "send_not_ok_total", sendNotOk.sum(),
                "consume_tps", consume ? round((b[5] - a[5]) / window, 1) : null,
                "sent_total", sentTotal, "consumed_total", consumedTotal,
                "lag", consume ? sentTotal - consumedTotal : null,
                "drain_s", consume ? round(drainS, 3) : null,
                "b2c_avg_ms", consumedTotal == 0 ? null : round((double) b2cSumMs.sum() / consumedTotal, 1),
                "b2c_max_ms", consumedTotal == 0 ? null : b2cMaxMs.get());
        long inWindow = 0;
        for (int i = 0; i <= HIST_MS; i++) {
            inWindow += s2cHist.get(i);
        }
        summary.put("latency_samples", inWindow);
        summary.put("s2c_avg_ms", inWindow == 0 ? null : round((double) s2cSumMs.sum() / inWindow, 2));
        summary.put("s2c_p50_ms", percentile(s2cHist, inWindow, 0.50));
        summary.put("s2c_p99_ms", percentile(s2cHist, inWindow, 0.99));
        summary.put("b2c_p50_ms", percentile(b2cHist, inWindow, 0.50));
        summary.put("b2c_p99_ms", percentile(b2cHist, inWindow, 0.99));
        Map<String, Object> errs = new LinkedHashMap<>();
        errors.forEach((k, v) -> errs.put(k, v.sum()));
        summary.put("errors", errs);
        emit("summary", summary);

        Thread closer = new Thread(() -> {
            producer.shutdown();
        }, "closer");
        DefaultMQPushConsumer c = consumer;
        Thread closer2 = new Thread(() -> {
            if (c != null) {
                c.shutdown();
            }
        }, "closer2");
        closer.setDaemon(true);
        closer2.setDaemon(true);
        closer.start();
        closer2.start();
        closer.join(5000);
        closer2.join(5000);
        return 0;
    }

    private DefaultMQPushConsumer startConsumer(String instance) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(opts.getOrDefault("group", "bench_cg"));
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(instance + "-c");
        consumer.setMessageModel(MessageModel.CLUSTERING);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        for (String t : topics) {
            consumer.subscribe(t, "*");
        }
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            long now = System.currentTimeMillis();
            boolean window = "measure".equals(phase);
            for (MessageExt m : msgs) {
                long b2c = Math.max(0, now - m.getBornTimestamp());
                b2cSumMs.add(b2c);
                b2cMaxMs.accumulate(b2c);
                if (window) {
                    long s2c = Math.max(0, now - m.getStoreTimestamp());
                    s2cSumMs.add(s2c);
                    s2cHist.incrementAndGet((int) Math.min(s2c, HIST_MS));
                    b2cHist.incrementAndGet((int) Math.min(b2c, HIST_MS));
                }
            }
            consumed.add(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        return consumer;
    }

    /** --mode fill: the senders share --messages messages; returns when all are acknowledged. */
    private int fill(List<Thread> senders, ScheduledExecutorService ticker, DefaultMQProducer producer)
            throws Exception {
        toSend.set(messages);
        phase = "measure";
        long start = System.nanoTime();
        emit("phase", obj("phase", phase, "t", round((start - t0) / 1e9, 3)));
        for (Thread t : senders) {
            t.start();
        }
        for (Thread t : senders) {
            t.join();
        }
        long end = System.nanoTime();
        phase = "drain";
        emit("phase", obj("phase", phase, "t", round((end - t0) / 1e9, 3)));
        ticker.shutdownNow();
        double secs = (end - start) / 1e9;
        Map<String, Object> summary = obj("mode", mode, "messages", messages, "sent_total", sentMsgs.sum(),
                "fill_s", round(secs, 3), "send_tps", round(sentMsgs.sum() / secs, 1),
                "send_failed_total", sendFailed.sum(), "send_not_ok_total", sendNotOk.sum());
        Map<String, Object> errs = new LinkedHashMap<>();
        errors.forEach((k, v) -> errs.put(k, v.sum()));
        summary.put("errors", errs);
        emit("summary", summary);
        Thread closer = new Thread(producer::shutdown, "closer");
        closer.setDaemon(true);
        closer.start();
        closer.join(5000);
        return sentMsgs.sum() >= messages ? 0 : 3;
    }

    /** The smallest bucket (ms) at or below which a fraction q of the n samples lie. */
    private static Long percentile(AtomicLongArray hist, long n, double q) {
        if (n == 0) {
            return null;
        }
        long rank = (long) Math.ceil(q * n);
        long seen = 0;
        for (int i = 0; i <= HIST_MS; i++) {
            seen += hist.get(i);
            if (seen >= rank) {
                return (long) i;
            }
        }
        return (long) HIST_MS;
    }

    /** --mode drain: a consumer only, until it has received --messages messages. */
    private int drain(String instance) throws Exception {
        long start = System.nanoTime();
        phase = "measure";
        emit("phase", obj("phase", phase, "t", round((start - t0) / 1e9, 3)));
        DefaultMQPushConsumer consumer = startConsumer(instance);
        long deadline = start + drainTimeoutS * 1_000_000_000L;
        long firstAt = 0;
        while (consumed.sum() < messages && System.nanoTime() < deadline) {
            if (firstAt == 0 && consumed.sum() > 0) {
                firstAt = System.nanoTime();
            }
            Thread.sleep(5);
        }
        long end = System.nanoTime();
        phase = "drain";
        emit("phase", obj("phase", phase, "t", round((end - t0) / 1e9, 3)));
        long got = consumed.sum();
        double secs = (end - start) / 1e9;
        emit("summary", obj("mode", mode, "messages", messages, "consumed_total", got,
                "consume_s", round(secs, 3), "consume_tps", round(got / secs, 1),
                "first_message_s", firstAt == 0 ? null : round((firstAt - start) / 1e9, 3),
                "complete", got >= messages));
        Thread closer = new Thread(consumer::shutdown, "closer");
        closer.setDaemon(true);
        closer.start();
        closer.join(5000);
        return got >= messages ? 0 : 3;
    }

    private void sendLoop(DefaultMQProducer producer, byte[] body) {
        boolean fill = mode.equals("fill");
        while (!stop) {
            int n = batch;
            if (fill) {
                long left = toSend.getAndAdd(-batch);
                if (left <= 0) {
                    return;
                }
                n = (int) Math.min(batch, left);
            }
            String to = topics.size() == 1 ? topic : topics.get((int) (topicTurn.getAndIncrement() % topics.size()));
            long start = System.nanoTime();
            try {
                SendResult result;
                if (transaction) {
                    // half message, local transaction (commits at once), END_TRANSACTION oneway
                    result = producer.sendMessageInTransaction(new Message(to, body), null);
                } else if (n == 1) {
                    result = producer.send(new Message(to, body));
                } else {
                    List<Message> msgs = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        msgs.add(new Message(to, body));
                    }
                    result = producer.send(msgs);
                }
                long rt = System.nanoTime() - start;
                if (result.getSendStatus() == SendStatus.SEND_OK) {
                    sentMsgs.add(n);
                    sendCalls.increment();
                    rtSumNanos.add(rt);
                    rtMaxNanos.accumulate(rt);
                    tickRtMaxNanos.accumulate(rt);
                } else {
                    sendNotOk.increment();
                    noteError("status " + result.getSendStatus());
                }
            } catch (Exception e) {
                sendFailed.increment();
                noteError(e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()));
                if (fill) {
                    toSend.addAndGet(n); // not stored (as far as we know): someone sends them again
                }
                try {
                    Thread.sleep(100); // do not spin against a failing broker
                } catch (InterruptedException ie) {
                    return;
                }
            }
        }
    }

    private void noteError(String text) {
        // Keep the first line, cut the client's "See http://rocketmq.apache.org/docs/faq/" tail.
        String key = text.split("\n", 2)[0];
        if (key.length() > 300) {
            key = key.substring(0, 300);
        }
        if (errors.size() < 20 || errors.containsKey(key)) {
            errors.computeIfAbsent(key, k -> new LongAdder()).increment();
        }
    }

    /** {sent msgs, calls, rt sum, failed, not ok, consumed}. */
    private long[] snapshot() {
        return new long[] {sentMsgs.sum(), sendCalls.sum(), rtSumNanos.sum(), sendFailed.sum(),
                sendNotOk.sum(), consumed.sum()};
    }

    // ------------------------------------------------------------------------------ output

    private static String required(Map<String, String> opts, String key) {
        String v = opts.get(key);
        if (v == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return v;
    }

    private static double round(double v, int places) {
        double f = Math.pow(10, places);
        return Math.round(v * f) / f;
    }

    private static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    private static void emit(String type, Map<String, Object> fields) {
        StringBuilder sb = new StringBuilder("{\"type\":\"").append(type).append('"');
        for (Map.Entry<String, Object> e : fields.entrySet()) {
            sb.append(",\"").append(escape(e.getKey())).append("\":");
            append(sb, e.getValue());
        }
        sb.append('}');
        synchronized (System.out) {
            System.out.println(sb);
            System.out.flush();
        }
    }

    @SuppressWarnings("unchecked")
    private static void append(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Double) {
            double d = (Double) v;
            sb.append(Double.isFinite(d) ? String.format(Locale.ROOT, "%s", d) : "null");
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                sb.append('"').append(escape(e.getKey())).append("\":");
                append(sb, e.getValue());
            }
            sb.append('}');
        } else {
            sb.append('"').append(escape(v.toString())).append('"');
        }
    }

    private static String escape(String s) {
        StringBuilder sb = new StringBuilder(s.length() + 8);
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.toString();
    }
}
