package pyrmq.compat.filters;

import org.apache.rocketmq.common.filter.FilterContext;
import org.apache.rocketmq.common.filter.MessageFilter;
import org.apache.rocketmq.common.message.MessageExt;

/** Accepts the messages with an even "seq" property (bench/class_filter_consume.py). */
public class EvenSeq implements MessageFilter {
    @Override
    public boolean match(MessageExt msg, FilterContext context) {
        return Integer.parseInt(msg.getUserProperty("seq")) % 2 == 0;
    }
}
