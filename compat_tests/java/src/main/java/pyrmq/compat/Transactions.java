package pyrmq.compat;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Transactional messages with TransactionMQProducer (the same API in 4.9.x and 5.x remoting).
 *
 * <pre>
 * transaction --topic T --count N [--local commit,rollback,unknown] [--check commit|rollback|unknown|local]
 *             [--local-wait-ms W] [--linger-ms L] [--until-checks K] [--heartbeat-ms 30000]
 * </pre>
 *
 * Message i's local transaction answers the i-th entry of --local (cycled); the last message's
 * local transaction first emits a "local" event and sleeps --local-wait-ms (the test kills the
 * broker meanwhile). Every check callback answers --check and emits a "check" event (with the
 * TRANSACTION_CHECK_TIMES the broker counted). After the sends the producer stays up to answer
 * checks for --linger-ms, or until --until-checks checks came and a second passed without one.
 */
final class Transactions {
    private Transactions() {
    }

    private static LocalTransactionState state(String name) {
        switch (name) {
            case "commit":
                return LocalTransactionState.COMMIT_MESSAGE;
            case "rollback":
                return LocalTransactionState.ROLLBACK_MESSAGE;
            case "unknown":
                return LocalTransactionState.UNKNOW;
            default:
                throw new IllegalArgumentException("unknown transaction state: " + name);
        }
    }

    static void run(Options o) throws Exception {
        int createQueues = o.integer("create-topic", 0);
        if (createQueues > 0) {
            Producers.createTopic(o, o.str("topic"), createQueues);
        }
        int count = o.integer("count", 3);
        List<String> local = o.list("local");
        if (local.isEmpty()) {
            local = List.of("commit");
        }
        final List<String> localStates = local;
        // --check local: answer what the local transaction decided (as an application would)
        final String checkMode = o.str("check", "commit");
        final LocalTransactionState checkAnswer = "local".equals(checkMode) ? null : state(checkMode);
        final Map<String, LocalTransactionState> decided = new ConcurrentHashMap<>();
        final long localWaitMs = o.millis("local-wait-ms", 0);
        final AtomicInteger checks = new AtomicInteger();

        TransactionMQProducer p = new TransactionMQProducer(o.str("producer-group", "PG_" + o.str("topic")));
        p.setNamesrvAddr(o.str("namesrv"));
        p.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-tx");
        p.setSendMsgTimeout(o.integer("send-timeout-ms", 5000));
        // --heartbeat-ms: how soon a restarted broker knows this producer again (default 30 s)
        p.setHeartbeatBrokerInterval(o.integer("heartbeat-ms", 30_000));
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                int i = (Integer) arg;
                String id = msg.getTransactionId();
                if (localWaitMs > 0 && i == count - 1) {
                    Json.event("local").put("i", i).put("body", Producers.body(msg)).put("transactionId", id).emit();
                    try {
                        Thread.sleep(localWaitMs);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                LocalTransactionState decision = state(localStates.get(i % localStates.size()));
                decided.put(id, decision);
                return decision;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checks.incrementAndGet();
                LocalTransactionState answer = checkAnswer != null ? checkAnswer
                    : decided.getOrDefault(msg.getTransactionId(), LocalTransactionState.UNKNOW);
                Json.event("check").put("body", Producers.body(msg)).put("transactionId", msg.getTransactionId())
                    .put("msgId", msg.getMsgId()).put("topic", msg.getTopic()).put("queueId", msg.getQueueId())
                    .put("checkTimes", msg.getProperty("TRANSACTION_CHECK_TIMES"))
                    .put("answer", answer.name()).emit();
                return answer;
            }
        });
        ScenarioRunner.applyTls(p, o);
        p.start();
        try {
            for (int i = 0; i < count; i++) {
                Message m = Producers.message(o, i);
                try {
                    var r = p.sendMessageInTransaction(m, i);
                    Json.event("sent").put("i", i).put("body", Producers.body(m))
                        .put("status", r.getSendStatus().name()).put("localState", r.getLocalTransactionState().name())
                        .put("msgId", r.getMsgId()).put("transactionId", r.getTransactionId())
                        .put("offsetMsgId", ((SendResult) r).getOffsetMsgId())
                        .put("queueId", r.getMessageQueue().getQueueId()).put("queueOffset", r.getQueueOffset())
                        .emit();
                } catch (Exception e) {
                    Producers.emitSendFailed(i, m, e);
                }
            }
            linger(o, checks);
        } finally {
            p.shutdown();
        }
    }

    private static void linger(Options o, AtomicInteger checks) throws InterruptedException {
        long end = System.currentTimeMillis() + o.millis("linger-ms", 0);
        int untilChecks = o.integer("until-checks", 0);
        int seen = checks.get();
        long quietSince = System.currentTimeMillis();
        while (System.currentTimeMillis() < end) {
            Thread.sleep(100);
            int now = checks.get();
            if (now != seen) {
                seen = now;
                quietSince = System.currentTimeMillis();
            }
            if (untilChecks > 0 && now >= untilChecks && System.currentTimeMillis() - quietSince >= 1000) {
                return;
            }
        }
    }
}
