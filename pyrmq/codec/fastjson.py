"""JSON bodies and config files the way fastjson 1.2.x writes and reads them.

fastjson differs from standard JSON in ways Java peers depend on (spec/remoting.md section 11):
maps with integer keys are written with the keys unquoted (``{0:"addr"}``), maps keyed by objects
(``Map<MessageQueue, ...>``) are written with a JSON object as the key, bean members are sorted and
null members omitted, doubles always carry a fraction (``0.0``).  ``dumps`` produces that form,
``loads`` accepts it (and standard JSON).  Cold path only: bodies of heartbeats, registrations,
admin calls and config files.
"""

from __future__ import annotations

import enum
import itertools
import json
import math
import re
from collections.abc import Iterator
from typing import Any, Final

import orjson

from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.text import is_encodable, may_hold_surrogate

# Nesting deeper than any RocketMQ body; bounds the recursion of the parser on hostile input.
MAX_DEPTH: Final = 64

# A bare number of the lenient reader: ASCII digits only (``int()`` and ``float()`` would also take
# "١٢", "1_0", "nan" and "infinity"), and no longer than any long or double is written.
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?", re.ASCII)
MAX_NUMBER_CHARS: Final = 40


class ObjectKey(tuple[tuple[str, Any], ...]):
    """A map key that is itself a JSON object (fastjson's ``{{"brokerName":..}:value}``).

    Stored as a tuple of sorted (name, value) pairs so it is hashable; ``as_dict()`` gives it back.
    """

    __slots__ = ()

    @classmethod
    def of(cls, mapping: dict[str, Any]) -> ObjectKey:
        """The key of a bean with scalar members (a MessageQueue); null members are left out, as
        fastjson writes them."""
        return cls(sorted((name, value) for name, value in mapping.items() if value is not None))

    def as_dict(self) -> dict[str, Any]:
        return dict(self)


_string_encoder = json.JSONEncoder(ensure_ascii=False)


def _encode_str(s: str) -> str:
    return _string_encoder.encode(s)


def _encode_scalar(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, enum.Enum):
        return _encode_str(value.name)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return "null"
        return repr(value)
    if isinstance(value, str):
        return _encode_str(value)
    raise TypeError(f"cannot encode {type(value).__name__} as fastjson")


def _encode_key(key: Any) -> str:
    if isinstance(key, bool):
        return _encode_str("true" if key else "false")
    if isinstance(key, int):
        return str(key)              # fastjson: Integer/Long keys unquoted
    if isinstance(key, ObjectKey):
        return dumps(key.as_dict())
    if isinstance(key, enum.Enum):
        return _encode_str(key.name)
    return _encode_str(str(key))


def _sorted_items(obj: dict[Any, Any]) -> list[tuple[Any, Any]]:
    items = [(k, v) for k, v in obj.items() if v is not None]
    # Bean members and string-keyed maps come out sorted; integer keys in numeric order.
    try:
        items.sort(key=lambda kv: kv[0])
    except TypeError:
        items.sort(key=lambda kv: str(kv[0]))
    return items


def dumps(obj: Any) -> str:
    """Compact fastjson text (``JSON.toJSONString`` with default features)."""
    if isinstance(obj, dict):
        return "{" + ",".join(f"{_encode_key(k)}:{dumps(v)}" for k, v in _sorted_items(obj)) + "}"
    if isinstance(obj, (list, tuple, set, frozenset)) and not isinstance(obj, ObjectKey):
        seq = sorted(obj) if isinstance(obj, (set, frozenset)) else obj
        return "[" + ",".join("null" if v is None else dumps(v) for v in seq) + "]"
    if obj is None:
        return "null"
    return _encode_scalar(obj)


