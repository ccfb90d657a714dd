package pyrmq.compat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * ACL 1.0: every client of this scenario signs its requests with AclClientRPCHook
 * (--access-key, --secret-key) and does one thing (--op); a refusal is reported with the code and
 * remark the broker answered.
 *
 * <pre>
 * acl --op produce       --count N: sync sends of `topic-i`; stops at the first refusal
 * acl --op consume       --group G --count N: push consumer from the first offset, up to --timeout-ms
 * acl --op pull          --group G: DefaultMQPullConsumer, one pull from offset 0 of each queue
 * acl --op create-topic  --broker-addr A: DefaultMQAdminExt.createAndUpdateTopicConfig (4 queues)
 * acl --op query         --key K: DefaultMQAdminExt.queryMessage (QUERY_MESSAGE, signed with its
 *                        _UNIQUE_KEY_QUERY field); the admin logs a refusal and finds nothing
 * </pre>
 *
 * Events: sent, recv, pull (queueId, status, found), created, query (found), refused (op, code,
 * remark, error).
 */
final class Acl {
    private Acl() {
    }

    static void run(Options o) throws Exception {
        RPCHook hook = new AclClientRPCHook(new SessionCredentials(o.str("access-key"), o.str("secret-key")));
        String op = o.str("op");
        try {
            switch (op) {
                case "produce":
                    produce(o, hook);
                    break;
                case "consume":
                    consume(o, hook);
                    break;
                case "pull":
                    pull(o, hook);
                    break;
                case "create-topic":
                    createTopic(o, hook);
                    break;
                case "query":
                    query(o, hook);
                    break;
                default:
                    throw new IllegalArgumentException("unknown --op " + op);
            }
        } catch (MQClientException | MQBrokerException e) {
            refused(op, e);
        }
    }

    /** The broker's answer inside a client exception: the producer wraps it in MQClientException. */
    static void refused(String op, Exception e) {
        int code = -1;
        String remark = null;
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof MQBrokerException) {
                code = ((MQBrokerException) t).getResponseCode();
                remark = ((MQBrokerException) t).getErrorMessage();
                break;
            }
            if (t instanceof MQClientException && ((MQClientException) t).getResponseCode() > 0) {
                code = ((MQClientException) t).getResponseCode();
                remark = ((MQClientException) t).getErrorMessage();
            }
        }
        Json.event("refused").put("op", op).put("code", code).put("remark", remark).put("error", e.toString()).emit();
    }

    private static void produce(Options o, RPCHook hook) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("PG_" + o.str("topic"), hook);
        p.setNamesrvAddr(o.str("namesrv"));
        p.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-acl-p");
        p.setSendMsgTimeout(5000);
        p.start();
        try {
            for (int i = 0; i < o.integer("count", 1); i++) {
                Message m = Producers.message(o, i);
                SendResult r = p.send(m);
                Producers.emitSent(i, m, r);
            }
        } finally {
            p.shutdown();
        }
    }

    private static void consume(Options o, RPCHook hook) throws Exception {
        int count = o.integer("count", 1);
        ConcurrentLinkedQueue<MessageExt> got = new ConcurrentLinkedQueue<>();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(o.str("group"), hook, new AllocateMessageQueueAveragely());
        c.setNamesrvAddr(o.str("namesrv"));
        c.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-acl-c");
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(o.str("topic"), "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            got.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        // The client's own heartbeat after a rebalance can be skipped (see keepHeartbeating).
        Consumers.keepHeartbeating(List.of(c));
        long deadline = System.currentTimeMillis() + o.millis("timeout-ms", 30_000);
        while (got.size() < count && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        c.shutdown();
        for (MessageExt m : got) {
            Json.event("recv").put("body", new String(m.getBody(), StandardCharsets.UTF_8))
                .put("queueId", m.getQueueId()).put("queueOffset", m.getQueueOffset()).emit();
        }
        Json.event("summary").put("received", got.size()).emit();
    }

    private static void pull(Options o, RPCHook hook) throws Exception {
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(o.str("group"), hook);
        c.setNamesrvAddr(o.str("namesrv"));
        c.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-acl-pull");
        c.start();
        try {
            Set<MessageQueue> queues = c.fetchSubscribeMessageQueues(o.str("topic"));
            List<MessageQueue> sorted = new ArrayList<>(queues);
            sorted.sort((a, b) -> Integer.compare(a.getQueueId(), b.getQueueId()));
            for (MessageQueue mq : sorted) {
                PullResult r = c.pull(mq, "*", 0, 32);
                Json.event("pull").put("queueId", mq.getQueueId()).put("status", r.getPullStatus().name())
                    .put("found", r.getMsgFoundList() == null ? 0 : r.getMsgFoundList().size()).emit();
            }
        } finally {
            c.shutdown();
        }
    }

    private static void query(Options o, RPCHook hook) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt(hook);
        admin.setNamesrvAddr(o.str("namesrv"));
        admin.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-acl-query");
        admin.start();
        int found = 0;
        try {
            found = admin.queryMessage(o.str("topic"), o.str("key"), 32, 0, Long.MAX_VALUE).getMessageList().size();
        } catch (MQClientException e) {
            // "query message by key finished, but no message.": every broker answered nothing usable
        } finally {
            admin.shutdown();
        }
        Json.event("query").put("found", found).emit();
    }

    private static void createTopic(Options o, RPCHook hook) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt(hook);
        admin.setNamesrvAddr(o.str("namesrv"));
        admin.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-acl-admin");
        admin.start();
        try {
            admin.createAndUpdateTopicConfig(o.str("broker-addr"), new TopicConfig(o.str("topic"), 4, 4, 6));
            Json.event("created").put("topic", o.str("topic")).emit();
        } finally {
            admin.shutdown();
        }
    }
}
