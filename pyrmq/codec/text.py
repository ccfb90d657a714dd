"""What text and numbers may cross the codec boundary.

Every string a decoder returns must be writable back as UTF-8: responses, config files and the
commit log encode it again, and a lone UTF-16 surrogate (a JSON ``"\\ud800"`` escape, which
Python's json module and Java both accept) cannot be encoded -- one such topic name used to poison
``topics.json`` and kill the process.  Numbers are what Java's ``Integer.parseInt`` /
``Long.parseLong`` accept, restricted to ASCII digits (Python's ``int()`` also takes Arabic-Indic
digits, underscores and surrounding blanks) and to the Java type's range, so no text of any length
reaches ``int()``.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Final

from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.native import native_function

INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1

# Java's parseLong grammar in ASCII; 19 digits hold every long, one more sign character at most.
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]{1,19}")
# A JSON escape that can make a UTF-16 surrogate (U+D800-U+DFFF); JSON spells the escape \u only.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def is_encodable(text: str) -> bool:
    """True when ``text`` has no lone surrogate, i.e. encodes to UTF-8."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_encodable(value: Any, what: str) -> None:
    """Raise ProtocolError if a string anywhere in a decoded JSON value cannot be encoded again.

    ``value`` comes from a depth-bounded parser, so the recursion is bounded too.
    """
    if isinstance(value, str):
        if not is_encodable(value):
            raise ProtocolError(f"{what} holds a lone UTF-16 surrogate (not valid Unicode text)")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_encodable(key, what)
            check_encodable(item, what)
    elif isinstance(value, (list, tuple)):
        for item in value:
            check_encodable(item, what)


def may_hold_surrogate(json_text: str) -> bool:
    """False when the JSON text cannot produce a surrogate: strictly decoded UTF-8 holds none, so
    only a ``\\uD800``-``\\uDFFF`` escape can make one.  Lets the common case skip the walk
    above: the Java client's properties are full of ``\\u0001`` / ``\\u0002`` escapes, so
    testing for any ``\\u`` sent every send through the walk (an escaped backslash before ``uD8``
    still matches: a false positive only costs the walk)."""
    return _SURROGATE_ESCAPE.search(json_text) is not None


def parse_java_int_py(text: str, bits: int = 64) -> int:
    """The value of ``text`` as Java's parseInt (``bits=32``) or parseLong reads it, ASCII only.

    Raises ValueError (with a message a user can act on) for anything else. The twin of
    ``_native.parse_java_int`` (four of these per send).
    """
    if len(text) < (10 if bits == 32 else 19) and text.isascii() and text.isdigit():
        return int(text)   # 9 (18) ASCII digits at most: in range, no sign (the common case, per send)
    if not _JAVA_INTEGER.fullmatch(text):
        raise ValueError(f"not a number: {text[:32]!r}")
    value = int(text)
    low, high = (INT32_MIN, INT32_MAX) if bits == 32 else (INT64_MIN, INT64_MAX)
    if not low <= value <= high:
        raise ValueError(f"{text[:32]!r} is out of the range of a {bits}-bit integer")
    return value


parse_java_int = native_function("parse_java_int", parse_java_int_py)


def java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it (what Apache puts in runtime info and
    fastjson in bodies): plain decimals from 10^-3 to 10^7, ``1.5E7`` / ``5.0E-4`` outside, with
    the shortest digits that read back the same (Python's repr picks the same digits)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        return repr(value)   # repr writes plain digits (and a ".0") throughout this range
    _, digits, exponent = Decimal(repr(abs(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) - 1 + int(exponent)
    return f"{'-' if value < 0 else ''}{text[0]}.{text[1:] or '0'}E{power}"
