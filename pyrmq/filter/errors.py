"""The two failures of the SQL92 filter: bad text (at compile time) and a failed evaluation."""


class FilterParseError(ValueError):
    """The expression cannot be compiled; ``message`` reads like Apache's parser message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class FilterEvaluationError(Exception):
    """An evaluation failed (Java threw: NumberFormatException, ClassCastException, ...); the
    message is then not matched."""
