"""gunicorn settings for every way of running the web server: ``make run``, the Procfile,
compose.yaml. Each can be overridden on the command line (``--bind``, ``--workers``, ...).

Environment: ``HOST`` (default 127.0.0.1; containers and the Procfile bind 0.0.0.0),
``PORT`` (8000), ``WEB_CONCURRENCY`` (worker processes, 2), ``GUNICORN_THREADS`` (threads
per worker, 8), ``GUNICORN_TIMEOUT`` and ``GUNICORN_GRACEFUL_TIMEOUT`` (seconds).
"""

import os


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"{name} must be an integer, got {raw!r}") from None


wsgi_app = "config.wsgi:application"
bind = f"{os.environ.get('HOST') or '127.0.0.1'}:{_int('PORT', 8000)}"
# Threads, not more processes: a request to /api.php mostly waits on the model runtime.
worker_class = "gthread"
workers = _int("WEB_CONCURRENCY", 2)
threads = _int("GUNICORN_THREADS", 8)
# A gthread worker keeps reporting while its threads wait, so this only catches a stuck
# worker; it is above RUNTIME_READ_TIMEOUT (120 s) for those who switch to sync workers.
timeout = _int("GUNICORN_TIMEOUT", 150)
# On SIGTERM, requests in flight (possibly waiting on the model) get this long to finish.
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 30)
keepalive = 5
accesslog = "-"
errorlog = "-"
# gunicorn 27's control socket sits at one path per user, which two instances on one
# machine would share; nothing here uses it (older gunicorns ignore this name).
control_socket_disable = True
