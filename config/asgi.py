"""The ASGI application (the web server runs it: ``deploy/gunicorn.conf.py``).

Django gives every request a thread of its own for its synchronous work (middleware,
synchronous views, the ORM): a new thread per request. Starting a thread is cheap on an idle
machine, but the event loop waits until the new thread runs, and on a busy one that stalls
every request of the process for milliseconds. Here a request gets a thread kept from an
earlier request instead: the same one-thread-per-request rule, without the start.
"""

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# Threads kept idle for the next requests, at most; more are ended when given back.
KEEP_IDLE = 256


class PooledThreadASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self._idle: deque[ThreadPoolExecutor] = deque()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        try:
            executor = self._idle.pop()
        except IndexError:
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            if len(self._idle) < KEEP_IDLE:
                self._idle.append(executor)
            else:
                executor.shutdown(wait=False)


def get_asgi_application() -> PooledThreadASGIHandler:
    """``django.core.asgi.get_asgi_application``, with the handler above."""
    import django

    django.setup(set_prefix=False)
    return PooledThreadASGIHandler()


application = get_asgi_application()
