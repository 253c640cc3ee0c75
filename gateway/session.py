"""The one pooled HTTP session to model runtimes.

A ``requests.Session`` whose requests are prepared for what ``gateway.runtime`` sends and
nothing more. Every call there is a GET, or a POST of a JSON body, to a URL built from a
configured base URL, with plain headers: no cookies, no ``.netrc`` or proxy settings from
the environment, no query parameters, no files. requests' general preparation (cookie
jars merged per call, URL re-parsing and re-quoting, auth and hook merging) cost a large share
of the instructions of a whole ``POST /api.php`` (``bench/RESULTS.md``); this one costs a few
dictionary writes.
Anything outside that shape is prepared by requests as usual.
"""

import json
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from requests.cookies import RequestsCookieJar
from requests.structures import CaseInsensitiveDict

from gateway import abortable


class _NoCookies(RequestsCookieJar):
    """Keeps nothing: a runtime's cookies must not tie one client's calls to another's."""

    def set_cookie(self, cookie: Any, *args: Any, **kwargs: Any) -> None:
        return None


# Shared by every request: it never holds a cookie, so there is nothing to keep apart.
_NO_COOKIES = _NoCookies()


class RuntimeSession(requests.Session):
    def prepare_request(self, request: requests.Request) -> requests.PreparedRequest:
        simple = (
            isinstance(request.url, str)
            and request.url.isascii()
            and not (request.params or request.files or request.data)
            and not (request.cookies or request.auth or request.hooks.get("response"))
        )
        if not simple:
            return super().prepare_request(request)
        prepared = requests.PreparedRequest()
        prepared.method = request.method.upper()
        prepared.url = request.url
        headers = CaseInsensitiveDict(self.headers)
        headers.update(request.headers or {})
        if request.json is None:
            prepared.body = None
            if prepared.method not in ("GET", "HEAD"):
                headers["Content-Length"] = "0"
        else:
            # As requests does it: refuse NaN, send UTF-8, say it is JSON.
            body = json.dumps(request.json, allow_nan=False).encode()
            headers.setdefault("Content-Type", "application/json")
            headers["Content-Length"] = str(len(body))
            prepared.body = body
        prepared.headers = headers
        prepared.hooks = {"response": []}
        prepared._cookies = _NO_COOKIES  # read only if the runtime redirects
        return prepared


def make_session() -> RuntimeSession:
    session = RuntimeSession()
    # Runtimes are configured explicitly (MODEL_RUNTIME_URL, the routing table): no
    # HTTP(S)_PROXY / NO_PROXY / ~/.netrc from the environment. Reading those costs a scan
    # of os.environ and a file lookup on every call.
    session.trust_env = False
    session.cookies = _NoCookies()
    adapter = HTTPAdapter(pool_connections=16, pool_maxsize=64, max_retries=0)
    abortable.install(adapter)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
