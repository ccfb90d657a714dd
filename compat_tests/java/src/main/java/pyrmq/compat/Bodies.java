package pyrmq.compat;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/** Message contents at the edges: many properties, maximum-size bodies. */
final class Bodies {
    private Bodies() {
    }

    static String sha256(byte[] b) {
        try {
            StringBuilder sb = new StringBuilder();
            for (byte x : MessageDigest.getInstance("SHA-256").digest(b)) {
                sb.append(String.format("%02x", x));
            }
            return sb.toString();
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * The user properties of message i (compat_tests/test_java_bodies.py builds the same):
     * `n` keys, every fifth key Cyrillic, values with CJK, emoji, accents, spaces, '=' and ':'.
     */
    static Map<String, String> properties(int i, int n) {
        Map<String, String> out = new TreeMap<>();
        for (int j = 0; j < n; j++) {
            String key = j % 5 == 0 ? "ключ_" + j : "p" + j;
            String value = "värde " + i + ":" + j + " = 值-ключ-\uD83C\uDF89-" + "ß".repeat(j % 7);
            out.put(key, value);
        }
        return out;
    }

    /** props --group G [--count 5] [--props 50]: send, consume (push), report every property. */
    static void props(Options o) throws Exception {
        String topic = o.str("topic");
        int count = o.integer("count", 5);
        int n = o.integer("props", 50);
        DefaultMQProducer p = Producers.startProducer(o, "");
        try {
            for (int i = 0; i < count; i++) {
                Message m = Producers.message(o, i);
                properties(i, n).forEach(m::putUserProperty);
                Producers.emitSent(i, m, p.send(m));
            }
        } finally {
            p.shutdown();
        }
        Consumers.Received r = new Consumers.Received();
        r.withProps = true;
        consumeAll(o, r, count);
    }

    static void consumeAll(Options o, Consumers.Received r, int count) throws Exception {
        long deadline = System.currentTimeMillis() + o.millis("timeout-ms", 60_000);
        DefaultMQPushConsumer c = Consumers.startPush(o, new Consumers.PushSpec(o.str("group"), "c0", 0), r);
        boolean complete;
        try {
            List<DefaultMQPushConsumer> one = new ArrayList<>();
            one.add(c);
            Consumers.keepHeartbeating(one);
            complete = r.await(count, o.millis("idle-ms", 1000), deadline, Consumers.sleeper());
        } finally {
            c.shutdown();
        }
        Json.event("summary").put("distinct", r.firstSeen.size()).put("total", r.total.get())
            .put("complete", complete).emit();
    }

    /**
     * bigbody --group G [--size 4194304] [--plan random/off,random/on,text/on]: one message per
     * plan entry, body of exactly `size` bytes, either random (java.util.Random seeded 1000 + i)
     * or text (a repeating ASCII pattern, compressible); sent by a producer that compresses
     * bodies of 4 KiB and more ("on", the client default) or never ("off"). Messages the broker
     * accepted are then consumed by a push consumer; sha256 and length are reported, not bodies.
     */
    static void bigBody(Options o) throws Exception {
        String topic = o.str("topic");
        int size = o.integer("size", 4 * 1024 * 1024);
        List<String> plan = o.list("plan");
        DefaultMQProducer on = Producers.startProducer(o, "-on");
        DefaultMQProducer off = Producers.startProducer(o, "-off");
        off.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        int ok = 0;
        try {
            for (int i = 0; i < plan.size(); i++) {
                String[] entry = plan.get(i).split("/");
                byte[] body = new byte[size];
                if (entry[0].equals("random")) {
                    new Random(1000 + i).nextBytes(body);
                } else {
                    for (int j = 0; j < size; j++) {
                        body[j] = (byte) "0123456789abcdef".charAt((j * 7 + i) % 16);
                    }
                }
                Message m = new Message(topic, "TagBig", body);
                m.setKeys("k-" + i);
                m.putUserProperty("seq", Integer.toString(i));
                String digest = sha256(body);
                try {
                    SendResult r = (entry[1].equals("on") ? on : off).send(m);
                    Json.event("sent").put("i", i).put("plan", plan.get(i)).put("sha256", digest)
                        .put("length", size).put("status", r.getSendStatus().name()).put("msgId", r.getMsgId())
                        .put("offsetMsgId", r.getOffsetMsgId()).put("queueId", r.getMessageQueue().getQueueId())
                        .put("queueOffset", r.getQueueOffset()).emit();
                    ok++;
                } catch (Exception ex) {
                    Json.event("send_failed").put("i", i).put("plan", plan.get(i)).put("sha256", digest)
                        .put("code", Admin.errorCode(ex)).put("error", ex.toString()).emit();
                }
            }
        } finally {
            on.shutdown();
            off.shutdown();
        }
        Consumers.Received r = new Consumers.Received();
        r.digest = true;
        consumeAll(o, r, ok);
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
