"""ExpressionMessageFilter reads only the properties its expression names: the answer must be
the one a full parse of the properties string gives."""

from hypothesis import given
from hypothesis import strategies as st

from pyrmq.broker.consumer_filter import build_filter_data
from pyrmq.broker.pull_processor import ExpressionMessageFilter
from pyrmq.codec.message import string_to_properties
from pyrmq.filter import compile_expression

NAMES = st.sampled_from(["a", "xa", "ax", "b", "TAGS", "s"])
VALUES = st.sampled_from(["", "3", "4", "x", "s1", "3.0", "a"])
PAIRS = st.lists(st.tuples(NAMES, VALUES), max_size=8)
EXPRESSIONS = ["a = 3", "a > 2 AND s = 's1'", "b IS NULL OR xa = 'a'", "a IN ('3', 'x') OR TAGS = 'x' OR s = 'a' OR b = 4",
               "a = 3 OR b = 3 OR xa = 3 OR ax = 3 OR s = 3"]   # the last names five: the full parse


@given(PAIRS, st.sampled_from(EXPRESSIONS))
def test_lookup_agrees_with_a_full_parse(pairs, text):
    properties = "".join(f"{n}\x01{v}\x02" for n, v in pairs)
    message_filter = ExpressionMessageFilter(build_filter_data("T", "g", text, "SQL92", 0))
    assert message_filter.is_matched_by_properties(properties) == \
        compile_expression(text).matches(string_to_properties(properties))
