"""Java value semantics the selector needs: Integer/Long/Double/String/Boolean and the coercing
comparison of Apache's ``ComparisonExpression.__compare`` (string conversion enabled, as SQL92
filtering always sets it).

Python ints stand for Java Integer; a Long is a :class:`JLong` (an int subclass) because Java
treats the two differently (``Integer.valueOf`` rejects what ``Long.valueOf`` accepts, and a Long
meeting a Double fails).  Doubles are floats, Strings str, Booleans bool.
"""

from __future__ import annotations

import math
import re
from typing import Union

from pyrmq.filter.errors import FilterEvaluationError

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


class JLong(int):
    """A Java Long (an int literal beyond 32 bits, an ``L`` literal, or a parsed Long)."""

    __slots__ = ()


Value = Union[None, bool, int, float, str]

# Java's Integer/Long.valueOf: an optional sign and ASCII digits, nothing else (no spaces, no "_").
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+\Z")
# Java's Double.valueOf (FloatingDecimal): surrounding chars <= ' ' are trimmed, an optional type
# suffix is allowed, and NaN / Infinity are spelled out; Python's float() would also take "inf",
# "1_0" or other Unicode digits, so the text is checked first.
_DOUBLE_TEXT = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)\Z")
_HEX_DOUBLE_TEXT = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+[fFdD]?\Z")


def _java_trim(text: str) -> str:
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _parse_integral(text: str, low: int, high: int) -> int:
    value = int(text) if _INTEGER_TEXT.match(text) else high + 1
    if not low <= value <= high:
        raise FilterEvaluationError(f'NumberFormatException: For input string: "{text}"')
    return value


def parse_integer(text: str) -> int:
    """``Integer.valueOf``."""
    return _parse_integral(text, INT_MIN, INT_MAX)


def parse_long(text: str) -> JLong:
    """``Long.valueOf``."""
    return JLong(_parse_integral(text, LONG_MIN, LONG_MAX))


def parse_double(text: str) -> float:
    trimmed = _java_trim(text)
    if _DOUBLE_TEXT.match(trimmed):
        body = trimmed[:-1] if trimmed[-1] in "fFdD" and not trimmed.endswith("NaN") else trimmed
        return float(body)
    if _HEX_DOUBLE_TEXT.match(trimmed):
        body = trimmed[:-1] if trimmed[-1] in "fFdD" else trimmed
        sign = -1.0 if body.startswith("-") else 1.0
        return sign * float.fromhex(body.lstrip("+-"))
    raise FilterEvaluationError(f'NumberFormatException: For input string: "{text}"')


def parse_boolean(text: str) -> bool:
    return text.lower() == "true"


def kind(value: Value) -> str:
    """One letter per Java class: B(oolean) I(nteger) L(ong) D(ouble) S(tring)."""
    t = type(value)
    if t is bool:
        return "B"
    if t is JLong:
        return "L"
    if t is int:
        return "I"
    if t is float:
        return "D"
    if t is str:
        return "S"
    raise FilterEvaluationError(f"not a selector value: {value!r}")


def java_equals(lv: Value, rv: Value) -> bool:
    """``Object.equals``: same class and value (Double.equals compares bits: NaN equals NaN)."""
    if type(lv) is not type(rv):
        return False
    if type(lv) is float:
        assert isinstance(rv, float)
        return lv == rv and math.copysign(1.0, lv) == math.copysign(1.0, rv) or (lv != lv and rv != rv)
    return lv == rv


def _compare_same(lv: Value, rv: Value) -> int:
    if type(lv) is float:
        assert isinstance(lv, float) and isinstance(rv, float)
        return _double_compare(lv, rv)
    if type(lv) is str:
        assert isinstance(lv, str) and isinstance(rv, str)
        # String.compareTo works on UTF-16 code units; only its sign and zero are used.
        a, b = lv.encode("utf-16-be"), rv.encode("utf-16-be")
        return (a > b) - (a < b)
    return (lv > rv) - (lv < rv)  # type: ignore[operator]


def _double_compare(a: float, b: float) -> int:
    """``Double.compare``: -0.0 < 0.0, NaN equals itself and is above everything."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = a != a, b != b
    if a_nan or b_nan:
        return (a_nan > b_nan) - (a_nan < b_nan)
    sa, sb = math.copysign(1.0, a), math.copysign(1.0, b)
    return (sa > sb) - (sa < sb)


def compare(lv: Value, rv: Value) -> int:
    """Apache's ``__compare(lv, rv, convertStringExpressions=true)``: the value of another class
    is converted toward the left one's (a String is parsed); an impossible pair answers -1; a
    failed parse or a Java ClassCastException raises :class:`FilterEvaluationError`."""
    lk, rk = kind(lv), kind(rv)
    if lk != rk:
        assert lv is not None and rv is not None
        if lk == "B":
            if rk == "S":
                # Java casts the Boolean to String here: a ClassCastException.
                raise FilterEvaluationError("ClassCastException: Boolean cannot be cast to String")
            return -1
        if lk == "I":
            if rk == "L":
                lv = JLong(lv)
            elif rk == "D":
                lv = float(lv)
            elif rk == "S":
                assert isinstance(rv, str)
                rv = parse_integer(rv)
            else:
                return -1
        elif lk == "L":
            if rk == "I":
                rv = JLong(rv)
            elif rk == "D":
                # Java widens the Long to a Float and Float.compareTo(Double) throws.
                raise FilterEvaluationError("ClassCastException: Double cannot be cast to Float")
            elif rk == "S":
                assert isinstance(rv, str)
                rv = parse_long(rv)
            else:
                return -1
        elif lk == "D":
            if rk in ("I", "L"):
                rv = float(rv)
            elif rk == "S":
                assert isinstance(rv, str)
                rv = parse_double(rv)
            else:
                return -1
        else:  # lk == "S"
            assert isinstance(lv, str)
            if rk == "B":
                lv = parse_boolean(lv)
            elif rk == "I":
                lv = parse_integer(lv)
            elif rk == "L":
                lv = parse_long(lv)
            else:
                lv = parse_double(lv)
    return _compare_same(lv, rv)


def java_str(value: Value) -> str:
    """How Java prints a constant in its messages (``Double.toString`` is approximated by repr)."""
    if value is None:
        return "NULL"
    if value is True:
        return "TRUE"
    if value is False:
        return "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value).replace("e+", "E").replace("e-", "E-")
    return str(int(value))


def wrap_int(value: int, long: bool) -> int:
    """Java's two's-complement overflow (negating Integer.MIN_VALUE gives it back)."""
    if long:
        return JLong((value - LONG_MIN) % (1 << 64) + LONG_MIN)
    return (value - INT_MIN) % (1 << 32) + INT_MIN
