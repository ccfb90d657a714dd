package pyrmq.compat;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.Permission;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs many mqadmin command lines in one JVM (the `mqadmin` scenario), so that a comparison of
 * some fifty subcommands costs one JVM start per broker and not fifty:
 *
 * <pre>
 * mqadmin --namesrv ADDR --broker ADDR --commands FILE [--access-key AK --secret-key SK]
 * </pre>
 *
 * With --access-key, every command is signed as that ACL account (the tools.yml mqadmin reads).
 *
 * FILE has one step per line, its words separated by tabs. A line is either an mqadmin command
 * line (`topicRoute -t T`; `-n ADDR` is appended) run through MQAdminStartup.main0 exactly as
 * the mqadmin script runs it, or an action of the scenario:
 *
 * <pre>
 * &#64;produce GROUP TOPIC COUNT TAGS   a producer (kept online) sends COUNT messages, message i
 *                                   to queue i % queues, tag TAGS[i % n], key k-i, body TOPIC-i
 * &#64;consume GROUP TOPIC COUNT        a push consumer (kept online) receives COUNT messages and
 *                                   commits its offsets
 * &#64;sleep MS
 * </pre>
 *
 * Words of an mqadmin line may name values of this run: {namesrv}, {broker},
 * {msgId:i} / {offsetMsgId:i} (message i of the @produce steps). Each command's stdout and
 * stderr are captured apart and printed as one `mqadmin` event; each sent message is a `sent`
 * event, so pytest can replace this run's ids by names before comparing two brokers. mqadmin
 * calls System.exit on a bad command line: a security manager turns that into an exception.
 */
final class MqAdmin {
    private static final PrintStream REAL_ERR = System.err;

    private MqAdmin() {
    }

    static void run(Options o) throws Exception {
        String namesrv = o.str("namesrv");
        Map<String, String> values = new TreeMap<>();
        values.put("namesrv", namesrv);
        values.put("broker", o.str("broker"));
        prepareHome(o);
        guardExit();
        if (MQVersion.CURRENT_VERSION >= MQVersion.Version.V5_0_0.ordinal()) {   // the 4.x tools do not wait
            startShutdownNudger(Thread.currentThread());
        }
        int sent = 0;
        int step = 0;
        try {
            for (String line : Files.readAllLines(Paths.get(o.str("commands")), StandardCharsets.UTF_8)) {
                if (line.isBlank()) {
                    continue;
                }
                String[] words = line.split("\t");
                switch (words[0]) {
                    case "@produce":
                        sent = produce(namesrv, words, values, sent);
                        break;
                    case "@consume":
                        consume(namesrv, words);
                        break;
                    case "@sleep":
                        Thread.sleep(Long.parseLong(words[1]));
                        break;
                    default:
                        command(step++, words, values, namesrv);
                }
            }
        } finally {
            // The producer and consumer stay up: the runner halts the JVM (a clean shutdown waits
            // some 10 s for the consumer's long poll), and the guard would refuse that halt.
            unguardExit();
        }
    }

    /** A ROCKETMQ_HOME of our own with the logback_tools.xml mqadmin loads (its log to a file) and
     *  the tools.yml it signs with. */
    private static void prepareHome(Options o) throws IOException {
        Path home = Files.createTempDirectory("mqadmin-home");
        Files.createDirectories(home.resolve("conf"));
        String accessKey = o.str("access-key", null);
        if (accessKey != null) {
            String yml = "accessKey: " + accessKey + "\nsecretKey: " + o.str("secret-key") + "\n";
            Files.write(home.resolve("conf").resolve("tools.yml"), yml.getBytes(StandardCharsets.UTF_8));
        }
        String xml = "<configuration><appender name=\"F\" class=\"ch.qos.logback.core.FileAppender\">"
            + "<file>" + home.resolve("tools.log") + "</file><encoder><pattern>%d %p %c - %m%n</pattern></encoder>"
            + "</appender><root level=\"INFO\"><appender-ref ref=\"F\"/></root></configuration>";
        Files.write(home.resolve("conf").resolve("logback_tools.xml"), xml.getBytes(StandardCharsets.UTF_8));
        System.setProperty("rocketmq.home.dir", home.toString());
    }

