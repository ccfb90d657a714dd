"""The SQL92 selector language against Apache's semantics (spec filter.md section 3.2-3.3):
tables of (expression, properties, three-valued result), of texts Apache refuses, and the
limits that keep hostile input from recursing the interpreter to death."""

import pytest

from pyrmq.filter import (MAX_EXPRESSION_CHARS, MAX_NESTING_DEPTH, FilterEvaluationError, FilterParseError, compile_cache_info,
                          compile_expression)
from pyrmq.filter.values import JLong, parse_double

SPEC = {"a": "10", "b": "abc"}
ERROR = "error"   # evaluation throws (Java) => not matched

# (expression, properties, expected evaluate() result or ERROR)
CASES = [
    # the spec's examples (filter.md section 3.3)
    ("a > 5", SPEC, True),
    ("a = 10", SPEC, True),
    ("a = '10'", SPEC, True),
    ("b > 5", SPEC, ERROR),
    ("c IS NULL", SPEC, True),
    ("c = 1", SPEC, None),
    ("b IN ('abc','x')", SPEC, True),
    ("TAGS = 'TagA'", {"TAGS": "TagA"}, True),
    ("TAGS = 'TagA'", {"TAGS": "TagB"}, False),
    # three-valued logic
    ("c = 1 AND a = 10", SPEC, None),
    ("c = 1 AND a = 11", SPEC, False),
    ("c = 1 OR a = 10", SPEC, True),
    ("c = 1 OR a = 11", SPEC, None),
    ("NOT c = 1", SPEC, None),   # NOT binds to the operand: (NOT c) = 1 -> NULL left
    ("NOT (c = 1)", SPEC, None),
    ("1 = c", SPEC, False),      # Java quirk: a NULL right side alone is FALSE
    ("NOT (1 = c)", SPEC, True),
    ("c = d", SPEC, True),       # two missing properties are equal
    ("c <> 1", SPEC, None),
    ("a <> 10", SPEC, False),
    ("a <> 11", SPEC, True),
    ("a IS NOT NULL", SPEC, True),
    ("c IS NOT NULL", SPEC, False),
    ("TRUE", {}, True),
    ("FALSE", {}, False),
    ("NULL", {}, None),
    ("a", SPEC, False),          # a property as a condition: only a Boolean TRUE would do
    ("c", SPEC, None),
    ("NOT a", SPEC, True),
    # short circuit: the erroring side is never evaluated
    ("a = 10 OR b > 5", SPEC, True),
    ("a = 11 AND b > 5", SPEC, False),
    ("b > 5 OR a = 10", SPEC, ERROR),
    # coercion: the string is parsed to the literal's type
    ("a = 10.0", SPEC, True),
    ("a > 9.5", SPEC, True),
    ("a > 5", {"a": "10.5"}, ERROR),      # Integer.valueOf("10.5") fails
    ("a > 5.0", {"a": "10.5"}, True),
    ("a > 5", {"a": " 10"}, ERROR),       # Integer.valueOf does not trim
    ("a > 5.0", {"a": " 10 "}, True),     # Double.valueOf does
    ("a = 3000000000", {"a": "3000000000"}, True),   # Long literal, Long.valueOf
    ("a = 5", {"a": "3000000000"}, ERROR),
    ("a = 5L", {"a": "5"}, True),
    ("3000000000 < 3.5e9", {}, ERROR),    # Long meets Double: Java's ClassCastException
    ("3.5e9 > 3000000000", {}, True),
    ("5 < 5.5", {}, True),
    ("a = TRUE", {"a": "true"}, True),
    ("a = TRUE", {"a": "TRUE"}, True),
    ("a = TRUE", {"a": "yes"}, False),
    ("a = FALSE", {"a": "yes"}, True),
    ("TRUE = a", {"a": "true"}, ERROR),   # Boolean on the left of a String: ClassCastException
    ("a = 'abc'", {"a": "abc"}, True),
    ("a = 'ABC'", {"a": "abc"}, False),
    ("a > b", {"a": "2", "b": "10"}, False),  # two strings compare as numbers, never as text
    ("a > b", {"a": "x", "b": "10"}, ERROR),
    ("a >= 10 AND a <= 10", SPEC, True),
    ("a < 10", SPEC, False),
    ("a = 1e1", SPEC, True),
    ("a = NaN", {"a": "NaN", "NaN": "NaN"}, True),
    ("a > 0.5", {"a": "NaN"}, True),      # Double.compare puts NaN above everything
    ("a > 1", {"a": "+5"}, True),
    ("-a < 0", SPEC, None),               # negating a String gives NULL
    ("-5 < a", SPEC, True),
    ("- -5 = 5", {}, True),
    ("+5 = 5", {}, True),
    ("-2147483648 = a", {"a": "-2147483648"}, True),
    # BETWEEN / IN
    ("a BETWEEN 1 AND 20", SPEC, True),
    ("a BETWEEN 11 AND 20", SPEC, False),
    ("a NOT BETWEEN 1 AND 20", SPEC, False),
    ("a NOT BETWEEN 11 AND 20", SPEC, True),
    ("c BETWEEN 1 AND 20", SPEC, None),
    ("a BETWEEN 5 AND -1", SPEC, False),  # a non-constant bound is not checked at compile time
    ("b NOT IN ('abc','x')", SPEC, False),
    ("b NOT IN ('y')", SPEC, True),
    ("c IN ('y')", SPEC, None),
    ("c NOT IN ('y')", SPEC, None),
    ("b IN ('a','b','c','d','e','abc')", SPEC, True),
    ("b IN ('it''s')", {"b": "it's"}, True),
    # CONTAINS / STARTSWITH / ENDSWITH (Apache 5.1.3+)
    ("b CONTAINS 'bc'", SPEC, True),
    ("b NOT CONTAINS 'bc'", SPEC, False),
    ("b STARTSWITH 'ab'", SPEC, True),
    ("b ENDSWITH 'ab'", SPEC, False),
    ("b NOT ENDSWITH 'ab'", SPEC, True),
    ("c NOT CONTAINS 'x'", SPEC, False),  # NULL is FALSE even for the NOT forms
    ("b CONTAINS ''", SPEC, False),
    # case-insensitive keywords, case-sensitive names, comments
    ("a between 1 and 20 And b iS nOt NuLl", SPEC, True),
    ("A = 10", SPEC, None),
    ("a = 10 -- trailing comment\n", SPEC, True),
    ("/* lead */ a /* mid */ = 10", SPEC, True),
    ("a\n=\r\n10", SPEC, True),
    ("$x_1 = 'v'", {"$x_1": "v"}, True),
]


