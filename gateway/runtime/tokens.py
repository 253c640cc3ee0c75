"""Token counting by the runtime's own tokenizer.

Runtimes that have a tokenizer endpoint count a text exactly for the model they serve:
Ollama ``POST /api/tokenize``, llama.cpp's server ``POST /tokenize`` and llama-cpp-python's
``POST /extras/tokenize/count``. Which one an endpoint has (or that it has none) is learnt
on first use and kept per endpoint for TOKENIZER_MEMORY_SECONDS, so a runtime without one
costs one probe, not one per text. A failed call (runtime down, model unknown) counts
None, and callers fall back to their heuristic.
"""

import json
import time

from core.exceptions import RuntimeFailure
from gateway import protocols, runtime_errors
from gateway.routing import Endpoint
from gateway.runtime import client

TOKENIZER_MEMORY_SECONDS = 600.0
# Counting is on the request path of a chat: it must not wait as long as a generation.
_TOKENIZE_READ_TIMEOUT = 5.0
_NO_TOKENIZER = ""  # remembered path meaning "this endpoint has none"
_tokenizers: dict[tuple[str, str], tuple[str, float]] = {}


def _paths(key: tuple[str, str], api: str) -> tuple[str, ...]:
    remembered = _tokenizers.get(key)
    if remembered and remembered[1] > time.monotonic():
        return (remembered[0],) if remembered[0] else ()
    return protocols.TOKENIZE_PATHS.get(api, ())


async def acount_tokens_at(endpoint: Endpoint, model: str, text: str) -> int | None:
    """The number of tokens of ``text`` by ``model`` at ``endpoint``'s tokenizer, or None
    when it has no tokenizer endpoint or cannot be asked now."""
    key = (endpoint.base_url, endpoint.api)
    for path in _paths(key, endpoint.api):
        body = protocols.tokenize_body(path, endpoint.model_name(model), text)
        try:
            status, answer = await client.answer(
                endpoint, "POST", f"{endpoint.base_url}{path}", body, read=_TOKENIZE_READ_TIMEOUT
            )
        except RuntimeFailure:
            return None  # down for now: nothing learnt about its tokenizer
        if status in (404, 405, 501):
            if runtime_errors.is_unknown_model(status, runtime_errors.error_message(answer)):
                return None  # the path exists; the model does not
            continue  # not this runtime's tokenizer path
        if status != 200:
            return None
        try:
            count = protocols.token_count(json.loads(answer))
        except ValueError:
            count = None
        if count is not None:
            _tokenizers[key] = (path, time.monotonic() + TOKENIZER_MEMORY_SECONDS)
        return count
    _tokenizers[key] = (_NO_TOKENIZER, time.monotonic() + TOKENIZER_MEMORY_SECONDS)
    return None


def forget_tokenizers() -> None:
    """Forgets which endpoints have a tokenizer (after a runtime changed, and in tests)."""
    _tokenizers.clear()
