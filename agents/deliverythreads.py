"""Webhook deliveries run in threads of their own in a worker process, so that a slow or
dead receiver (up to its 10 s limit per attempt) holds neither a job thread nor the worker
process's task loop, which goes on taking jobs. A process that dies mid-attempt leaves the
delivery leased; the sweep sends it again once the lease runs out."""

import logging
import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor

from django.db import close_old_connections

from agents import webhooks

logger = logging.getLogger(__name__)

#: Deliveries one worker process makes at once.
DELIVERY_THREADS = 8

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(DELIVERY_THREADS, thread_name_prefix="webhook")
        return _pool


def _run(delivery_id: str) -> None:
    try:
        webhooks.webhook_deliver(delivery_id)
    except Exception:
        logger.exception("Webhook %s: the attempt failed; the sweep sends it again", delivery_id)
    finally:
        close_old_connections()


def dispatch(delivery_id: str) -> str:
    """Runs an attempt in a delivery thread of this worker process; inline outside a worker
    process (django-q2's ``sync`` mode runs the task where it was enqueued)."""
    if multiprocessing.parent_process() is None:
        return webhooks.webhook_deliver(delivery_id)
    _executor().submit(_run, delivery_id)
    return "sent to a delivery thread"
