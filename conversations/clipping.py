"""Clipping a message for a prompt (never in storage).

A message too long for the room left is cut rather than left out: a window of its words
(around the first word of ``focus``, the question's keywords, when it has one; else from
its start) plus a visible mark that says it is cut, about how many tokens are missing
and, when the prompt offers ``read_history``, how that tool loads it whole.
"""

import dataclasses
import re
from collections.abc import Sequence

from conversations.history import Item
from conversations.tokens import estimate

# Less than this much of a message is not worth showing: it is left out instead.
MIN_CLIP_TOKENS = 24
# Words kept before the first focus word, so that the window starts with some context.
LEAD_WORDS = 12


def clip_mark(missing: int, seq: int, *, tool: bool = True) -> str:
    if not tool:  # no note that points to a tool the prompt does not offer
        return f"[message cut: about {missing} tokens not shown]"
    return (
        f"[message cut: about {missing} tokens not shown; read_history with "
        f'{{"before_seq": {seq + 1}, "limit": 1}} loads it whole]'
    )


def _start(words: list[str], focus: Sequence[str]) -> int:
    """The index of the first word holding a focus word, less ``LEAD_WORDS``."""
    if focus:
        pattern = re.compile("|".join(re.escape(word) for word in focus), re.IGNORECASE)
        for index, word in enumerate(words):
            if pattern.search(word):
                return max(0, index - LEAD_WORDS)
    return 0


def _fit(words: list[str], limit: int) -> int:
    """How many leading ``words`` fit in ``limit`` tokens by the heuristic."""
    low, high = 0, len(words)
    while low < high:
        middle = (low + high + 1) // 2
        if estimate(" ".join(words[:middle])) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def clip(
    item: Item,
    limit: int,
    *,
    numbered: bool,
    focus: Sequence[str] = (),
    tool: bool = True,
    least: int = MIN_CLIP_TOKENS,
) -> Item | None:
    """A copy of ``item`` whose ``cost(numbered=...)`` is at most ``limit``, cut with a
    visible mark (naming ``read_history`` when ``tool``: the prompt offers it); None when
    less than ``least`` tokens of it would remain."""
    mark_cost = (
        estimate(clip_mark(10 * item.tokens + 10, item.seq, tool=tool)) + 2
    )  # '… ' and a space
    room = limit - item.label_cost(numbered=numbered) - mark_cost
    if room < least:
        return None
    words = item.content.split()
    start = _start(words, focus)
    if _fit(words[start:], room) < 1:
        start = 0
    count = _fit(words[start:], room)
    if count < 1:
        return None
    shown = " ".join(words[start : start + count])
    missing = max(1, item.tokens - estimate(shown))
    text = ("… " if start else "") + shown + " " + clip_mark(missing, item.seq, tool=tool)
    return dataclasses.replace(item, content=text, tokens=estimate(text), clipped_from=item.tokens)
