package pyrmq.compat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Request/reply (`request`): a replier -- a push consumer of --topic in --group that answers every
 * message with {@link MessageUtil#createReplyMessage} sent by its own producer -- and a
 * requester calling {@code DefaultMQProducer.request()} --count times synchronously, then --count
 * times with a {@link RequestCallback} (--mode sync|async|both, default both).
 *
 * Events: `replied` (the replier's send of each reply: status, topic), `reply` (the requester got
 * the answer to request i: its body, the request's mode, the round trip in ms), `request_failed`.
 * Reply bodies are "reply:" + the request's body.
 */
final class Requests {
    private Requests() {
    }

    static void run(Options o) throws Exception {
        String topic = o.str("topic");
        Producers.createTopic(o, topic, o.integer("queues", 4));
        int count = o.integer("count", 5);
        long timeoutMs = o.millis("request-timeout-ms", 10_000);
        String mode = o.str("mode", "both");

        DefaultMQProducer replyProducer = Producers.startProducer(
            new Options(new String[]{"--namesrv", o.str("namesrv"), "--topic", topic,
                "--producer-group", "PG_reply_" + o.str("group")}, 0), "-replier");
        // The broker can push a reply to the requester before the replier's send() has returned, so
        // the replier's `replied` event may still be pending when the last request completes.
        AtomicInteger answered = new AtomicInteger();
        DefaultMQPushConsumer replier = new DefaultMQPushConsumer(o.str("group"));
        replier.setNamesrvAddr(o.str("namesrv"));
        replier.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-replier");
        replier.subscribe(topic, "*");
        replier.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    byte[] body = ("reply:" + Producers.body(m)).getBytes(StandardCharsets.UTF_8);
                    Message reply = MessageUtil.createReplyMessage(m, body);
                    SendResult r = replyProducer.send(reply, 5000);
                    Json.event("replied").put("body", Producers.body(m)).put("topic", reply.getTopic())
                        .put("status", r.getSendStatus().name()).put("queueOffset", r.getQueueOffset()).emit();
                } catch (Exception e) {
                    Json.event("reply_failed").put("body", Producers.body(m)).put("error", e.toString()).emit();
                }
                answered.incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        replier.start();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        consumers.add(replier);
        Consumers.keepHeartbeating(consumers);
        Consumers.waitBalanced(consumers, topic, 20_000);

        DefaultMQProducer requester = Producers.startProducer(o, "-requester");
        int ok = 0;
        int failed = 0;
        try {
            if (!"async".equals(mode)) {
                for (int i = 0; i < count; i++) {
                    Message m = Producers.message(o, i);
                    long t0 = System.currentTimeMillis();
                    try {
                        Message reply = requester.request(m, timeoutMs);
                        emitReply(i, "sync", m, reply, System.currentTimeMillis() - t0);
                        ok++;
                    } catch (Exception e) {
                        Json.event("request_failed").put("i", i).put("mode", "sync").put("error", e.toString()).emit();
                        failed++;
                    }
                }
            }
            if (!"sync".equals(mode)) {
                CountDownLatch done = new CountDownLatch(count);
                int[] tally = new int[2];
                for (int i = count; i < 2 * count; i++) {
                    final int idx = i;
                    final Message m = Producers.message(o, i);
                    final long t0 = System.currentTimeMillis();
                    requester.request(m, new RequestCallback() {
                        @Override
                        public void onSuccess(Message reply) {
                            emitReply(idx, "async", m, reply, System.currentTimeMillis() - t0);
                            synchronized (tally) {
                                tally[0]++;
                            }
                            done.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            Json.event("request_failed").put("i", idx).put("mode", "async").put("error", e.toString())
                                .emit();
                            synchronized (tally) {
                                tally[1]++;
                            }
                            done.countDown();
                        }
                    }, timeoutMs);
                }
                done.await(timeoutMs + 5000, TimeUnit.MILLISECONDS);
                synchronized (tally) {
                    ok += tally[0];
                    failed += tally[1];
                }
            }
            // Every answered request was replied to: let the replier finish emitting before shutdown.
            long deadline = System.currentTimeMillis() + 10_000;
            while (answered.get() < ok && System.currentTimeMillis() < deadline) {
                Thread.sleep(20);
            }
        } finally {
            requester.shutdown();
            replier.shutdown();
            replyProducer.shutdown();
        }
        Json.event("summary").put("ok", ok).put("failed", failed).emit();
    }

    private static void emitReply(int i, String mode, Message request, Message reply, long ms) {
        Json.event("reply").put("i", i).put("mode", mode).put("request", Producers.body(request))
            .put("body", new String(reply.getBody(), StandardCharsets.UTF_8)).put("topic", reply.getTopic())
            .put("correlationId", reply.getProperty("CORRELATION_ID")).put("ms", ms).emit();
    }
}
