"""HTTP Basic parsing and the admin-account check of the console (no network)."""

from __future__ import annotations

import base64

import pytest

from pyrmq.console.auth import admin_account, basic_credentials

SECRETS = {"admin007": "admin-secret"}


def basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(("header", "expected"), [
    (basic("admin007:admin-secret"), ("admin007", "admin-secret")),
    (basic("a:b:c"), ("a", "b:c")),                 # the password may hold colons
    ("basic " + base64.b64encode(b"u:p").decode(), ("u", "p")),
    (basic("no-colon"), None),
    ("Basic !!!notbase64", None),
    ("Bearer abc", None),
    ("Basic " + base64.b64encode(b"\xff:\xfe").decode(), None),
    ("", None),
    (None, None),
])
def test_basic_credentials(header, expected):
    assert basic_credentials(header) == expected


def test_only_the_right_secret_of_an_admin_account_passes():
    assert admin_account(basic("admin007:admin-secret"), SECRETS.get) == ("admin007", "admin-secret")
    assert admin_account(basic("admin007:admin-secre"), SECRETS.get) is None
    assert admin_account(basic("admin007:admin-secret2"), SECRETS.get) is None
    assert admin_account(basic("other:admin-secret"), SECRETS.get) is None
    assert admin_account(None, SECRETS.get) is None
