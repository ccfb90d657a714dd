package pyrmq.compat;

import java.io.PrintWriter;
import java.io.StringWriter;
import org.apache.rocketmq.client.ClientConfig;

/**
 * Drives the official RocketMQ Java client through one scenario and reports every message sent
 * or received as a JSON line on stdout (see {@link Json}); pytest makes the assertions.
 *
 * <pre>
 * java -cp ... pyrmq.compat.ScenarioRunner SCENARIO --namesrv 127.0.0.1:9876 --topic T ...
 *
 * produce       --mode sync|async|oneway|batch --count N [--tags A,B,C] [--batch-size K] [--delay-level L]
 *               [--interval-ms 0] [--stop-after-failures F] [--retries 2]
 *               [--timer-delay-ms D [--timer-api delay|deliver|mixed] [--timer-align-ms A]] (5.x timers)
 * consume       push consumer(s): --group G --count N [--consumers K] [--tag-expr '*']
 *               [--sql-expr EXPR] (MessageSelector.bySql instead of the tag expression)
 *               [--wait-balanced 0|1] [--produce M] [--idle-ms 1000] [--timeout-ms 30000]
 *               [--client-rebalance 0] (5.x: queues from the broker, QUERY_ASSIGNMENT)
 *               [--filter-class FQCN --filter-source FILE] (class filter: subscribe(topic, class, source),
 *               pulls go to a FilterServer) [--heartbeat-ms 30000]
 * litepull      DefaultLitePullConsumer: --group G --count N [--tag-expr] [--idle-ms] [--timeout-ms]
 * pull          DefaultMQPullConsumer, every queue from offset 0 to the end: --group G [--tag-expr]
 * longpoll      one push consumer waits, then --attempts A single sends, each after --idle-ms
 * dlq           a group's message dead-lettered, read from %DLQ%group, consumeMessageDirectly (DeadLetters)
 * create-topic  --queues Q (UPDATE_AND_CREATE_TOPIC via the TBW102 route, then wait for the route)
 * orderly       MessageQueueSelector by key + MessageListenerOrderly, a second consumer joins (Ordered)
 * broadcast     BROADCASTING consumers, client-side offsets (Groups)
 * churn         clustering consumers join and leave while a producer sends (Groups)
 * fromwhere     new groups from first / timestamp / last (Offsets)
 * reset         resetOffsetByTimestamp online, updateConsumeOffset offline (Offsets)
 * props         many user properties (Bodies)
 * bigbody       maximum-size random bodies, digests reported (Bodies)
 * admin         DefaultMQAdminExt basics (Admin)
 * dashboard     rocketmq-dashboard's MQAdminExt calls, each answer as fastjson writes it (Dashboard)
 * mqadmin       mqadmin command lines from --commands FILE in this one JVM (MqAdmin)
 * acl           --op produce|consume|pull|create-topic signed with --access-key/--secret-key (Acl)
 * chaos-produce orderly sends by key for --duration-ms, retried until acknowledged (Chaos)
 * transaction   TransactionMQProducer: local and check answers, a kill between half and commit (Transactions)
 * chaos-consume push consumers of one group until --duration-ms and --idle-ms passed (Chaos)
 * request       request/reply: a replying push consumer, DefaultMQProducer.request() sync and async
 *               --group G --count N [--mode sync|async|both] (Requests)
 *
 * Common: --create-topic Q (create the topic first), --body-prefix P (default: the topic),
 *         --sql-props 1 (produced message i carries a = i % 10, absent when that is 9, and s = "s" + i % 3),
 *         --deadline-ms D (hard stop of the JVM, default 120000), --body-size S (pad bodies to
 *         S bytes, compressible), --latency-fault 1 (sendLatencyFaultEnable),
 *         --use-tls 1 (ClientConfig.setUseTLS(true) on the producer and the push consumers of
 *         produce / consume; the JVM-wide way is -Dtls.enable=true, trust via -Dtls.client.*),
 *         --poll-namesrv-ms M (pollNameServerInterval of producers and push consumers, default
 *         30000: how soon a client sees a master leave or return). Sync sends of produce report
 *         their round trip as "rtMs".
 * </pre>
 *
 * Only API present in both rocketmq-client 4.9.8 and 5.3.x (and rocketmq-tools of the same
 * version) is used here; types whose package moved in 5.x are bridged in {@link Compat}.
 */
public final class ScenarioRunner {
    static final String AUTO_CREATE_TOPIC_KEY = "TBW102";
    static final String INSTANCE_BASE = "compat" + ProcessHandle.current().pid();

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
                    Producers.produce(o);
                    break;
                case "consume":
                    Consumers.consume(o);
                    break;
                case "litepull":
                    Consumers.litePull(o);
                    break;
                case "pull":
                    Consumers.pull(o);
                    break;
                case "longpoll":
                    Consumers.longPoll(o);
                    break;
                case "orderly":
                    Ordered.run(o);
                    break;
                case "broadcast":
                    Groups.broadcast(o);
                    break;
                case "churn":
                    Groups.churn(o);
                    break;
                case "fromwhere":
                    Offsets.fromWhere(o);
                    break;
                case "reset":
                    Offsets.reset(o);
                    break;
                case "props":
                    Bodies.props(o);
                    break;
                case "bigbody":
                    Bodies.bigBody(o);
                    break;
                case "admin":
                    Admin.run(o);
                    break;
                case "dashboard":
                    Dashboard.run(o);
                    break;
                case "mqadmin":
                    MqAdmin.run(o);
                    break;
                case "acl":
                    Acl.run(o);
                    break;
                case "chaos-produce":
                    Chaos.produce(o);
                    break;
                case "chaos-consume":
                    Chaos.consume(o);
                    break;
                case "transaction":
                    Transactions.run(o);
                    break;
                case "request":
                    Requests.run(o);
                    break;
                case "dlq":
                    DeadLetters.run(o);
                    break;
                case "create-topic":
                    Producers.createTopic(o, o.str("topic"), o.integer("queues", 4));
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

    /** --use-tls 1: this client speaks TLS to the NameServer and the brokers, as the API sets it. */
    static void applyTls(ClientConfig client, Options o) {
        if (o.integer("use-tls", 0) != 0) {
            client.setUseTLS(true);
        }
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
}
