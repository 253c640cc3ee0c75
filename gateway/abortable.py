"""HTTP requests that another thread can cut off, even before the server has answered.

``requests`` hands out no connection until the response headers have arrived, and a model
runtime that streams sends them with its first token: after loading the model and reading
the prompt, which can take minutes. The connection pools installed by :func:`install` make
connections that, when they send a request, register with the :class:`Abortable` of the
sending thread; :meth:`Abortable.abort` then shuts the socket down, which ends the blocked
read at once and tells the server the client is gone.
"""

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.connection import HTTPConnection, HTTPSConnection

_sending = threading.local()


class Aborted(Exception):
    """The request was aborted before it was sent."""


class Abortable:
    """One request, sent by one thread, that any thread may abort."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: HTTPConnection | None = None
        self._response: requests.Response | None = None
        self._aborted = False

    @contextlib.contextmanager
    def sending(self) -> Iterator[None]:
        """The request this thread sends inside the block is the one :meth:`abort` cuts."""
        _sending.current = self
        try:
            yield
        finally:
            _sending.current = None

    def attach_connection(self, connection: HTTPConnection) -> None:
        with self._lock:
            if self._aborted:
                raise Aborted()
            self._connection = connection

    def attach_response(self, response: requests.Response) -> bool:
        """Takes over the response; False (and the response closed) if aborted meanwhile."""
        with self._lock:
            if not self._aborted:
                self._response = response
                return True
        response.close()
        return False

    def abort(self) -> None:
        """Closes the response, or, while there is none yet, the connection's socket."""
        with self._lock:
            self._aborted = True
            connection, response = self._connection, self._response
        if response is not None:
            # The connection is the response's now (and back in the pool once it was read
            # to the end): only the response may close it.
            response.close()
            return
        sock = getattr(connection, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Registering:
    def request(self, *args: Any, **kwargs: Any) -> None:
        current = getattr(_sending, "current", None)
        if current is not None:
            current.attach_connection(self)
        super().request(*args, **kwargs)  # type: ignore[misc]


class _HTTPConnection(_Registering, HTTPConnection):
    pass


class _HTTPSConnection(_Registering, HTTPSConnection):
    pass


class _HTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


def install(adapter: HTTPAdapter) -> None:
    """Makes the adapter's connections abortable (by requests sent inside ``sending()``)."""
    adapter.poolmanager.pool_classes_by_scheme = {
        "http": _HTTPConnectionPool,
        "https": _HTTPSConnectionPool,
    }
