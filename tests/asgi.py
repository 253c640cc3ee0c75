"""Helpers of the tests that drive /api.php through a real ASGI server (uvicorn)."""

import http.client
import json
import threading

IN_FLIGHT = 64  # four times the 2 x 8 threads of the earlier web server


def post(server: tuple[str, int], body: dict) -> tuple[int, dict]:
    """POST /api.php on ``server`` (host, port); returns the status and the JSON answer."""
    conn = http.client.HTTPConnection(*server, timeout=60)
    try:
        conn.request("POST", "/api.php", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def hold_slow_calls(runtime, settings) -> threading.Event:
    """Calls whose prompt is "slow" are held by the runtime until the event is set; other
    prompts are answered "quick" at once. The connect and read timeouts leave time for all
    of them to arrive on a busy machine (64 connects at once on a starved event loop can
    take longer than the default 3 s to be seen through: they were answered 502)."""
    settings.RUNTIME_READ_TIMEOUT = 60.0
    settings.RUNTIME_CONNECT_TIMEOUT = 60.0
    release = threading.Event()

    def script(prompt: str, body: dict) -> str:
        if prompt == "slow":
            release.wait(timeout=60)
            return "late"
        return "quick"

    runtime.script = script
    return release
