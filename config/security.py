"""The client's address for the admin's login throttling (django-axes).

Behind a TLS proxy (``BEHIND_TLS_PROXY=1``) every request comes from the proxy, so locking
out "this username from this address" would lock the username out for everyone. The proxy
appends the address it saw to ``X-Forwarded-For``; entries further left were written by the
client and can be forged, so the one taken is ``TRUSTED_PROXY_COUNT`` from the right.
"""

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str | None:
    remote = request.META.get("REMOTE_ADDR")
    if settings.SECURE_PROXY_SSL_HEADER is None:
        return remote
    hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    hops = [h for h in hops if h]
    if len(hops) < settings.TRUSTED_PROXY_COUNT:
        return remote
    return hops[-settings.TRUSTED_PROXY_COUNT]
