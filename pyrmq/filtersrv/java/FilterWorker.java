/*
 * pyrmq's Java filter worker: runs one compiled org.apache.rocketmq.common.filter.MessageFilter
 * for a FilterServer (pyrmq/filtersrv/workers.py), inside the jail (pyrmq/filtersrv/jail.py).
 * Speaks the frames of pyrmq/filtersrv/worker_protocol.py on stdin/stdout: a 4-byte big-endian
 * length, then LOAD ('L': class name, directory of its classes) or MATCH ('M': one message);
 * every frame gets one REPLY ('Y' accepted, 'N' rejected, 'E' failed, the process CPU time in ms
 * and a reason). A filter that throws rejects that message; after an OutOfMemoryError the worker
 * answers and exits, and the FilterServer starts a fresh one.
 */

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import org.apache.rocketmq.common.filter.FilterContext;
import org.apache.rocketmq.common.filter.MessageFilter;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;

public final class FilterWorker {
    private static final int MAX_REQUEST_BYTES = 8 * 1024 * 1024;

    private FilterWorker() {
    }

    public static void main(String[] args) throws IOException {
        DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(FileDescriptor.in)));
        DataOutputStream out = new DataOutputStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out)));
        // What a filter prints must not land in the protocol stream.
        System.setOut(System.err);
        MessageFilter filter = null;
        String loadError = "no LOAD frame yet";
        while (true) {
            int length;
            try {
                length = in.readInt();
            } catch (EOFException e) {
                return;
            }
            if (length < 1 || length > MAX_REQUEST_BYTES) {
                System.err.println("filter worker: bad frame length " + length);
                System.exit(2);
            }
            byte[] payload = new byte[length];
            in.readFully(payload);
            ByteBuffer b = ByteBuffer.wrap(payload);
            byte op = b.get();
            if (op == 'L') {
                String className = str(b, b.getShort() & 0xFFFF);
                String classDir = str(b, b.getInt());
                try {
                    URLClassLoader loader = new URLClassLoader(new URL[] {new File(classDir).toURI().toURL()},
                        FilterWorker.class.getClassLoader());
                    filter = (MessageFilter) loader.loadClass(className).getDeclaredConstructor().newInstance();
                    reply(out, 'Y', "");
                } catch (Throwable t) {
                    filter = null;
                    loadError = t.toString();
                    reply(out, 'E', loadError);
                }
            } else if (op == 'M') {
                FilterContext context = new FilterContext();
                context.setConsumerGroup(str(b, b.getShort() & 0xFFFF));
                MessageExt msg = new MessageExt();
                msg.setTopic(str(b, b.getShort() & 0xFFFF));
                msg.setQueueId(b.getInt());
                msg.setQueueOffset(b.getLong());
                msg.setCommitLogOffset(b.getLong());
                msg.setSysFlag(b.getInt());
                msg.setBornTimestamp(b.getLong());
                msg.setStoreTimestamp(b.getLong());
                msg.setReconsumeTimes(b.getInt());
                msg.setFlag(b.getInt());
                MessageAccessor.setProperties(msg, MessageDecoder.string2messageProperties(str(b, b.getInt())));
                byte[] body = new byte[b.getInt()];
                b.get(body);
                msg.setBody(body);
                if (filter == null) {
                    reply(out, 'E', loadError);
                    continue;
                }
                try {
                    reply(out, filter.match(msg, context) ? 'Y' : 'N', "");
                } catch (OutOfMemoryError e) {
                    reply(out, 'E', e.toString());
                    System.exit(3);
                } catch (Throwable t) {
                    reply(out, 'E', t.toString());
                }
            } else {
                System.err.println("filter worker: unknown request " + op);
                System.exit(2);
            }
        }
    }

    private static String str(ByteBuffer b, int length) {
        byte[] bytes = new byte[length];
        b.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static long cpuMillis() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1_000_000L;
        }
        return 0L;
    }

    private static void reply(DataOutputStream out, char verdict, String detail) throws IOException {
        byte[] text = detail.getBytes(StandardCharsets.UTF_8);
        int n = Math.min(text.length, 1024);
        while (n > 0 && n < text.length && (text[n] & 0xC0) == 0x80) {
            n--;   // never cut a UTF-8 sequence
        }
        out.writeInt(1 + 8 + 2 + n);
        out.writeByte(verdict);
        out.writeLong(cpuMillis());
        out.writeShort(n);
        out.write(text, 0, n);
        out.flush();
    }
}
