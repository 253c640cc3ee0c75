"""gunicorn settings for every way of running the web server: ``make run``, the Procfile,
compose.yaml. Each can be overridden on the command line (``--bind``, ``--workers``, ...).

gunicorn supervises ``WEB_CONCURRENCY`` uvicorn processes, each serving ``config.asgi`` on
one event loop: ``POST /api.php`` is an async view, so a process holds hundreds of model
calls in flight (``GUNICORN_WORKER_CONNECTIONS`` each at most); the other endpoints run
synchronously in threads, as Django does under ASGI.

Environment: ``HOST`` (default 127.0.0.1; containers and the Procfile bind 0.0.0.0),
``PORT`` (8000), ``WEB_CONCURRENCY`` (worker processes, 2), ``GUNICORN_WORKER_CONNECTIONS``
(connections a process accepts at once, 2000: an open event stream holds one),
``GUNICORN_TIMEOUT`` and ``GUNICORN_GRACEFUL_TIMEOUT`` (seconds).
"""

import os
import sys
from pathlib import Path


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"{name} must be an integer, got {raw!r}") from None


wsgi_app = "config.asgi:application"
bind = f"{os.environ.get('HOST') or '127.0.0.1'}:{_int('PORT', 8000)}"
# An event loop per process: a request to /api.php mostly waits on the model runtime.
worker_class = "config.gunicorn_worker.Worker"
workers = _int("WEB_CONCURRENCY", 2)
# uvicorn answers 503 to connections beyond this many at once in one process.
worker_connections = _int("GUNICORN_WORKER_CONNECTIONS", 2000)
# A worker's event loop reports to gunicorn while its requests wait, so this only catches a
# stuck worker; it is above RUNTIME_READ_TIMEOUT (120 s).
timeout = _int("GUNICORN_TIMEOUT", 150)
# On SIGTERM, requests in flight (possibly waiting on the model) get this long to finish.
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 30)
keepalive = 5
# LOG_LEVEL (default INFO) holds for gunicorn's own lines too; an access line is INFO, so
# above that there is none (make run's quiet terminal, or a production that wants less).
loglevel = (os.environ.get("LOG_LEVEL", "").strip() or "info").lower()
accesslog = "-" if loglevel in ("debug", "info") else None
errorlog = "-"
# LOG_FORMAT=json: gunicorn's own lines (its master's too) as the service's (core/logs.py).
if os.environ.get("LOG_FORMAT", "").strip() == "json":
    # gunicorn adds the project to sys.path only after it has read this file.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from core.logs import logging_config

    logconfig_dict = logging_config(json_format=True, level=os.environ.get("LOG_LEVEL") or "INFO")
# gunicorn 27's control socket sits at one path per user, which two instances on one
# machine would share; nothing here uses it (older gunicorns ignore this name).
control_socket_disable = True