def dumps_pretty(obj: Any, _indent: int = 0) -> str:
    """fastjson PrettyFormat: tab indentation, as in the broker's config JSON files.

    Maps with non-string keys keep fastjson's odd layout (entries on one line, the closing brace on
    the next), e.g. ``{0:250,1:249\\n\\t\\t}``; readers ignore whitespace, but it keeps files diffable
    against a Java broker's.
    """
    tabs = "\t" * (_indent + 1)
    close = "\t" * _indent
    if isinstance(obj, dict):
        items = _sorted_items(obj)
        if not items:
            return "{}"
        if any(not isinstance(k, str) for k, _ in items):
            inner = ",".join(f"{_encode_key(k)}:{dumps(v)}" for k, v in items)
            return "{" + inner + "\n" + close + "}"
        inner = ",\n".join(f"{tabs}{_encode_key(k)}:{dumps_pretty(v, _indent + 1)}" for k, v in items)
        return "{\n" + inner + "\n" + close + "}"
    if isinstance(obj, (list, tuple, set, frozenset)) and not isinstance(obj, ObjectKey):
        seq = sorted(obj) if isinstance(obj, (set, frozenset)) else list(obj)
        if not seq:
            return "[]"
        inner = ",\n".join(f"{tabs}{dumps_pretty(v, _indent + 1)}" for v in seq)
        return "[\n" + inner + "\n" + close + "]"
    return dumps(obj)


# ---------------------------------------------------------------------------------------------
# Lenient reader


class _Parser:
    __slots__ = ("text", "pos")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, what: str) -> ProtocolError:
        return ProtocolError(f"fastjson: {what} at position {self.pos}")

    def skip_ws(self) -> None:
        text = self.text
        pos = self.pos
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        self.pos = pos

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.error("nesting too deep")
        self.skip_ws()
        if self.pos >= len(self.text):
            raise self.error("unexpected end")
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj(depth)
        if ch == "[":
            return self.array(depth)
        if ch == '"' or ch == "'":
            return self.string()
        return self.bare()

    def obj(self, depth: int) -> dict[Any, Any]:
        self.pos += 1
        result: dict[Any, Any] = {}
        self.skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return result
        while True:
            self.skip_ws()
            if self.pos >= len(self.text):
                raise self.error("unterminated object")
            ch = self.text[self.pos]
            if ch == '"' or ch == "'":
                key: Any = self.string()
            elif ch == "{":
                key = self.object_key(depth + 1)
            else:
                key = self.bare()
                if not isinstance(key, int) or isinstance(key, bool):
                    raise self.error("bad object key")
            self.skip_ws()
            if not self.text.startswith(":", self.pos):
                raise self.error("expected ':'")
            self.pos += 1
            result[key] = self.value(depth + 1)
            self.skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return result
            raise self.error("expected ',' or '}'")

    def object_key(self, depth: int) -> ObjectKey:
        """A bean used as a map key: string member names, scalar values (hashable, and written
        back the same)."""
        members = self.obj(depth)
        for name, value in members.items():
            if not isinstance(name, str) or isinstance(value, (dict, list, ObjectKey)):
                raise self.error("object key with a member that is not a named scalar")
        return ObjectKey.of(members)

    def array(self, depth: int) -> list[Any]:
        self.pos += 1
        result: list[Any] = []
        self.skip_ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return result
        while True:
            result.append(self.value(depth + 1))
            self.skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return result
            raise self.error("expected ',' or ']'")

    def string(self) -> str:
        quote = self.text[self.pos]
        if quote == '"':
            value: str
            try:  # the C scanner json itself uses; typeshed does not declare it
                value, end = json.decoder.scanstring(self.text, self.pos + 1)  # type: ignore[attr-defined]
            except json.JSONDecodeError as exc:
                raise self.error(f"bad string ({exc.msg})") from None
            self.pos = end
            return value
        end = self.text.find("'", self.pos + 1)
        if end < 0:
            raise self.error("unterminated string")
        value = self.text[self.pos + 1:end]
        self.pos = end + 1
        return value

    def bare(self) -> Any:
        text = self.text
        start = self.pos
        pos = start
        while pos < len(text) and text[pos] not in ",:]} \t\r\n":
            pos += 1
        token = text[start:pos]
        self.pos = pos
        if not token:
            raise self.error("expected a value")
        if token == "true":
            return True
        if token == "false":
            return False
        if token == "null":
            return None
        if len(token) > MAX_NUMBER_CHARS or not _NUMBER.fullmatch(token):
            raise self.error(f"bad token {token[:20]!r}")
        if token.isdigit() or (token[0] == "-" and token[1:].isdigit()):
            return int(token)
        return _finite_float(token)


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):   # 1e999: written back it would be null
        raise ProtocolError(f"fastjson: number {text[:20]!r} out of range")
    return value


