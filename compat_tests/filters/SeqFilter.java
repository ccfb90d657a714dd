package pyrmq.compat.filters;

import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.common.filter.FilterContext;
import org.apache.rocketmq.common.filter.MessageFilter;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Uploaded by the class-filter scenario (compat_tests/test_class_filter.py) to a pyrmq
 * FilterServer: accepts the messages with an even "seq" property, except that seq 4 loops
 * forever and seq 6 allocates without bound -- both must be stopped and rejected alone.
 */
public class SeqFilter implements MessageFilter {
    @Override
    public boolean match(MessageExt msg, FilterContext context) {
        int seq = Integer.parseInt(msg.getUserProperty("seq"));
        if (seq == 4) {
            long spins = 0;
            while (spins >= 0) {
                spins++;
            }
        }
        if (seq == 6) {
            List<long[]> hoard = new ArrayList<>();
            while (true) {
                hoard.add(new long[1 << 20]);
            }
        }
        return seq % 2 == 0;
    }
}
