"""Encryption of bot credentials at rest (Fernet, keyed from ``BRIDGES_SECRET_KEY`` or ``SECRET_KEY``).

``BRIDGES_SECRET_KEY`` may be a Fernet key (32 url-safe base64 bytes) or any passphrase; a passphrase, and
``SECRET_KEY`` when it is unset, is stretched with HKDF-SHA256 into one. Changing the key makes the stored
credentials unreadable: the bindings then report ``credentials_unreadable`` until the owner enters them again.
Nothing here logs or returns a secret in an error message.
"""

from __future__ import annotations

import base64
import binascii
import json
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from localai_memory.core.errors import ApplicationError


class CredentialsUnreadable(ApplicationError):
    status = 409
    code = "credentials_unreadable"


def _derive(secret: str) -> bytes:
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"localai-memory/bridges",
               info=b"bot credentials v1").derive(secret.encode())
    return base64.urlsafe_b64encode(raw)


@lru_cache(maxsize=4)
def _fernet(bridges_key: str, secret_key: str) -> Fernet:
    if bridges_key:
        try:
            if len(base64.urlsafe_b64decode(bridges_key.encode())) == 32:
                return Fernet(bridges_key.encode())
        except (binascii.Error, ValueError):
            pass
        return Fernet(_derive(bridges_key))
    return Fernet(_derive(secret_key))


def fernet() -> Fernet:
    return _fernet(settings.BRIDGES_SECRET_KEY or "", settings.SECRET_KEY)


def encrypt(values: dict[str, str]) -> str:
    """The Fernet token of ``values`` (a JSON object of strings)."""
    return fernet().encrypt(json.dumps(values, sort_keys=True).encode()).decode()


def decrypt(token: str) -> dict[str, str]:
    """The credentials stored in ``token``. Raises CredentialsUnreadable when the key changed."""
    if not token:
        return {}
    try:
        values = json.loads(fernet().decrypt(token.encode()))
    except (InvalidToken, ValueError):
        raise CredentialsUnreadable(
            "The stored credentials cannot be read with this server's key; enter them again.") from None
    return {str(k): str(v) for k, v in values.items()}