def _no_constants(name: str) -> Any:
    raise ProtocolError(f"fastjson: {name} is not a number fastjson writes")


def _check_tree(value: Any, texts: bool) -> None:
    """Refuse what could not be written back: nesting past MAX_DEPTH (the C parser goes as deep as
    the interpreter's recursion limit) and, with ``texts``, lone surrogates (``"\\ud800"`` is
    valid JSON, but not UTF-8).  Iterative: the C parser's nesting costs no recursion here."""
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ProtocolError("fastjson: nesting too deep")
        if isinstance(node, str):
            if texts and not is_encodable(node):
                raise ProtocolError("fastjson: body holds a lone UTF-16 surrogate (not valid Unicode text)")
        elif isinstance(node, dict):
            stack.extend((key, depth + 1) for key in node)
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, (list, tuple)):   # an ObjectKey is a tuple of (name, value) pairs
            stack.extend((child, depth + 1) for child in node)


def _plain_tree(value: Any) -> bool:
    """Whether orjson's ``value`` is what the json module would have made of the same text: no
    float anywhere (orjson reads an integer past 64 bits as a float) and nothing nested deeper
    than MAX_DEPTH (as _check_tree counts).  Walked a level at a time, so that the members' types
    are collected in C (a registration holds tens of thousands); orjson leaves no surrogate."""
    if type(value) is float:
        return False
    # ``level``: the containers at one depth; their members' types are collected without
    # building a list of them, and only the members that are containers go on to the next level
    # (a registration's last level is tens of thousands of scalars)
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        depth += 1
        kinds = set(map(type, _members(level)))
        if not kinds:   # empty containers only
            return True
        if depth > MAX_DEPTH or float in kinds:
            return False
        if dict not in kinds and list not in kinds:
            return True
        level = [node for node in _members(level) if type(node) is dict or type(node) is list]
    return True


def _members(level: list[Any]) -> Iterator[Any]:
    return itertools.chain.from_iterable(node.values() if type(node) is dict else node for node in level)


def loads(data: str | bytes | bytearray | memoryview) -> Any:
    """Parse fastjson output (unquoted integer keys, object keys) or standard JSON.

    Standard JSON -- most bodies, a broker's registration among them -- takes orjson (strict
    RFC 8259 and UTF-8) when what it makes of the text is what the json module would; anything
    else takes the json module and then the lenient parser, whose rules this function defines."""
    try:
        fast = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    else:
        if _plain_tree(fast):
            return fast
    return _loads_slow(data)


def _loads_slow(data: str | bytes | bytearray | memoryview) -> Any:
    if not isinstance(data, str):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"fastjson: body is not UTF-8: {exc}") from None
    try:
        # Most bodies are plain JSON: let the C parser take them.
        result = json.loads(data, parse_constant=_no_constants, parse_float=_finite_float)
    except (ValueError, RecursionError):
        parser = _Parser(data)
        result = parser.value(0)
        parser.skip_ws()
        if parser.pos != len(data):
            raise parser.error("trailing characters") from None
    _check_tree(result, texts=may_hold_surrogate(data))
    return result


_LONG = range(-2**63, 2**63)


def int_member(value: Any) -> int:
    """A Java int or long member of a bean: a JSON integer, or a string of ASCII digits (fastjson
    converts those).  Raises ``ValueError`` for anything else -- "١٢" and "1_0" too, which
    Python's ``int()`` would take -- and for values no long holds."""
    if isinstance(value, str) and len(value) <= MAX_NUMBER_CHARS and _NUMBER.fullmatch(value) and (
            value.isdigit() or (value[:1] == "-" and value[1:].isdigit())):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value in _LONG:
        return value
    raise ValueError(f"not an integer member: {value!r:.40}")


def float_member(value: Any) -> float:
    """A Java double member: a JSON number or its ASCII text, finite."""
    if isinstance(value, str) and len(value) <= MAX_NUMBER_CHARS and _NUMBER.fullmatch(value):
        value = float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise ValueError(f"not a number member: {value!r:.40}")


def int_keys(mapping: dict[Any, Any]) -> dict[int, Any]:
    """A map read back with integer keys, whether they were written quoted or not."""
    return {int_member(k): v for k, v in mapping.items()}
