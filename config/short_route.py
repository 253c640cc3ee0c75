"""The short route in front of Django (``config.asgi``), through public means only.

Django's own ASGI application serves every path but a few, which this route serves instead:
the stateless model endpoints (``/api.php``, the OpenAI-compatible face's ``/v1/`` calls)
and the event streams (``/agent/job/{id}/events``, ``/agent/conversation/{id}/events``).

Why: under ASGI, Django gives each request a thread of its own for its synchronous work,
started for the request and kept until it ends, and sends each synchronous hook of its
middleware to that thread and back. An open event stream would hold its thread for minutes
(one per stream, thousands per process), and a model call in flight pays a thread start and
the hops of every middleware of the chain, which under hundreds of calls in flight contend
with the event loop (the figures: ``bench/RESULTS.md``). The short route:

- builds Django's request from the ASGI scope, finds the view with Django's ``resolve()``,
  and runs it under the same middleware classes as ever, the project's own and Django's
  security and common middleware applied the way Django applies middleware to one view
  (``decorator_from_middleware``: their hooks run on the event loop, as they do no I/O),
  each layer's errors made answers by Django's own ``convert_exception_to_response``; the
  chain is that of a stateless answer (no session, cookie, user, message or HTML page), so
  the same request id, metrics, security headers, host check and body limit, and none of
  the rest;
- runs the requests' synchronous work (their database statements) on ``THREADS`` threads
  shared by all of them, taken in turn (asgiref's ``ThreadSensitiveContext`` with an
  executor): a request keeps its thread from start to end, as Django's thread-sensitive rule
  asks; each thread keeps its own database connections when the pool has room for them
  (``gateway.dbthread``): a process then holds ``THREADS`` per database for all its
  requests;
- cancels the view when the client goes away (which closes the model call, or the stream).
"""

import asyncio
import contextlib
import itertools
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponseBase
from django.middleware.common import CommonMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import resolve
from django.utils.decorators import decorator_from_middleware

from config.middleware import ContentLengthMiddleware
from core.errors import json_error
from core.exceptions import BadRequest
from core.http import BodySizeLimitMiddleware
from core.observe import RequestObserverMiddleware
from gateway.dbthread import keep_connections, release_connections

SHORT_PATHS = re.compile(
    r"/api\.php|/v1/(?:chat/completions|completions|embeddings|models)"
    r"|/agent/(?:job|conversation)/[^/]+/events"
)
# Fewer is not better: with one, every statement of the process waits its turn, and when the
# machine is slow that queue grows; with a thread per request, hundreds of threads each
# waking for a statement contend with the event loop for the interpreter lock.
THREADS = 4
_threads = [
    ThreadPoolExecutor(
        max_workers=1, thread_name_prefix="short", initializer=keep_connections, initargs=(THREADS,)
    )
    for _ in range(THREADS)
]
_turn = itertools.cycle(_threads)


def give_back_connections() -> None:
    """Gives back the connections that the route's threads keep (before the database they
    are connected to is dropped, for instance at the end of a test run)."""
    for thread in _threads:
        thread.submit(release_connections).result()


async def view(request: HttpRequest) -> HttpResponseBase:
    """The path's view (asynchronous, as every view of the short route is)."""
    match = resolve(request.path_info)
    request.resolver_match = match
    return await match.func(request, *match.args, **match.kwargs)


def chain(get_response):
    """The middleware of the short route around ``get_response``, outermost first."""
    layers = (
        RequestObserverMiddleware,
        ContentLengthMiddleware,
        decorator_from_middleware(SecurityMiddleware),
        decorator_from_middleware(CommonMiddleware),  # the host checked against ALLOWED_HOSTS
        BodySizeLimitMiddleware,
    )
    handler = convert_exception_to_response(get_response)
    for layer in reversed(layers):
        handler = convert_exception_to_response(layer(handler))
    return handler


short_chain = chain(view)


def in_front_of(django_application):
    """The ASGI application: the short route for :data:`SHORT_PATHS`, else Django's."""

    async def application(scope, receive, send) -> None:
        if scope["type"] == "http" and SHORT_PATHS.fullmatch(scope["path"]):
            async with ThreadSensitiveContext(executor=next(_turn)):
                await serve(scope, receive, send)
        else:
            await django_application(scope, receive, send)

    return application


async def serve(scope, receive, send) -> None:
    """The request through :data:`short_chain`, and its answer sent; the view is cancelled
    if the client goes away first."""
    with tempfile.SpooledTemporaryFile(max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE) as body:
        if not await read_body(receive, body):
            return  # gone before its body arrived
        try:
            request = ASGIRequest(scope, body)
        except UnicodeDecodeError:
            await send_response(json_error(BadRequest("The request is not valid.")), send)
            return
        answer = asyncio.create_task(respond(request, send))
        gone = asyncio.create_task(disconnected(receive))
        await asyncio.wait((answer, gone), return_when=asyncio.FIRST_COMPLETED)
        for task in (gone, answer):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def read_body(receive, body) -> bool:
    """The request's body into ``body``; False if the client went away first."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return False
        body.write(message.get("body", b""))
        if not message.get("more_body", False):
            body.seek(0)
            return True


async def disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def respond(request: HttpRequest, send) -> None:
    await send_response(await short_chain(request), send)


async def send_response(response: HttpResponseBase, send) -> None:
    headers = [(name.encode("latin1"), value.encode("latin1")) for name, value in response.items()]
    headers += [
        (b"Set-Cookie", cookie.output(header="").encode("ascii").strip())
        for cookie in response.cookies.values()
    ]
    start = {"type": "http.response.start", "status": response.status_code, "headers": headers}
    await send(start)
    if not response.streaming:
        await send({"type": "http.response.body", "body": response.content})
        return
    async with contextlib.aclosing(aiter(response)) as parts:
        async for part in parts:
            await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body"})
