"""The one error family for malformed bytes: the connection that sent them is closed."""


class ProtocolError(Exception):
    """Bytes that do not follow the wire format; the message says what was wrong."""
