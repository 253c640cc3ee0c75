"""A real webhook receiver on loopback: records every POST (headers and body) and answers
what the test says (``status``, ``delay``, a redirect). Used by tests and benchmarks."""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.time)


class WebhookReceiver:
    """``answer(received) -> (status, body, extra headers)``; by default 204."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.answer: Callable[[Received], tuple[int, bytes, dict[str, str]]] = lambda r: (
            204,
            b"",
            {},
        )
        self.delay = 0.0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self, port: int = 0) -> "WebhookReceiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                got = Received(
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length),
                )
                if receiver.delay:
                    time.sleep(receiver.delay)
                with receiver._lock:
                    receiver.received.append(got)
                status, body, headers = receiver.answer(got)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def events(self) -> list[dict]:
        import json

        with self._lock:
            return [json.loads(r.body) for r in self.received]
