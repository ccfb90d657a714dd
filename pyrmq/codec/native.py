"""The send path's per-message byte work in C, when ``pyrmq.codec._native`` was built.

Each function of the extension (``_native.c``) has a Python twin next to the format it serves:
``index_codec`` (index key hash and item insert), ``remoting`` (a ROCKETMQ header's extFields),
``message_batch`` (a batch body), ``message_props`` (a properties string), ``send_header`` (a
plain send's header). The twin is the reference, written from the layouts the codec declares;
the C function does the same work in a fraction of the interpreter's time (issue 14).
:func:`native_function` binds each public name: to the C function when the extension is
importable and its layout constants match the declarations, to the twin otherwise. A machine
without a C compiler gets a slower broker, never a different store. ``tests/codec/test_native.py``
proves the twins write the same bytes and return the same values.

``PYRMQ_NATIVE=0`` in the environment binds the twins even when the extension is there (to
measure one against the other).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar, cast


def load_extension(name: str) -> ModuleType | None:
    """The C extension module ``name``; None when it was not built (no C compiler) or
    ``PYRMQ_NATIVE=0``: then its Python twins run."""
    if os.environ.get("PYRMQ_NATIVE", "1") == "0":
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_native_module = load_extension("pyrmq.codec._native")
NATIVE: bool = _native_module is not None

F = TypeVar("F", bound=Callable[..., Any])


def native_function(name: str, twin: F, layout: dict[str, int] | None = None) -> F:
    """The C function ``name`` when the extension is bound, else its Python ``twin``. ``layout``:
    the sizes the twin's format declares, by the names the extension exports them under; a
    mismatch means the extension was built from another version of the sources."""
    if _native_module is None:
        return twin
    for constant, declared in (layout or {}).items():
        compiled = getattr(_native_module, constant)
        if compiled != declared:
            raise RuntimeError(f"pyrmq.codec._native was built with {constant} = {compiled}, the codec "
                               f"declares {declared}: rebuild it (pip install -e .)")
    try:
        return cast(F, getattr(_native_module, name))
    except AttributeError:
        raise RuntimeError(f"pyrmq.codec._native has no {name}: it was built from older sources, "
                           "rebuild it (pip install -e .)") from None
