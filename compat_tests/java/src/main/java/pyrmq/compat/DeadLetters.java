package pyrmq.compat;

import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Dead letters (`dlq`): one message sent to --topic; a push consumer of --group with
 * maxReconsumeTimes 1 fails it (RECONSUME_LATER) until the broker moves it to %DLQ%group; the
 * DLQ is then read as the dashboard's DLQ page does (a pull consumer over the %DLQ% topic), a
 * healthy consumer of the group takes the failing one's place and the dashboard's "resend"
 * (DefaultMQAdminExt.consumeMessageDirectly: CONSUME_MESSAGE_DIRECTLY relayed by the broker to
 * that client) hands the dead letter to it.
 *
 * Events: `sent`, `failed` (each failed delivery: topic, reconsumeTimes, body), `dlq` (each DLQ
 * message: offsetMsgId, body, RETRY_TOPIC, ORIGIN_MESSAGE_ID, reconsumeTimes), `direct` (the
 * consumeMessageDirectly result), `recv_healthy` (what the healthy consumer's listener got).
 */
final class DeadLetters {
    private DeadLetters() {
    }

    static void run(Options o) throws Exception {
        String topic = o.str("topic");
        String group = o.str("group");
        String dlq = "%DLQ%" + group;
        long deadline = System.currentTimeMillis() + o.millis("timeout-ms", 60_000);
        Producers.createTopic(o, topic, 1);

        DefaultMQPushConsumer failing = pushConsumer(o, "-failing", (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Json.event("failed").put("topic", m.getTopic()).put("reconsumeTimes", m.getReconsumeTimes())
                    .put("body", Producers.body(m)).emit();
            }
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        failing.setMaxReconsumeTimes(1);
        failing.start();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        consumers.add(failing);
        Consumers.keepHeartbeating(consumers);
        Consumers.waitBalanced(consumers, topic, 20_000);

        DefaultMQProducer producer = Producers.startProducer(o, "");
        Message m = Producers.message(o, 0);
        SendResult r = producer.send(m);
        Producers.emitSent(0, m, r);
        producer.shutdown();

        DefaultMQPullConsumer reader = new DefaultMQPullConsumer("TOOLS_CONSUMER");
        reader.setNamesrvAddr(o.str("namesrv"));
        reader.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-dlqreader");
        reader.start();
        List<MessageExt> letters = new ArrayList<>();
        while (letters.isEmpty() && System.currentTimeMillis() < deadline) {
            Thread.sleep(500);
            try {
                for (MessageQueue mq : reader.fetchSubscribeMessageQueues(dlq)) {
                    PullResult pr = reader.pull(mq, "*", 0, 32);
                    if (pr.getMsgFoundList() != null) {
                        letters.addAll(pr.getMsgFoundList());
                    }
                }
            } catch (Exception e) {
                // no route for the %DLQ% topic yet: the message has not been dead-lettered
            }
        }
        reader.shutdown();
        // The letter is readable once the broker stored it, but the failing consumer moves its
        // retry-queue offset only when the send-back's answer reaches it: shut down before that,
        // it would persist the old offset and the healthy consumer would get the retry message.
        while (!letters.isEmpty() && System.currentTimeMillis() < deadline && !retryQueueDone(failing, group)) {
            Thread.sleep(50);
        }
        failing.shutdown();
        for (MessageExt d : letters) {
            Json.event("dlq").put("topic", d.getTopic()).put("offsetMsgId", offsetMsgId(d))
                .put("body", Producers.body(d)).put("retryTopic", d.getProperty("RETRY_TOPIC"))
                .put("originMsgId", d.getProperty("ORIGIN_MESSAGE_ID")).put("uniqKey", d.getProperty("UNIQ_KEY"))
                .put("reconsumeTimes", d.getReconsumeTimes()).emit();
        }
        if (letters.isEmpty()) {
            Json.event("summary").put("dlq", 0).emit();
            return;
        }

        DefaultMQPushConsumer healthy = pushConsumer(o, "-healthy", (msgs, ctx) -> {
            for (MessageExt x : msgs) {
                Json.event("recv_healthy").put("topic", x.getTopic()).put("body", Producers.body(x)).emit();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        healthy.start();
        consumers.clear();
        consumers.add(healthy);
        Consumers.waitBalanced(consumers, topic, 20_000);
        DefaultMQAdminExt admin = Groups.startAdmin(o, "");
        try {
            var result = admin.consumeMessageDirectly(group, healthy.buildMQClientId(), dlq,
                offsetMsgId(letters.get(0)));
            Json.event("direct").put("consumeResult", String.valueOf(result.getConsumeResult()))
                .put("order", result.isOrder()).emit();
        } catch (Exception e) {
            Json.event("direct").put("error", e.toString()).emit();
        } finally {
            admin.shutdown();
            healthy.shutdown();
        }
        Json.event("summary").put("dlq", letters.size()).emit();
    }

    /** Whether the consumer's offset of its retry queue is past the one retry message in it. */
    private static boolean retryQueueDone(DefaultMQPushConsumer c, String group) {
        var impl = c.getDefaultMQPushConsumerImpl();
        for (MessageQueue mq : impl.getRebalanceImpl().getProcessQueueTable().keySet()) {
            if (mq.getTopic().equals("%RETRY%" + group)
                && impl.getOffsetStore().readOffset(mq, ReadOffsetType.READ_FROM_MEMORY) >= 1) {
                return true;
            }
        }
        return false;
    }

    /** The offset msgId (store host + commit log offset); a pulled message's getMsgId() is its UNIQ_KEY. */
    private static String offsetMsgId(MessageExt m) {
        return m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : m.getMsgId();
    }

    private static DefaultMQPushConsumer pushConsumer(Options o, String suffix, MessageListenerConcurrently l)
        throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(o.str("group"));
        c.setNamesrvAddr(o.str("namesrv"));
        c.setInstanceName(ScenarioRunner.INSTANCE_BASE + suffix);
        c.subscribe(o.str("topic"), "*");
        c.registerMessageListener(l);
        return c;
    }
}
