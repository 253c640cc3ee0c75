"""The gunicorn worker of the web server: uvicorn running ``config.asgi`` on one event loop
per process (uvloop and httptools when installed), so that a process holds hundreds of
requests at once while they wait on the model runtime.
"""

from typing import Any

from uvicorn_worker import UvicornWorker


class Worker(UvicornWorker):
    # Django speaks no ASGI lifespan, so it is not offered.
    CONFIG_KWARGS = {"loop": "auto", "http": "auto", "lifespan": "off"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # gunicorn's worker_connections, which uvicorn's worker leaves unused: beyond it
        # uvicorn answers 503 instead of taking more connections than the process can hold.
        self.config.limit_concurrency = self.cfg.worker_connections
