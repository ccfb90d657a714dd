"""Recursive-descent parser for RocketMQ's SQL92 selector grammar (spec filter.md section 3.2).

The productions and the compile-time checks follow Apache's SelectorParser.jj and the
``create*`` factories it calls, so the same texts are refused (``'a' > 1``, ``TRUE = 1``,
``5 IN ('x')``, ``a BETWEEN 5 AND 1``, ``0.0`` ...).  Hostile input is bounded: the text length
and the nesting depth have limits, refused with a clear message before Python's own stack is at risk.
"""

from __future__ import annotations

from pyrmq.filter.errors import FilterParseError
from pyrmq.filter.lexer import DECIMAL, EOF, FLOAT, IDENTIFIER, KEYWORD, OPERATOR, STRING, Token, \
    line_and_column, tokenize
from pyrmq.filter.nodes import And, BooleanCast, BooleanConstant, Constant, Equal, In, Negate, Node, Not, Or, \
    Ordering, Property, StringTest
from pyrmq.filter.values import INT_MAX, INT_MIN, LONG_MAX, JLong, compare, java_str

# A selector travels in every heartbeat and pull header; real ones are a few hundred characters.
# 16 KiB leaves room for long IN lists while keeping a hostile text's tokens and tree small.
MAX_EXPRESSION_CHARS = 16 * 1024
# Parentheses, unary prefixes and chained comparisons each nest one level; the parser recurses a
# few Python frames per level, so 64 levels stay far below the interpreter's recursion limit.
MAX_NESTING_DEPTH = 64

_DOUBLE_MAX = 1.7976931348623157e308
_DOUBLE_MIN = 5e-324
_STRING_TESTS = ("CONTAINS", "STARTSWITH", "ENDSWITH")


