package pyrmq.compat;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Set;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The few client types whose package differs between rocketmq-client 4.9.8
 * (org.apache.rocketmq.common.protocol...) and 5.x (org.apache.rocketmq.remoting.protocol...),
 * reached by reflection so that one source tree compiles against both. Types that only appear
 * as return values are not named at all (`var`), which needs no bridge.
 */
final class Compat {
    private Compat() {
    }

    private static Class<?> either(String... names) throws ClassNotFoundException {
        for (String n : names) {
            try {
                return Class.forName(n);
            } catch (ClassNotFoundException e) {
                // try the next package
            }
        }
        throw new ClassNotFoundException(String.join(" / ", names));
    }

    private static Object call(Object target, Method m, Object... args) throws Exception {
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw (Exception) e.getCause();
        }
    }

    /**
     * DefaultMQAdminExt.deleteTopicInNameServer: 5.x has (addrs, topic) and (addrs, clusterName,
     * topic); 4.9.8 only (addrs, topic, clusterName) -- the same three types, the other order.
     */
    static void deleteTopicInNameServer(Object admin, Set<String> addrs, String topic, String clusterName)
        throws Exception {
        try {
            Method m = admin.getClass().getMethod("deleteTopicInNameServer", Set.class, String.class);
            call(admin, m, addrs, topic);
        } catch (NoSuchMethodException e) {
            Method m = admin.getClass().getMethod("deleteTopicInNameServer", Set.class, String.class, String.class);
            call(admin, m, addrs, topic, clusterName);
        }
    }

    /**
     * DefaultMQPushConsumer.setClientRebalance(enabled): 5.x only. With false the consumer asks a
     * broker for its queues (QUERY_ASSIGNMENT) instead of allocating them itself.
     */
    static void setClientRebalance(DefaultMQPushConsumer c, boolean enabled) throws Exception {
        Method m;
        try {
            m = DefaultMQPushConsumer.class.getMethod("setClientRebalance", boolean.class);
        } catch (NoSuchMethodException e) {
            throw new IllegalArgumentException("--client-rebalance needs rocketmq-client 5.x", e);
        }
        call(c, m, enabled);
    }

    /** DefaultMQPushConsumer.setMessageModel(MessageModel.valueOf(name)). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void setMessageModel(DefaultMQPushConsumer c, String name) throws Exception {
        for (Method m : DefaultMQPushConsumer.class.getMethods()) {
            if (m.getName().equals("setMessageModel") && m.getParameterCount() == 1) {
                Class enumType = m.getParameterTypes()[0];
                call(c, m, Enum.valueOf(enumType, name));
                return;
            }
        }
        throw new NoSuchMethodException("DefaultMQPushConsumer.setMessageModel");
    }

    private static Object batchBody(String simpleName, String group, String clientId, Set<MessageQueue> mqs)
        throws Exception {
        Class<?> type = either("org.apache.rocketmq.common.protocol.body." + simpleName,
            "org.apache.rocketmq.remoting.protocol.body." + simpleName);
        Object body = type.getConstructor().newInstance();
        type.getMethod("setConsumerGroup", String.class).invoke(body, group);
        type.getMethod("setClientId", String.class).invoke(body, clientId);
        type.getMethod("setMqSet", Set.class).invoke(body, mqs);
        return body;
    }

    /** LOCK_BATCH_MQ for `clientId` (any id: the broker keys locks by the id in the body). */
    @SuppressWarnings("unchecked")
    static Set<MessageQueue> lockBatch(MQClientAPIImpl api, String addr, String group, String clientId,
        Set<MessageQueue> mqs) throws Exception {
        Object body = batchBody("LockBatchRequestBody", group, clientId, mqs);
        Method m = MQClientAPIImpl.class.getMethod("lockBatchMQ", String.class, body.getClass(), long.class);
        return (Set<MessageQueue>) call(api, m, addr, body, 5000L);
    }

    /** UNLOCK_BATCH_MQ (sync) for `clientId`. */
    static void unlockBatch(MQClientAPIImpl api, String addr, String group, String clientId, Set<MessageQueue> mqs)
        throws Exception {
        Object body = batchBody("UnlockBatchRequestBody", group, clientId, mqs);
        Method m = MQClientAPIImpl.class.getMethod("unlockBatchMQ", String.class, body.getClass(), long.class,
            boolean.class);
        call(api, m, addr, body, 5000L, false);
    }
}
