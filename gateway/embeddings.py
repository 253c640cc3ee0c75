"""The one module that turns texts into embedding vectors, whichever backend serves them.

``EMBEDDING_BACKEND`` chooses:

* ``local`` (the default): all-MiniLM-L6-v2, int8 ONNX, run in this process by
  onnxruntime (``gateway.local_embedder``); nothing is fetched at run time.
* ``runtime``: the model runtime's own endpoint, Ollama ``POST /api/embed`` or the
  OpenAI-compatible ``POST /v1/embeddings``, for ``EMBEDDING_MODEL``, through the same
  routing (``ModelRoute``, ``MODEL_RUNTIME_URL``) and HTTP session as generation.
* ``none``: no embeddings; search is full text only.

Every vector comes back as float32, L2-normalised, with :func:`model_id`, the name
stored beside it: vectors of two different models are never compared. Failures raise
:class:`EmbeddingUnavailable`, and callers fall back to full text.
"""

import threading
from collections import OrderedDict

import numpy as np
from django.conf import settings

from core.errors import error_id
from core.exceptions import RuntimeFailure, UnknownModel
from gateway import protocols, routing, runtime, runtime_errors

_CACHE_SIZE = 256


class EmbeddingUnavailable(Exception):
    """No vector could be had: the backend is ``none``, down, or failed."""


def backend() -> str:
    return settings.EMBEDDING_BACKEND


def model_id() -> str | None:
    """The name stored with each vector (backend and model), or None for ``none``."""
    if backend() == "local":
        from gateway import local_embedder

        return f"local:{local_embedder.MODEL_NAME}"
    if backend() == "runtime":
        return f"runtime:{settings.EMBEDDING_MODEL}"
    return None


def _normalised(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def _reason(err: RuntimeFailure) -> str:
    said = err.details.get("runtime_message")
    return f"{error_id(err)}: {err.message}" + (f" ({said})" if said else "")


def runtime_embed(model: str, texts: list[str]) -> tuple[np.ndarray, int | None]:
    """The runtime's vectors of ``texts`` by ``model`` (not normalised) and the tokens it
    says it read; raises the RuntimeFailure of the last endpoint tried."""
    last: RuntimeFailure | None = None
    for endpoint in routing.endpoints_for(model):
        path, body = protocols.embed_request(endpoint, model, texts)
        try:
            data = runtime.post_json(
                endpoint, path, body, model=model, read_timeout=settings.EMBEDDING_TIMEOUT
            )
        except RuntimeFailure as err:
            if not isinstance(err, runtime.FAILOVER_ERRORS):
                raise
            routing.mark_failed(endpoint)
            last = err
            continue
        try:
            vectors = protocols.parse_embeddings(endpoint, data, len(texts))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise runtime_errors.unreadable(endpoint.name) from exc
        return np.asarray(vectors, dtype=np.float32), protocols.embedding_tokens(endpoint, data)
    assert last is not None
    raise last


def _runtime_embed(texts: list[str]) -> np.ndarray:
    try:
        return runtime_embed(settings.EMBEDDING_MODEL, texts)[0]
    except RuntimeFailure as err:
        raise EmbeddingUnavailable(_reason(err)) from err


def _embed_uncached(texts: list[str]) -> np.ndarray:
    name = backend()
    if name == "none":
        raise EmbeddingUnavailable("EMBEDDING_BACKEND is none")
    if name == "runtime":
        return _normalised(_runtime_embed(texts))
    from gateway import local_embedder

    try:
        return _normalised(local_embedder.embed(texts))
    except Exception as exc:  # a broken install or model file: search goes on without it
        raise EmbeddingUnavailable(f"local embedder failed: {type(exc).__name__}: {exc}") from exc


def _batches(texts: list[str], order: list[int]) -> list[list[int]]:
    """``order`` (indexes of ``texts``, shortest first) cut into batches of at most
    ``EMBEDDING_BATCH_SIZE`` texts of similar length: a batch is padded to its longest text,
    so a text more than twice as long as the batch's first starts a new one (a chat's
    question and its longer reply cost less as two runs than as one padded batch)."""
    batches: list[list[int]] = []
    for index in order:
        batch = batches[-1] if batches else None
        if (
            batch is None
            or len(batch) >= settings.EMBEDDING_BATCH_SIZE
            or len(texts[index]) > 2 * max(len(texts[batch[0]]), 8)
        ):
            batches.append([index])
        else:
            batch.append(index)
    return batches


def embed(texts: list[str]) -> np.ndarray:
    """The vectors of ``texts`` (one row each), by the configured backend, in batches of
    ``EMBEDDING_BATCH_SIZE``. Raises EmbeddingUnavailable."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
    parts = [_embed_uncached([texts[index] for index in batch]) for batch in _batches(texts, order)]
    stacked = np.vstack(parts)
    vectors = np.empty_like(stacked)
    vectors[order] = stacked
    return vectors


# A question is embedded when its message is stored and again as the search's query:
# the few most recent texts are kept per process so that the second time is free.
_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_cache_lock = threading.Lock()


def embed_query(text: str) -> np.ndarray:
    """One text's vector, through a small per-process cache. Raises EmbeddingUnavailable."""
    return embed_kept([text])[0]


def embed_kept(texts: list[str]) -> np.ndarray:
    """:func:`embed` through :func:`embed_query`'s cache: the texts it does not keep are
    embedded in one call (a text's vector does not depend on its batch) and kept. Raises
    EmbeddingUnavailable."""
    if not texts:
        return embed(texts)
    model = model_id() or ""
    found: dict[str, np.ndarray] = {}
    with _cache_lock:
        for text in texts:
            if (model, text) in _cache:
                _cache.move_to_end((model, text))
                found[text] = _cache[(model, text)]
    missing = [text for text in dict.fromkeys(texts) if text not in found]
    for text, vector in zip(missing, embed(missing) if missing else [], strict=True):
        remember(text, vector)
        found[text] = vector
    return np.vstack([found[text] for text in texts])


def remember(text: str, vector: np.ndarray) -> None:
    """Keeps ``text``'s vector for :func:`embed_query`."""
    with _cache_lock:
        _cache[(model_id() or "", text)] = vector
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def forget() -> None:
    """Empties the query cache (after a backend or model change, and in tests)."""
    with _cache_lock:
        _cache.clear()


# --- Embeddings as a model of the OpenAI-compatible face ----------------------------------

# The in-process embedder's name on ``/v1/``.
LOCAL_MODEL = "all-minilm-l6-v2"


def served_models() -> list[str]:
    """The embedding models clients may name: the in-process one, and the runtime's
    ``EMBEDDING_MODEL`` when the runtime serves embeddings."""
    return [LOCAL_MODEL] + ([settings.EMBEDDING_MODEL] if backend() == "runtime" else [])


def embed_with(model: str, texts: list[str]) -> tuple[np.ndarray, int]:
    """The L2-normalised vectors of ``texts`` by one of :func:`served_models` and the
    tokens read (raises the runtime's failure, or UnknownModel for another name)."""
    if model == LOCAL_MODEL:
        from gateway import local_embedder

        return _normalised(local_embedder.embed(texts)), local_embedder.token_count(texts)
    if model not in served_models():
        raise UnknownModel(model)
    vectors, tokens = runtime_embed(model, texts)
    return _normalised(vectors), tokens if tokens is not None else sum(
        len(text.split()) for text in texts
    )


def dimension(model: str) -> int | None:
    """The length of ``model``'s vectors where it is known without a call."""
    if model == LOCAL_MODEL:
        from gateway import local_embedder

        return local_embedder.DIMENSION
    return None
