"""The in-process NameServer + broker of tests/broker, for the client tests."""

from tests.broker.conftest import broker_overrides, cluster  # noqa: F401  (fixtures)
