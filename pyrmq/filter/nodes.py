"""The expression tree: one small class per Apache expression kind, each with ``evaluate``.

``evaluate`` returns a Java value or None (SQL's UNKNOWN) and raises FilterEvaluationError where
Java throws.  AND/OR chains are kept flat (n-ary), which evaluates exactly like Java's
left-nested binary nodes -- left to right, stopping at the first FALSE/TRUE -- without a Python
frame per operand, so a long ``a='x' OR a='y' OR ...`` list cannot exhaust the stack.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pyrmq.filter.values import JLong, Value, compare, java_equals, java_str, kind, parse_double, wrap_int

Properties = Mapping[str, str]


class Node:
    """A compiled expression node; ``boolean`` says whether Java types it a BooleanExpression."""

    __slots__ = ("depth",)
    boolean = False

    def __init__(self, *children: Node) -> None:
        self.depth: int = 1 + max((c.depth for c in children), default=0)

    def evaluate(self, properties: Properties) -> Value:
        raise NotImplementedError


class Constant(Node):
    __slots__ = ("value",)

    def __init__(self, value: Value) -> None:
        super().__init__()
        self.value = value

    def evaluate(self, properties: Properties) -> Value:
        return self.value

    def __str__(self) -> str:
        return java_str(self.value)


class BooleanConstant(Constant):
    """TRUE, FALSE and NULL: constants that Java also types as boolean expressions."""

    __slots__ = ()
    boolean = True


class Property(Node):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def evaluate(self, properties: Properties) -> Value:
        return properties.get(self.name)

    def __str__(self) -> str:
        return self.name


class Unary(Node):
    __slots__ = ("operand",)

    def __init__(self, operand: Node) -> None:
        super().__init__(operand)
        self.operand = operand


class BooleanCast(Unary):
    """A property used as a condition: TRUE only for a Boolean TRUE value (never, for strings)."""

    __slots__ = ()
    boolean = True

    def evaluate(self, properties: Properties) -> Value:
        value = self.operand.evaluate(properties)
        if value is None:
            return None
        return value is True

    def __str__(self) -> str:
        return str(self.operand)


class Not(Unary):
    __slots__ = ()
    boolean = True

    def evaluate(self, properties: Properties) -> Value:
        value = self.operand.evaluate(properties)
        if value is None:
            return None
        return not value

    def __str__(self) -> str:
        return f"(NOT {self.operand})"


class Negate(Unary):
    __slots__ = ()

    def evaluate(self, properties: Properties) -> Value:
        value = self.operand.evaluate(properties)
        k = None if value is None else kind(value)
        if k == "I" or k == "L":
            assert isinstance(value, int)
            return wrap_int(-value, k == "L")
        if k == "D":
            assert isinstance(value, float)
            return -value
        return None   # not a Number (a String property, a Boolean): Java answers null

    def __str__(self) -> str:
        return f"(- {self.operand})"


class _Junction(Node):
    """OR and AND under three-valued logic: the first operand equal to ``decisive`` decides
    (TRUE for OR, FALSE for AND); otherwise any UNKNOWN operand makes the result UNKNOWN."""

    __slots__ = ("operands",)
    boolean = True
    decisive: bool
    keyword: str

    def __init__(self, operands: Sequence[Node]) -> None:
        super().__init__(*operands)
        self.operands = tuple(operands)

    def evaluate(self, properties: Properties) -> Value:
        unknown = False
        for operand in self.operands:
            value = operand.evaluate(properties)
            if value is None:
                unknown = True
            elif bool(value) is self.decisive:
                return self.decisive
        return None if unknown else not self.decisive

    def __str__(self) -> str:
        return "(" + f" {self.keyword} ".join(str(o) for o in self.operands) + ")"


class Or(_Junction):
    __slots__ = ()
    decisive = True
    keyword = "OR"


class And(_Junction):
    __slots__ = ()
    decisive = False
    keyword = "AND"


class Equal(Node):
    """``=`` (and IS NULL): Java's null quirk -- a NULL left side is UNKNOWN, a NULL right side
    alone is FALSE, two NULLs are TRUE; then equals(), then the coercing compare."""

    __slots__ = ("left", "right")
    boolean = True

    def __init__(self, left: Node, right: Node) -> None:
        super().__init__(left, right)
        self.left, self.right = left, right

    def evaluate(self, properties: Properties) -> Value:
        lv = self.left.evaluate(properties)
        rv = self.right.evaluate(properties)
        if lv is None or rv is None:
            if lv is None and rv is None:
                return True
            return None if lv is None else False
        if java_equals(lv, rv):
            return True
        return compare(lv, rv) == 0

    def __str__(self) -> str:
        return f"({self.left} == {self.right})"


_ORDERINGS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0,
}


class Ordering(Node):
    """``>``, ``>=``, ``<``, ``<=``: UNKNOWN with a NULL side; two Strings compare as Doubles."""

    __slots__ = ("left", "right", "symbol", "test")
    boolean = True

    def __init__(self, symbol: str, left: Node, right: Node) -> None:
        super().__init__(left, right)
        self.left, self.right, self.symbol = left, right, symbol
        self.test: Callable[[int], bool] = _ORDERINGS[symbol]

    def evaluate(self, properties: Properties) -> Value:
        lv = self.left.evaluate(properties)
        if lv is None:
            return None
        rv = self.right.evaluate(properties)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            # Apache never compares strings lexicographically: both must read as numbers.
            return bool(self.test(compare(parse_double(lv), parse_double(rv))))
        return bool(self.test(compare(lv, rv)))

    def __str__(self) -> str:
        return f"({self.left} {self.symbol} {self.right})"


class In(Node):
    __slots__ = ("operand", "values", "negated")
    boolean = True

    def __init__(self, operand: Property, values: Sequence[str], negated: bool) -> None:
        super().__init__(operand)
        self.operand, self.values, self.negated = operand, frozenset(values), negated

    def evaluate(self, properties: Properties) -> Value:
        value = self.operand.evaluate(properties)
        if type(value) is not str:
            return None
        return (value in self.values) != self.negated

    def __str__(self) -> str:
        symbol = "NOT IN" if self.negated else "IN"
        return f"{self.operand} {symbol} ( " + ", ".join(sorted(self.values)) + " )"


class StringTest(Node):
    """CONTAINS / STARTSWITH / ENDSWITH and their NOT forms (Apache 5.1.3+): FALSE unless the
    operand is a String and the search string is not empty -- even for the NOT forms."""

    __slots__ = ("operand", "search", "op", "negated")
    boolean = True

    def __init__(self, op: str, operand: Node, search: str, negated: bool) -> None:
        super().__init__(operand)
        self.op, self.operand, self.search, self.negated = op, operand, search, negated

    def evaluate(self, properties: Properties) -> Value:
        if not self.search:
            return False
        value = self.operand.evaluate(properties)
        if type(value) is not str:
            return False
        assert isinstance(value, str)
        if self.op == "CONTAINS":
            hit = self.search in value
        elif self.op == "STARTSWITH":
            hit = value.startswith(self.search)
        else:
            hit = value.endswith(self.search)
        return hit != self.negated

    def __str__(self) -> str:
        return f"({self.operand} {'NOT ' if self.negated else ''}{self.op} {java_str(self.search)})"


def property_names(node: Node) -> frozenset[str]:
    """Every property the expression reads (a filter then looks up only these)."""
    names: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Property):
            names.add(n.name)
        for attr in ("operand", "left", "right"):
            child = getattr(n, attr, None)
            if isinstance(child, Node):
                stack.append(child)
        stack.extend(getattr(n, "operands", ()))
    return frozenset(names)


__all__ = ["property_names", "And", "BooleanCast", "BooleanConstant", "Constant", "Equal", "In", "JLong", "Negate", "Node", "Not",
           "Or", "Ordering", "Property", "Properties", "StringTest"]
