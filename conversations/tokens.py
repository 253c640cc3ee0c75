"""Token counts: the runtime's tokenizer where it has one, else a documented heuristic.

A message is counted once, when it is stored (``Message.token_estimate``); the context
builder only adds stored counts, so building a prompt costs no tokenizer call.

The heuristic is meant to over-count, never to under-count, for the small models the
service runs (SentencePiece/BPE vocabularies of 32k-260k entries):

* every run of ASCII letters costs ``ceil(length / 4)`` tokens (common English words
  are one token, long or rare ones several);
* every digit costs 1 token (these vocabularies split numbers into single digits);
* every other visible ASCII character (punctuation, symbols) costs 1 token;
* every non-ASCII character costs 1 token (CJK, emoji and accented letters);
* every newline costs 1 token; spaces and tabs are free (they merge into the next token).

So a text of ``n`` whitespace-separated words never counts fewer than ``n`` tokens, and
the count of a concatenation is the sum of the counts of its parts plus its newlines,
which lets the builder add counts of pieces and stay within a budget. English prose comes
out above a real tokenizer's count: the safe side for a budget.
"""

import math
import re

from gateway import runtime

_RUNS = re.compile(r"[A-Za-z]+|[0-9]|\n|[^\sA-Za-z0-9]")


def estimate(text: str) -> int:
    """The heuristic count described above (no I/O)."""
    total = 0
    for run in _RUNS.findall(text):
        first = run[0]
        if "a" <= first.lower() <= "z":
            total += math.ceil(len(run) / 4)
        else:
            total += 1
    return total


def count(model: str, text: str) -> int:
    """Tokens of ``text`` for ``model``: its runtime's tokenizer, else :func:`estimate`."""
    if not text:
        return 0
    counted = runtime.count_tokens(model, text)
    return estimate(text) if counted is None else counted


def fit_text(text: str, limit: int) -> str:
    """``text`` cut at a word boundary so that its :func:`estimate` is at most ``limit``."""
    if estimate(text) <= limit:
        return text
    words = text.split()
    low, high = 0, len(words)
    while low < high:  # the longest prefix of words that fits
        middle = (low + high + 1) // 2
        if estimate(" ".join(words[:middle]) + " …") <= limit:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low]) + " …" if low else ""
