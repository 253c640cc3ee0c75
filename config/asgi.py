"""The ASGI application (the web server runs it: ``deploy/gunicorn.conf.py``).

The stateless endpoint (``settings.STATELESS_PATHS``) is served by a handler of its own
whose middleware chain is ``settings.STATELESS_MIDDLEWARE``: the other paths keep the whole
``MIDDLEWARE`` chain, which under ASGI sends each synchronous hook to the request's thread
and back.

Django gives every request a thread of its own for its synchronous work (middleware,
synchronous views, the ORM): a new thread per request. Starting a thread is cheap on an idle
machine, but the event loop waits until the new thread runs, and on a busy one that stalls
every request of the process for milliseconds. Here a request of the whole chain gets a
thread kept from an earlier request instead: the same one-thread-per-request rule, without
the start.

The stateless endpoint's synchronous work is a few short statements before and after the
model call (``gateway.dbthread`` gives the connection back after each), so its requests
share ``settings.STATELESS_THREADS`` threads (4) instead: with hundreds of calls in flight,
hundreds of threads each waking for a statement contend with the event loop for the
interpreter lock, and the handoffs, not the work, set the latency. Fewer threads are not
better: with one, every statement of the process waits its turn, and when the machine is
slow that queue grows (figures in ``bench/RESULTS.md``).
"""

import asyncio
import contextlib
import itertools
import os
import re
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.conf import settings
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.urls import set_script_prefix

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# Threads kept idle for the next requests, at most; more are ended when given back.
KEEP_IDLE = 256


class PooledThreadASGIHandler(ASGIHandler):
    """Runs each request's synchronous work in a thread kept from an earlier request."""

    def __init__(self, middleware: list[str] | None = None) -> None:
        self.middleware = middleware
        super().__init__()
        self._idle: deque[ThreadPoolExecutor] = deque()

    def load_middleware(self, is_async: bool = False) -> None:
        """Django's, from ``middleware`` when given instead of ``settings.MIDDLEWARE`` (which
        Django's loader reads: set for the moment of loading, once, at start-up)."""
        if self.middleware is None:
            return super().load_middleware(is_async)
        full = settings.MIDDLEWARE
        settings.MIDDLEWARE = self.middleware
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = full

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self.take_thread()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self.give_back(executor)

    def take_thread(self) -> ThreadPoolExecutor:
        try:
            return self._idle.pop()
        except IndexError:
            return ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        if len(self._idle) < KEEP_IDLE:
            self._idle.append(executor)
        else:
            executor.shutdown(wait=False)


class SharedThreadsASGIHandler(PooledThreadASGIHandler):
    """Runs the synchronous work of every request in one of ``threads`` threads, taken in
    turn: a request keeps its thread from start to end (Django's thread-sensitive rule),
    and a thread runs one request's step at a time."""

    def __init__(self, middleware: list[str] | None = None, *, threads: int) -> None:
        super().__init__(middleware)
        self._threads = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="stateless")
            for _ in range(threads)
        ]
        self._turn = itertools.cycle(self._threads)

    def take_thread(self) -> ThreadPoolExecutor:
        return next(self._turn)

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        pass

    async def handle(self, scope, receive, send) -> None:
        """Django's ``ASGIHandler.handle`` (5.2), without its two trips to the request's
        thread for the ``request_started`` and ``request_finished`` signals.

        Their receivers are Django's: ``close_old_connections`` and ``reset_queries``
        (``close_caches`` on the way out). The stateless endpoint's statements give their
        connections back after each step (``gateway.dbthread``), so between requests its
        threads hold none for those receivers to close, and it uses no cache. Two trips of
        the four a call made (the other two run its statements), each a thread handoff and
        back on the event loop (the CPU it saves: ``bench/RESULTS.md``).

        The rest is Django's: the body read, the request built and run through
        ``STATELESS_MIDDLEWARE``, and a task that listens for the client's disconnect and
        cancels the view (which closes the model call).
        """
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        try:
            request, error_response = self.create_request(scope, body_file)
            if request is None:
                await self.send_response(error_response, send)
                return

            async def process_request() -> None:
                response = await self.run_get_response(request)
                # Cancelled here: the client went away while the answer was sent.
                with contextlib.suppress(asyncio.CancelledError):
                    await self.send_response(response, send)

            # The listener first: it is the one whose end cancels the other.
            tasks = [
                asyncio.create_task(self.listen_for_disconnect(receive)),
                asyncio.create_task(process_request()),
            ]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                if task.done():
                    with contextlib.suppress(RequestAborted, asyncio.CancelledError):
                        task.result()
                else:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        finally:
            body_file.close()


class Application:
    """Sends a request for one of ``settings.STATELESS_PATHS`` (or an event stream,
    ``settings.EVENT_STREAM_PATHS``) to the stateless handler, any other to the handler of
    the whole chain. An event stream stays open for minutes: in the whole chain it would
    keep the thread its middleware ran in for as long (one per open stream)."""

    def __init__(self) -> None:
        self.stateless_paths = frozenset(settings.STATELESS_PATHS)
        self.streams = re.compile(settings.EVENT_STREAM_PATHS)
        self.stateless = SharedThreadsASGIHandler(
            settings.STATELESS_MIDDLEWARE, threads=settings.STATELESS_THREADS
        )
        self.full = PooledThreadASGIHandler()

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path", "")
        stateless = path in self.stateless_paths or self.streams.fullmatch(path) is not None
        await (self.stateless if stateless else self.full)(scope, receive, send)


def get_asgi_application() -> Application:
    """``django.core.asgi.get_asgi_application``, with the handlers above."""
    import django

    django.setup(set_prefix=False)
    return Application()


application = get_asgi_application()
