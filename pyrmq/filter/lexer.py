"""Tokens of RocketMQ's selector language, cut as its JavaCC token manager cuts them: the
longest match wins, a keyword beats an identifier of the same length, keywords and the
exponent letter ignore case, a ``--`` comment needs its end of line and ``/* */`` its end."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyrmq.filter.errors import FilterParseError

# 4.9.x keywords, plus CONTAINS/STARTSWITH/ENDSWITH which Apache added in 5.1.3.
KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS",
                      "CONTAINS", "STARTSWITH", "ENDSWITH"})
OPERATORS = ("<>", ">=", "<=", "=", ">", "<", "(", ")", ",", "+", "-")

_WHITESPACE = " \t\n\r\f"
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*[lL]?)")
_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_STRING = re.compile(r"'(?:''|[^'])*'")
_IDENTIFIER = re.compile(r"[a-zA-Z_$][a-zA-Z0-9_$]*")

# Token kinds; JavaCC's names, used in messages.
KEYWORD, DECIMAL, FLOAT, STRING, IDENTIFIER, OPERATOR, EOF = (
    "KEYWORD", "DECIMAL_LITERAL", "FLOATING_POINT_LITERAL", "STRING_LITERAL", "ID", "OPERATOR", "EOF")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str      # the image; keywords upper-cased
    pos: int       # index in the expression text

    def describe(self) -> str:
        if self.kind == EOF:
            return "<EOF>"
        if self.kind in (KEYWORD, OPERATOR):
            return f'"{self.text}"'
        return f'<{self.kind}> "{self.text}"'


_NEWLINE = re.compile(r"\r\n|\n|\r")


def line_and_column(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of ``pos``, as JavaCC reports them (CR, LF and CRLF end a line)."""
    line, line_start = 1, 0
    for m in _NEWLINE.finditer(text, 0, pos):
        line, line_start = line + 1, m.end()
    return line, pos - line_start + 1


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    pos, end = 0, len(text)
    while True:
        while pos < end:   # whitespace and comments
            ch = text[pos]
            if ch in _WHITESPACE:
                pos += 1
            elif text.startswith("--", pos) and (m := _LINE_COMMENT.match(text, pos)):
                pos = m.end()
            elif text.startswith("/*", pos) and (m := _BLOCK_COMMENT.match(text, pos)):
                pos = m.end()
            else:
                break
        if pos >= end:
            tokens.append(Token(EOF, "", pos))
            return tokens
        best_kind, best_text = "", ""
        for kind, pattern in ((DECIMAL, _DECIMAL), (FLOAT, _FLOAT), (STRING, _STRING), (IDENTIFIER, _IDENTIFIER)):
            m = pattern.match(text, pos)
            if m and len(m.group()) > len(best_text):
                best_kind, best_text = kind, m.group()
        for op in OPERATORS:
            if text.startswith(op, pos) and len(op) > len(best_text):
                best_kind, best_text = OPERATOR, op
                break
        if not best_text:
            ch = text[pos]
            line, column = line_and_column(text, pos)
            raise FilterParseError(f'Lexical error at line {line}, column {column}.  Encountered: '
                                   f'"{ch}" ({ord(ch)}), after : ""')
        if best_kind == IDENTIFIER and best_text.upper() in KEYWORDS:
            tokens.append(Token(KEYWORD, best_text.upper(), pos))
        else:
            tokens.append(Token(best_kind, best_text, pos))
        pos += len(best_text)