def parse(text: str) -> Node:
    """Compile ``text`` to its (boolean) expression tree, or raise FilterParseError."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise FilterParseError(f"Expression is too long: {len(text)} characters, at most {MAX_EXPRESSION_CHARS}")
    return _Parser(text).parse()


def _as_boolean(node: Node) -> Node:
    if node.boolean:
        return node
    if isinstance(node, Property):
        return BooleanCast(node)
    raise FilterParseError(f"Expression will not result in a boolean value: {node}")


def _is_number(node: Node) -> bool:
    return type(node) is Constant and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def _check_orderable(node: Node) -> None:
    if isinstance(node, Constant):
        if _is_number(node):
            return
        raise FilterParseError(f"Value '{node}' cannot be compared.")
    if node.boolean:
        raise FilterParseError(f"Value '{node}' cannot be compared.")


def _check_equal_operand(node: Node) -> None:
    if isinstance(node, Constant) and node.value is None:
        raise FilterParseError(f"'{node}' cannot be compared.")


def _ordering(symbol: str, left: Node, right: Node) -> Node:
    _check_orderable(left)
    _check_orderable(right)
    return Ordering(symbol, left, right)


def _equal(left: Node, right: Node) -> Node:
    _check_equal_operand(left)
    _check_equal_operand(right)
    if isinstance(left, Constant) and isinstance(right, Constant) and left.boolean and not right.boolean:
        raise FilterParseError(f"'{left}' cannot be compared with '{right}'")
    return Equal(left, right)


def _between(value: Node, low: Node, high: Node) -> Node:
    if isinstance(low, Constant) and isinstance(high, Constant):
        if low.value is None or high.value is None:
            raise FilterParseError("Illegal values of between, values can not be null!")
        try:
            order = compare(high.value, low.value)
        except Exception as exc:
            raise FilterParseError(str(exc)) from None
        if order < 0:
            raise FilterParseError(f"Illegal values of between, left value({java_str(low.value).strip(chr(39))}) "
                                   f"must less than or equal to right value({java_str(high.value).strip(chr(39))})")
    return And([_ordering(">=", value, low), _ordering("<=", value, high)])


def _decimal(text: str) -> Constant:
    digits = text[:-1] if text[-1] in "lL" else text
    value = int(digits)
    if value > LONG_MAX:
        raise FilterParseError(f'For input string: "{digits}"')
    return Constant(value if INT_MIN <= value <= INT_MAX else JLong(value))


def _float(text: str) -> Constant:
    value = float(text)
    if value > _DOUBLE_MAX:
        raise FilterParseError(f"{text} is greater than 1.7976931348623157E308")
    if value < _DOUBLE_MIN:   # Apache refuses zero too (it compares with Double.MIN_VALUE)
        raise FilterParseError(f"{text} is less than 4.9E-324")
    return Constant(value)


def _string_value(image: str) -> str:
    return image[1:-1].replace("''", "'")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.index = 0
        self.nesting = 0

    # -- token helpers ------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def at(self, kind: str, text: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind == kind and token.text == text

    def take(self) -> Token:
        token = self.peek()
        self.index += 1
        return token

    def expect(self, kind: str, text: str | None, expecting: str) -> Token:
        token = self.peek()
        if token.kind != kind or (text is not None and token.text != text):
            self.fail(token, expecting)
        return self.take()

    def fail(self, token: Token, expecting: str) -> None:
        line, column = line_and_column(self.text, token.pos)
        raise FilterParseError(f"Encountered \" {token.describe()} \" at line {line}, column {column}.\n"
                               f"Was expecting one of:\n    {expecting}")

    def nest(self, node: Node) -> Node:
        if node.depth > MAX_NESTING_DEPTH:
            raise FilterParseError(f"Expression is nested too deeply: more than {MAX_NESTING_DEPTH} levels")
        return node

    def enter(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING_DEPTH:
            raise FilterParseError(f"Expression is nested too deeply: more than {MAX_NESTING_DEPTH} levels")

    # -- productions ----------------------------------------------------------------------------
    def parse(self) -> Node:
        node = _as_boolean(self.or_expression())
        if self.peek().kind != EOF:
            self.fail(self.peek(), '<EOF> "AND" "OR" "=" "<>" "IS" ">" ">=" "<" "<=" "BETWEEN" "IN" "NOT" ...')
        return node

    def or_expression(self) -> Node:
        left = self.and_expression()
        if not self.at(KEYWORD, "OR"):
            return left
        operands = [_as_boolean(left)]
        while self.at(KEYWORD, "OR"):
            self.take()
            operands.append(_as_boolean(self.and_expression()))
        return self.nest(Or(operands))

    def and_expression(self) -> Node:
        left = self.equality_expression()
        if not self.at(KEYWORD, "AND"):
            return left
        operands = [_as_boolean(left)]
        while self.at(KEYWORD, "AND"):
            self.take()
            operands.append(_as_boolean(self.equality_expression()))
        return self.nest(And(operands))

    def equality_expression(self) -> Node:
        left = self.comparison_expression()
        while True:
            if self.at(OPERATOR, "="):
                self.take()
                left = _equal(left, self.comparison_expression())
            elif self.at(OPERATOR, "<>"):
                self.take()
                left = Not(_equal(left, self.comparison_expression()))
            elif self.at(KEYWORD, "IS") and self.at(KEYWORD, "NULL", 1):
                self.index += 2
                left = Equal(left, BooleanConstant(None))
            elif self.at(KEYWORD, "IS"):
                self.take()
                self.expect(KEYWORD, "NOT", '"NOT" "NULL"')
                self.expect(KEYWORD, "NULL", '"NULL"')
                left = Not(Equal(left, BooleanConstant(None)))
            else:
                return left
            self.nest(left)

    def comparison_expression(self) -> Node:
        left = self.unary_expression()
        while True:
            token = self.peek()
            negated = False
            if token.kind == KEYWORD and token.text == "NOT" and self.peek(1).kind == KEYWORD \
                    and self.peek(1).text in ("BETWEEN", "IN") + _STRING_TESTS:
                self.take()
                negated, token = True, self.peek()
            if token.kind == OPERATOR and token.text in (">", ">=", "<", "<="):
                self.take()
                left = _ordering(token.text, left, self.unary_expression())
            elif token.kind == KEYWORD and token.text == "BETWEEN":
                self.take()
                low = self.unary_expression()
                self.expect(KEYWORD, "AND", '"AND"')
                high = self.unary_expression()
                if negated:
                    left = Or([_ordering("<", left, low), _ordering(">", left, high)])
                else:
                    left = _between(left, low, high)
            elif token.kind == KEYWORD and token.text == "IN":
                self.take()
                self.expect(OPERATOR, "(", '"("')
                values = [self.string_literal()]
                while self.at(OPERATOR, ","):
                    self.take()
                    values.append(self.string_literal())
                self.expect(OPERATOR, ")", '")" ","')
                if not isinstance(left, Property):
                    raise FilterParseError(f"Expected a property for In expression, got: {left}")
                left = In(left, values, negated)
            elif token.kind == KEYWORD and token.text in _STRING_TESTS:
                self.take()
                left = StringTest(token.text, left, self.string_literal(), negated)
            else:
                return left
            self.nest(left)

    def string_literal(self) -> str:
        return _string_value(self.expect(STRING, None, "<STRING_LITERAL>").text)

    def unary_expression(self) -> Node:
        token = self.peek()
        if token.kind == OPERATOR and token.text in ("+", "-") or token.kind == KEYWORD and token.text == "NOT":
            self.take()
            self.enter()
            operand = self.unary_expression()
            self.nesting -= 1
            if token.text == "+":
                return operand
            if token.text == "-":
                return self.nest(Negate(operand))
            return self.nest(Not(_as_boolean(operand)))
        return self.primary_expression()

    def primary_expression(self) -> Node:
        token = self.take()
        if token.kind == STRING:
            return Constant(_string_value(token.text))
        if token.kind == DECIMAL:
            return _decimal(token.text)
        if token.kind == FLOAT:
            return _float(token.text)
        if token.kind == KEYWORD and token.text in ("TRUE", "FALSE", "NULL"):
            return BooleanConstant({"TRUE": True, "FALSE": False, "NULL": None}[token.text])
        if token.kind == IDENTIFIER:
            return Property(token.text)
        if token.kind == OPERATOR and token.text == "(":
            self.enter()
            node = self.or_expression()
            self.nesting -= 1
            self.expect(OPERATOR, ")", '")"')
            return node
        self.index -= 1
        self.fail(token, '<STRING_LITERAL> <DECIMAL_LITERAL> <FLOATING_POINT_LITERAL> "TRUE" "FALSE" "NULL" '
                         '<ID> "(" "+" "-" "NOT"')
        raise AssertionError("unreachable")
