"""RocketMQ's SQL92 message selector: lexer, parser and evaluator (pure: no I/O, no trio, no broker).

``compile_expression(text)`` gives an :class:`Expression` whose ``matches(properties)`` answers
whether a message with those (string) properties is delivered -- exactly TRUE under Java's
three-valued logic and its string/number coercions (spec filter.md section 3).  Bad text raises
:class:`FilterParseError` with a message shaped like Apache's parser message.
"""

from pyrmq.filter.cache import compile_expression, compile_cache_info
from pyrmq.filter.errors import FilterEvaluationError, FilterParseError
from pyrmq.filter.expression import Expression
from pyrmq.filter.parser import MAX_EXPRESSION_CHARS, MAX_NESTING_DEPTH, parse

__all__ = ["Expression", "FilterEvaluationError", "FilterParseError", "MAX_EXPRESSION_CHARS",
           "MAX_NESTING_DEPTH", "compile_cache_info", "compile_expression", "parse"]
