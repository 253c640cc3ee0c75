"""The synchronous entry of the runtime client, for the worker and other synchronous code.

One event loop per process runs in a daemon thread, started on first use (and again in a
forked child). A synchronous call submits its coroutine to that loop and waits: no thread
per call, and the caller's context (the request id, the current span) goes with it. While
it waits, the calling thread does what the coroutine hands back to it, in order: the
deltas for ``on_delta`` (:func:`post`) and the blocking work that belongs to the caller's
thread, its database connection above all (:func:`blocking`). With ``should_stop`` it also
asks that function every JOB_CANCEL_POLL_SECONDS: once it is true, the call's task is
cancelled (which closes the connection to the runtime, ending the generation there) and,
when the task has ended, :class:`GenerationCancelled` is raised.
"""

import asyncio
import atexit
import contextlib
import contextvars
import functools
import os
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from django.conf import settings

from gateway.dbthread import in_thread
from gateway.runtime.calls import GenerationCancelled

P = ParamSpec("P")
T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
# The work queue of the synchronous caller a task runs for (None on the web's own loop).
_caller: contextvars.ContextVar[queue.SimpleQueue | None] = contextvars.ContextVar(
    "runtime_caller", default=None
)
_END = object()


def _forget_loop() -> None:
    """In a forked child: the parent's loop thread does not exist here."""
    global _lock, _loop, _loop_thread
    _lock, _loop, _loop_thread = threading.Lock(), None, None


os.register_at_fork(after_in_child=_forget_loop)


def _the_loop() -> asyncio.AbstractEventLoop:
    global _loop, _loop_thread
    with _lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            _loop_thread = threading.Thread(
                target=_loop.run_forever, name="runtime-loop", daemon=True
            )
            _loop_thread.start()
        return _loop


@atexit.register
def _close() -> None:
    """Closes the loop's HTTP session (its async generators) before the process exits."""
    loop = _loop
    if loop is not None and loop.is_running():
        with contextlib.suppress(Exception):  # exiting anyway
            asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result(2)
        loop.call_soon_threadsafe(loop.stop)


def run(coro: Coroutine[Any, Any, T], *, should_stop: Callable[[], bool] | None = None) -> T:
    """The result of ``coro``, run on the process's runtime loop (see the module's text)."""
    loop = _the_loop()
    if threading.current_thread() is _loop_thread:
        coro.close()
        raise RuntimeError("a synchronous runtime call from the runtime's own loop")
    work: queue.SimpleQueue = queue.SimpleQueue()

    async def for_this_caller() -> T:
        _caller.set(work)
        try:
            return await coro
        finally:
            work.put(_END)

    future = asyncio.run_coroutine_threadsafe(for_this_caller(), loop)
    try:
        _serve(work, should_stop)
    except BaseException:
        future.cancel()
        _serve(work, None, deltas=False)  # until the task ended: it may still hand work back
        raise
    return future.result()


def _serve(
    work: queue.SimpleQueue, should_stop: Callable[[], bool] | None, *, deltas: bool = True
) -> None:
    """Does the work handed back until the task ends; GenerationCancelled on a stop."""
    poll = settings.JOB_CANCEL_POLL_SECONDS
    # The first check is due one interval in: callers ask just before they call.
    next_check = time.monotonic() + poll
    while True:
        if should_stop is not None and time.monotonic() >= next_check:
            if should_stop():
                raise GenerationCancelled()
            next_check = time.monotonic() + poll
        try:
            item = work.get(timeout=poll if should_stop is not None else None)
        except queue.Empty:
            continue
        if item is _END:
            return
        is_delta, func = item
        if deltas or not is_delta:
            func()


def post(func: Callable[P, Any], *args: P.args, **kwargs: P.kwargs) -> None:
    """From the loop: ``func(*args)`` in the synchronous caller's thread, in order with the
    rest of its work, without waiting for it (the delta of a stream); at once when no
    synchronous caller waits on this task (an async view)."""
    work = _caller.get()
    if work is None:
        func(*args, **kwargs)
    else:
        work.put((True, functools.partial(func, *args, **kwargs)))


async def blocking(func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """From the loop: the result of blocking (database) work, done in the synchronous
    caller's thread (its own connection, its transaction), or, for an async view, in the
    request's thread with its connection given back (``gateway.dbthread.in_thread``)."""
    work = _caller.get()
    if work is None:
        return await in_thread(func, *args, **kwargs)
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():
            outcome()

    def job() -> None:
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:  # delivered to the awaiting task
            loop.call_soon_threadsafe(settle, functools.partial(done.set_exception, exc))
        else:
            loop.call_soon_threadsafe(settle, functools.partial(done.set_result, result))

    work.put((False, job))
    return await done


def run_all(awaitables: list[Awaitable[T]]) -> list[T]:
    """The results of ``awaitables``, run concurrently on the runtime loop."""

    async def gathered() -> list[T]:
        return list(await asyncio.gather(*awaitables))

    return run(gathered())
