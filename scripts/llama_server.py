"""llama.cpp's own HTTP server (``llama-server``), as the ``xllamacpp`` wheel ships it.

    python scripts/llama_server.py --model FILE.gguf --alias NAME --port 8089

``xllamacpp`` (Xorbits, MIT) is llama.cpp compiled into a prebuilt wheel: no compiler is
needed to install it. Its ``Server`` starts llama.cpp's C++ server in this process (the
same OpenAI-compatible endpoints as ``llama-server``: ``/v1/completions``,
``/v1/chat/completions``, ``/v1/models``, ``/tokenize``) and returns once the model is
loaded and the server listens. This script keeps the process alive until SIGTERM or
SIGINT, then lets the server shut down. ``scripts/embedded_runtime.py`` builds its
command line; the flags mean what that module's ``server_command`` documents.

``--transcript-chat`` is for a base model, which was never taught chat turns: the GGUF's
template (ChatML's ``<|im_start|>`` markers, or none) makes it echo the markers until the
token limit. With it, ``/v1/chat/completions`` writes the messages as the plain
transcript the agents use (``User: ...`` / ``Assistant: ...``, a system message first),
and a reply ends where the model starts another turn: those stops are the server's
default for a request that sends no ``stop`` of its own (also a raw prompt's).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

# Chat messages as a plain transcript (Jinja, as llama.cpp's server renders templates).
TRANSCRIPT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message.role == 'system' -%}{{ message.content + '\n\n' }}"
    "{%- elif message.role == 'user' -%}{{ 'User: ' + message.content + '\n' }}"
    "{%- else -%}{{ 'Assistant: ' + message.content + '\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ 'Assistant:' }}{%- endif -%}"
)
# Where a transcript reply ends when the request names no stop: where the model starts
# another turn, the user's or its own.
TRANSCRIPT_STOPS = ["\nUser:", "\nAssistant:"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--alias", required=True, help="the name the model is served under")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ctx", type=int, default=2048, help="context size in tokens")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--transcript-chat", action="store_true", help="chat as a plain transcript (a base model)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx
    # One request at a time, in arrival order: a second one waits, none is cut off.
    params.n_parallel = 1
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.verbosity = 1  # errors only: a request is not worth a line
    params.ui = False  # the API only, no chat page
    if args.transcript_chat:
        params.chat_template = TRANSCRIPT_TEMPLATE
        params.antiprompt = TRANSCRIPT_STOPS
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server = xllamacpp.Server(params)  # returns once the model is loaded and it listens
    stop.wait()
    del server  # its destructor stops the HTTP server and the model's loop
    return 0


if __name__ == "__main__":
    sys.exit(main())