    /**
     * The 5.x tools' admin client stops its NettyEventExecutor without interrupting it, and that
     * thread polls its event queue 3 s at a time: about one command in four then waits up to 3 s
     * in ServiceThread.shutdown (a minute over the scenario). While the main thread waits there,
     * the executors are interrupted: a stopped one ends at once, a running one (the scenario's
     * producer and consumer) logs the interrupt and polls on. The output is not touched.
     */
    private static void startShutdownNudger(Thread main) {
        Thread nudger = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    return;
                }
                if (main.getState() != Thread.State.TIMED_WAITING || !inServiceThreadShutdown(main)) {
                    continue;
                }
                for (Thread t : Thread.getAllStackTraces().keySet()) {
                    if (t.getName().equals("NettyEventExecutor")) {
                        t.interrupt();
                    }
                }
            }
        }, "mqadmin-shutdown-nudger");
        nudger.setDaemon(true);
        nudger.start();
    }

    private static boolean inServiceThreadShutdown(Thread main) {
        for (StackTraceElement frame : main.getStackTrace()) {
            if (frame.getClassName().endsWith(".ServiceThread") && frame.getMethodName().equals("shutdown")) {
                return true;
            }
        }
        return false;
    }

    /** ServerUtil.parseCmdLine exits the JVM on a bad command line; make that an exception. */
    @SuppressWarnings("removal")
    private static void guardExit() {
        System.setSecurityManager(new SecurityManager() {
            @Override
            public void checkExit(int status) {
                throw new SecurityException("System.exit(" + status + ")");
            }

            @Override
            public void checkPermission(Permission perm) {
            }

            @Override
            public void checkPermission(Permission perm, Object context) {
            }
        });
    }

    @SuppressWarnings("removal")
    private static void unguardExit() {
        System.setSecurityManager(null);
    }

    private static void command(int step, String[] words, Map<String, String> values, String namesrv) {
        List<String> args = new ArrayList<>();
        for (String w : words) {
            args.add(substitute(w, values));
        }
        args.add("-n");
        args.add(namesrv);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream saved = System.out;
        String thrown = null;
        long t0 = System.currentTimeMillis();
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        try {
            MQAdminStartup.main0(args.toArray(new String[0]), null);
        } catch (Throwable t) {
            thrown = t.toString();
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(saved);
            System.setErr(REAL_ERR);
        }
        Json.event("mqadmin").put("step", step).put("args", args.subList(0, args.size() - 2))
            .put("out", out.toString(StandardCharsets.UTF_8)).put("err", err.toString(StandardCharsets.UTF_8))
            .put("thrown", thrown).put("ms", System.currentTimeMillis() - t0).emit();
    }

    private static String substitute(String word, Map<String, String> values) {
        String w = word;
        for (Map.Entry<String, String> e : values.entrySet()) {
            w = w.replace("{" + e.getKey() + "}", e.getValue());
        }
        if (w.contains("{")) {
            throw new IllegalArgumentException("unknown value in " + word);
        }
        return w;
    }

    private static int produce(String namesrv, String[] words, Map<String, String> values, int first)
        throws Exception {
        String topic = words[2];
        int count = Integer.parseInt(words[3]);
        List<String> tags = Arrays.asList(words[4].split(","));
        DefaultMQProducer p = new DefaultMQProducer(words[1]);
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-mqadmin-" + words[1]);
        p.start();
        // A fixed queue per message: the default selector starts at a random queue, and the
        // outputs of the two brokers could not be compared line by line.
        MessageQueueSelector byIndex = (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size());
        for (int k = 0; k < count; k++) {
            int i = first + k;
            Message m = new Message(topic, tags.get(i % tags.size()), "k-" + i,
                (topic + "-" + i).getBytes(StandardCharsets.UTF_8));
            SendResult r = p.send(m, byIndex, i);
            values.put("msgId:" + i, r.getMsgId());
            values.put("offsetMsgId:" + i, r.getOffsetMsgId());
            Json.event("sent").put("i", i).put("msgId", r.getMsgId()).put("offsetMsgId", r.getOffsetMsgId())
                .put("queueId", r.getMessageQueue().getQueueId()).put("queueOffset", r.getQueueOffset())
                .put("status", r.getSendStatus().name()).emit();
        }
        // The broker knows a producer group from its heartbeats only: the client's first one goes
        // out 1 s after start and finds a broker only if the sends learned the route by then, the
        // next 30 s later. One now, so producerConnection / producer see the group on both kinds.
        p.getDefaultMQProducerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock();
        return first + count;
    }

    private static void consume(String namesrv, String[] words) throws Exception {
        int count = Integer.parseInt(words[3]);
        AtomicInteger received = new AtomicInteger();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(words[1]);
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(ScenarioRunner.INSTANCE_BASE + "-mqadmin-" + words[1]);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(words[2], "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            received.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        long deadline = System.currentTimeMillis() + 30_000;
        while (received.get() < count) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("consumed " + received.get() + " of " + count);
            }
            Thread.sleep(20);
        }
        // Commit once the retry topic's queue is assigned too, so that its offset is committed
        // (and shown by consumerProgress) on every run; the listener has returned by then.
        String retry = "%RETRY%" + words[1];
        while (c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet().stream()
            .noneMatch(mq -> mq.getTopic().equals(retry))) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("the consumer never got a queue of " + retry);
            }
            Thread.sleep(20);
        }
        Thread.sleep(300);
        c.getDefaultMQPushConsumerImpl().persistConsumerOffset();
        Json.event("consumed").put("group", words[1]).put("count", received.get()).emit();
    }
}
