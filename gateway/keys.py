"""Plain API key format: ``llmgw_<prefix>_<secret>``.

``prefix`` (12 characters) finds the row; ``secret`` (40 characters, about 238 bits) is
never stored. The stored digest is SHA-256 of the whole key: the secret is random and long,
so a slow password hash would add latency to every request and no security.
"""

import hashlib
import hmac
import re
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


_WELL_FORMED = re.compile(
    rf"{KEY_TAG}_([a-z0-9]{{{PREFIX_LENGTH}}})_[A-Za-z0-9]{{{SECRET_LENGTH}}}", re.ASCII
)


def prefix_of(plain: str) -> str | None:
    """The lookup prefix of a well-formed key, else None (without touching the database,
    so that no text it cannot store, such as a NUL, ever reaches it)."""
    match = _WELL_FORMED.fullmatch(plain)
    return match.group(1) if match else None


# Compared against when no key has the prefix: the same work as for a key that exists.
UNKNOWN_DIGEST = "0" * 64


def matches(plain: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(plain), stored_digest)
