"""A compiled selector: what the broker keeps per subscription and asks per message."""

from __future__ import annotations

from collections.abc import Mapping

from pyrmq.filter.nodes import Node, property_names
from pyrmq.filter.values import Value


class Expression:
    """An immutable compiled SQL92 expression, safe to share between subscriptions."""

    __slots__ = ("text", "_root", "property_names")

    def __init__(self, text: str, root: Node) -> None:
        self.text = text
        self._root = root
        # what the expression reads: a caller holding a properties string may look up only these
        self.property_names = property_names(root)

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        """The three-valued result (None for UNKNOWN); raises FilterEvaluationError where Java throws."""
        return self._root.evaluate(properties)

    def matches(self, properties: Mapping[str, str]) -> bool:
        """True only for an exact TRUE; an evaluation error is a non-match, as Apache catches it."""
        try:
            return self._root.evaluate(properties) is True
        except Exception:   # Java catches Throwable around evaluate() and answers "not matched"
            return False

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"

    def __str__(self) -> str:
        return str(self._root)
