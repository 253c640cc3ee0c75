"""The loopback runtime of bench/events.py: Ollama's streamed ``/api/generate`` and
``/api/chat`` answering ``W0 here. W1 here. ...`` in chunks of a word (``W0``, `` here.``,
`` W1``, ...), ``WORDS`` sentences, noting when each chunk leaves it.

    python -m bench.stream_runtime PORT WORDS FIRST_DELAY CHUNK_DELAY

``GET /times`` answers those departure times (``time.time()``) by the mark (``mk<n>x``) found
in the call's prompt; the model ``instant-model`` answers ``ok`` at once, unstreamed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import LOOPBACK, MODEL, PROJECT_DIR, free_port, python, wait_until_answering

INSTANT = "instant-model"
MARK = re.compile(r"mk\d+x")


def chunks(words: int) -> list[str]:
    """The reply's chunks: a sentence per word, in two chunks each."""
    return [piece for i in range(words) for piece in (f" W{i}" if i else "W0", " here.")]


def releasing_chunk(text: str, words: int) -> int | None:
    """The index of the chunk whose arrival let a chat's cleaned reply give out ``text`` (a
    sentence is given out when the next one starts; the last one at the end)."""
    found = re.findall(r"W(\d+) here\.", text)
    if not found:
        return None
    return min(2 * int(found[-1]) + 2, 2 * words - 1)


def serve_runtime(port: int, words: int, first_delay: float, chunk_delay: float) -> None:
    from aiohttp import web

    sent: dict[str, list[float]] = {}

    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        chat = request.path == "/api/chat"
        prompt = json.dumps(body.get("messages")) if chat else body.get("prompt", "")
        mark = (MARK.findall(prompt) or ["none"])[-1]

        def line(text: str, done: bool = False) -> bytes:
            said = (
                {"message": {"role": "assistant", "content": text}} if chat else {"response": text}
            )
            extra = (
                {"done_reason": "stop", "prompt_eval_count": 9, "eval_count": 2 * words}
                if done
                else {}
            )
            return (
                json.dumps({"model": body["model"], **said, "done": done, **extra}) + "\n"
            ).encode()

        if body["model"] == INSTANT or not body.get("stream", True):
            text = "ok" if body["model"] == INSTANT else "".join(chunks(words))
            return web.Response(body=line(text, done=True), content_type="application/json")
        answer = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await answer.prepare(request)
        await asyncio.sleep(first_delay)
        times = sent.setdefault(mark, [])
        try:
            for i, piece in enumerate(chunks(words)):
                if i and chunk_delay:
                    await asyncio.sleep(chunk_delay)
                await answer.write(line(piece))
                times.append(time.time())
            await answer.write(line("", done=True))
        except ConnectionResetError:  # the caller left (a cancelled job): nothing to say
            pass
        return answer

    async def tags(request: web.Request) -> web.Response:
        return web.json_response({"models": [{"name": m, "model": m} for m in (MODEL, INSTANT)]})

    async def times(request: web.Request) -> web.Response:
        return web.json_response(sent)

    app = web.Application()
    app.add_routes([web.post("/api/generate", generate), web.post("/api/chat", generate)])
    app.add_routes([web.get("/api/tags", tags), web.get("/times", times)])
    web.run_app(app, host=LOOPBACK, port=port, print=None, access_log=None)


@contextlib.contextmanager
def runtime(words: int = 20, first_delay: float = 0.2, chunk_delay: float = 0.05) -> Iterator[str]:
    """The runtime in its own process; yields its URL."""
    port = free_port()
    args = ["-m", "bench.stream_runtime", str(port), str(words), str(first_delay), str(chunk_delay)]
    process = subprocess.Popen([python(), *args], cwd=PROJECT_DIR, stdout=subprocess.DEVNULL)
    try:
        wait_until_answering(f"http://{LOOPBACK}:{port}/api/tags", process=process)
        yield f"http://{LOOPBACK}:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def chunk_times(runtime_url: str) -> dict[str, list[float]]:
    with urllib.request.urlopen(f"{runtime_url}/times") as answer:
        return json.load(answer)


if __name__ == "__main__":
    port, words, first, chunk = sys.argv[1:5]
    serve_runtime(int(port), int(words), float(first), float(chunk))
