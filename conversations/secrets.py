"""Resolve API key references (``env:NAME``) to secrets, at call time only.

Records store a *reference*, never a key. The resolver is replaceable through
``CONVERSATIONS["SECRET_RESOLVER"]`` (a vault, a KMS, ...).
"""

from __future__ import annotations

import os

from django.utils.module_loading import import_string

from .conf import app_settings


def resolve_secret(reference: str) -> str | None:
    """The default resolver: ``env:NAME`` reads an environment variable.

    Returns ``None`` when the reference is empty, unknown or unset.
    """
    scheme, _, name = (reference or "").partition(":")
    if scheme == "env" and name:
        value = os.environ.get(name)
        return value or None
    return None


def resolve(reference: str) -> str | None:
    """Resolve ``reference`` with the configured resolver."""
    if not reference:
        return None
    resolver = import_string(app_settings().SECRET_RESOLVER)
    result = resolver(reference)
    return result if isinstance(result, str) and result else None
