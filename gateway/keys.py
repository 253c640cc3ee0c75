"""Plain API key format: ``llmgw_<prefix>_<secret>``.

``prefix`` (12 characters) finds the row; ``secret`` (40 characters, about 238 bits) is
never stored. The stored digest is SHA-256 of the whole key: the secret is random and long,
so a slow password hash would add latency to every request and no security.
"""

import hashlib
import hmac
import secrets
import string
from typing import NamedTuple

KEY_TAG = "llmgw"
PREFIX_LENGTH = 12
SECRET_LENGTH = 40
_PREFIX_ALPHABET = string.ascii_lowercase + string.digits
_SECRET_ALPHABET = string.ascii_letters + string.digits


class NewKey(NamedTuple):
    plain: str
    prefix: str
    digest: str


def digest(plain: str) -> str:
    return hashlib.sha256(plain.encode()).hexdigest()


def generate() -> NewKey:
    prefix = "".join(secrets.choice(_PREFIX_ALPHABET) for _ in range(PREFIX_LENGTH))
    secret = "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(SECRET_LENGTH))
    plain = f"{KEY_TAG}_{prefix}_{secret}"
    return NewKey(plain=plain, prefix=prefix, digest=digest(plain))


def prefix_of(plain: str) -> str | None:
    """The lookup prefix of a well-formed key, else None (without touching the database)."""
    parts = plain.split("_")
    if len(parts) != 3 or parts[0] != KEY_TAG:
        return None
    prefix, secret = parts[1], parts[2]
    if len(prefix) != PREFIX_LENGTH or len(secret) != SECRET_LENGTH:
        return None
    return prefix


def matches(plain: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(plain), stored_digest)