@pytest.mark.parametrize("text,properties,expected", CASES, ids=[c[0] for c in CASES])
def test_evaluation(text, properties, expected):
    expression = compile_expression(text)
    if expected == ERROR:
        with pytest.raises(FilterEvaluationError):
            expression.evaluate(properties)
        assert expression.matches(properties) is False
    else:
        assert expression.evaluate(properties) is expected
        assert expression.matches(properties) is (expected is True)


REFUSED = [
    ("", "<EOF>"),
    ("a >", "<EOF>"),
    ("a = 10 10", "line 1, column 8"),
    ("a = 10 ANDY b = 1", "<ID> \"ANDY\""),
    ("'a' > 1", "Value ''a'' cannot be compared."),
    ("a > 'x'", "cannot be compared"),
    ("a > TRUE", "cannot be compared"),
    ("(a = 1) > 1", "cannot be compared"),
    ("TRUE = 1", "'TRUE' cannot be compared with '1'"),
    ("a = NULL", "'NULL' cannot be compared."),
    ("NULL = a", "'NULL' cannot be compared."),
    ("5 IN ('x')", "Expected a property for In expression"),
    ("a IN (5)", "<STRING_LITERAL>"),
    ("a IN ()", "<STRING_LITERAL>"),
    ("a BETWEEN 5 AND 1", "Illegal values of between"),
    ("a BETWEEN NULL AND 1", "can not be null"),
    ("0.0 < a", "is less than 4.9E-324"),
    ("a > 1e999", "is greater than"),
    ("a = 99999999999999999999", "For input string"),
    ("5", "will not result in a boolean value"),
    ("'x'", "will not result in a boolean value"),
    ("a > 5 -- comment without end of line", "\"-\""),
    ("a = 1 /* open", "Lexical error"),
    ("a # 1", "Lexical error at line 1, column 3"),
    ("a = 'open", "Lexical error"),
    ("NOT a BETWEEN 1 AND 2", "cannot be compared"),
    ("a LIKE 'x%'", "<ID> \"LIKE\""),
    ("a = 007", "line 1, column 6"),
    ("a IS 1", "\"NOT\""),
    ("a = 1\n AND ? ", "line 2, column 6"),
]


@pytest.mark.parametrize("text,fragment", REFUSED, ids=[c[0] or "empty" for c in REFUSED])
def test_refused(text, fragment):
    with pytest.raises(FilterParseError) as info:
        compile_expression(text)
    assert fragment in info.value.message


def test_bounds_refuse_hostile_input_with_a_clear_message():
    with pytest.raises(FilterParseError, match="too long"):
        compile_expression("a = 1 OR " * (MAX_EXPRESSION_CHARS // 9) + "a = 1")
    for text in ("(" * (MAX_NESTING_DEPTH + 1) + "a" + ")" * (MAX_NESTING_DEPTH + 1),
                 "NOT " * (MAX_NESTING_DEPTH + 1) + "a",
                 "-" * (MAX_NESTING_DEPTH + 1) + "a = 1",
                 "a" + " = 1" * (MAX_NESTING_DEPTH + 1)):
        with pytest.raises(FilterParseError, match="nested too deeply"):
            compile_expression(text)
    # far beyond the bound: still a clean refusal, never a RecursionError
    with pytest.raises(FilterParseError):
        compile_expression("(" * 5000 + "a")
    # within the bounds, long flat lists are fine (AND/OR chains do not nest)
    wide = " OR ".join(f"a = {i}" for i in range(1000))
    assert compile_expression(wide).matches({"a": "999"})
    nested = "(" * MAX_NESTING_DEPTH + "a = 10" + ")" * MAX_NESTING_DEPTH
    assert compile_expression(nested).matches(SPEC)


def test_compile_cache_reuses_results_and_failures():
    text = "cached_prop = 'x'"
    first = compile_expression(text)
    hits = compile_cache_info()[0]
    assert compile_expression(text) is first
    assert compile_cache_info()[0] == hits + 1
    for _ in range(2):
        with pytest.raises(FilterParseError):
            compile_expression("cached_prop >")
    assert compile_cache_info()[2] <= 100


def test_literal_types():
    assert type(compile_expression("a = 3000000000")._root.right.value) is JLong
    assert type(compile_expression("a = 30")._root.right.value) is int
    assert parse_double("1e3d") == 1000.0 and parse_double("0x1p4") == 16.0 and parse_double("-Infinity") < 0
