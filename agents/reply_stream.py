"""The reply cleaning of ``agents.replies`` on a reply that is still being generated.

A client watching a chat's tokens must never see text that the stored reply then drops.
:class:`ReplyStream` is fed the model's raw text as it arrives and gives out only the part
of the cleaned reply that no later text can change; :meth:`ReplyStream.finish` gives the
rest. What it gave out, put together, is :func:`~agents.replies.clean_reply` of the whole
text.

What is held back, and why (each rule of the cleaning decides on a part of the text once
that part is complete):
* a line whose start is not yet decided: it may become an invented turn (``User:``), a
  speaker's turn in a transcript, the reply's own label, or a bullet; and a line that
  starts as such a turn, until it ends;
* a run of bullet lines at the end (and what follows): a tool line after them would drop
  them too;
* the rest of the last line after its last complete sentence (but for its words more than
  six from the end once it has ten), and from where an invented list may start in it
  (`` - name:``): a tool or frame marker later in the line cuts the line from the
  sentence that holds it, or from the marker (of six words at most) after the sentence's
  first few words;
* a reply that starts with a quote, until a quote inside it shows it is not one quoted
  whole;
* a sentence being written whose words so far begin an earlier sentence: it may end as
  that sentence again, which the cleaning cuts (a loop);
* with a ``rewrite`` of the reply's sentences (the agent's, which it applies to what it
  stores too), any sentence until it is complete: only a complete sentence can be
  rewritten.
"""

import logging
import re
from collections.abc import Callable
from dataclasses import replace

from agents.replies import (
    _BULLET,
    _FRAME_ECHO,
    _INVENTED_TURN,
    _OWN_LABEL,
    _QUOTES,
    _SENTENCE_END,
    _SENTENCE_OR_LINE_END,
    _SPEAKER_TURN,
    _TOOL_LINE,
    MARKER_TAKES_WORDS,
    CleanReply,
    clauses,
    clean_lines,
    clean_reply,
    sentences,
    words_of,
)

logger = logging.getLogger(__name__)

# Where an invented list may start inside a line (``_INLINE_BULLET`` once complete).
_INLINE_START = re.compile(r"\s[-*•]")
# A complete word (a space follows it), and the most words a marker has.
_WORD = re.compile(r"\S+(?=\s)")
_MARKER_WORDS = 6
# The characters of every label the cleaning looks for at a line's start.
_LABEL_CHARS = re.compile(r"[\w'.\- \t]*")


def _start_decided(line: str) -> bool:
    """Whether the rules that look at a line's start have all the text they need."""
    stripped = line.lstrip()
    if _OWN_LABEL.match(stripped):  # what follows the reply's own label is its first line
        stripped = _OWN_LABEL.sub("", stripped, count=1)
    if not stripped or stripped[0] in "-*•":
        return False
    label, colon, rest = stripped.partition(":")
    if colon:
        return bool(rest.strip()) or not _LABEL_CHARS.fullmatch(label)
    return not _LABEL_CHARS.fullmatch(stripped) or len(stripped.split()) >= 3


def _is_bullet(line: str) -> bool:
    """A bullet line (after the reply's own label, which the first line may carry)."""
    return bool(_BULLET.match(line) or _BULLET.match(_OWN_LABEL.sub("", line.lstrip(), count=1)))


class ReplyStream:
    """Cleans a reply as it streams: :meth:`feed` the raw deltas, show what it returns."""

    def __init__(
        self, *, transcript: bool = False, rewrite: Callable[[str], str] | None = None
    ) -> None:
        self.transcript = transcript
        self.rewrite = rewrite
        self.raw = ""
        self.sent = ""

    def feed(self, delta: str) -> str:
        """Takes a raw delta; returns the text that may be shown now (possibly empty)."""
        self.add(delta)
        return self.take()

    def add(self, delta: str) -> None:
        """Takes a raw delta without deciding anything yet (:meth:`take` does, once for
        all the deltas added since: the cleaning reads the whole text each time)."""
        self.raw += delta

    def take(self) -> str:
        """The text that may be shown now and was not yet (possibly empty)."""
        safe = self._safe()
        if len(safe) <= len(self.sent) or not safe.startswith(self.sent):
            return ""
        new, self.sent = safe[len(self.sent) :], safe
        return new

    def finish(self) -> tuple[str, CleanReply]:
        """The text still to show, and the whole cleaned reply (what :meth:`feed` gave out
        followed by that text)."""
        final = clean_reply(self.raw, transcript=self.transcript)
        if self.rewrite is not None:
            final = replace(final, text=self.rewrite(final.text))
        if not final.text.startswith(self.sent):  # the rules above are meant to prevent it
            logger.error("A streamed reply was cleaned differently once complete")
            return "", final
        rest, self.sent = final.text[len(self.sent) :], final.text
        return rest, final

    def _safe(self) -> str:
        text = clean_lines(self.raw[: self._decided_end()], [], transcript=self.transcript)
        if text and text[0] in _QUOTES:
            inner = text[1:-1]
            if text[0] not in inner and _QUOTES[text[0]] not in inner:
                return ""  # it may yet be one quote, whose marks are removed
        if self.rewrite is not None:
            # The safe text ends where the raw text is decided: a sentence that ends there
            # with its mark is complete (the cleaning took the space after it).
            ends = [m.end() for m in _SENTENCE_OR_LINE_END.finditer(text + " ")]
            return self.rewrite(text[: min(max(ends, default=0), len(text))].rstrip())
        return text

    def _decided_end(self) -> int:
        """Where the raw text stops being decided (see the module)."""
        lines = self.raw.splitlines(keepends=True)
        tail = (
            lines.pop()
            if lines and lines[-1] == lines[-1].rstrip("\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029")
            else ""
        )
        held_bullet, kept = False, len(lines)
        while kept and (not lines[kept - 1].strip() or _is_bullet(lines[kept - 1])):
            held_bullet = held_bullet or bool(lines[kept - 1].strip())
            kept -= 1
        end = sum(len(line) for line in lines[:kept])
        if held_bullet or not _start_decided(tail):
            return end
        if _INVENTED_TURN.match(tail) or (self.transcript and _SPEAKER_TURN.match(tail)):
            # A turn's label ("Hello. Marta: yes" reads as Marta's turn): the cleaning may
            # drop the whole line, and a cut at a sentence inside its label would not.
            return end
        start = len(self.raw) - len(tail)
        found = _INLINE_START.search(tail)
        limit = found.start() if found else len(tail)
        if _TOOL_LINE.search(tail, 0, limit) or _FRAME_ECHO.search(tail, 0, limit):
            return start + limit  # the line's fate is sealed: the cleaning sees why
        ends = [m.end() for m in _SENTENCE_END.finditer(tail, 0, limit)]
        sentence = ends[-1] if ends else 0
        # The sentence being written: a marker still to come cuts it at the marker, or from
        # its start while it is within the first few words (agents.replies._head_end).
        words = [m.end() for m in _WORD.finditer(tail, sentence, limit)]
        if words and self._may_repeat(start + sentence, start + words[-1]):
            return start + sentence
        if len(words) > MARKER_TAKES_WORDS + _MARKER_WORDS:
            return self._before_a_repeat(start + sentence, start + limit, start + words[-1])
        return start + sentence if ends else end

    def _before_a_repeat(self, begun: int, limit: int, written: int) -> int:
        """Where a long sentence begun at ``begun``, its complete words written up to
        ``written``, is decided: ``_MARKER_WORDS`` words before its end, or the start of
        the clause there if it starts as an earlier clause does (it may be a loop's)."""
        words = [m.end() for m in _WORD.finditer(self.raw, begun, limit)]
        end = words[-1 - _MARKER_WORDS]
        for start, clause_end in clauses(self.raw, begun, limit):
            if start < end <= clause_end and self._may_repeat(
                start, min(clause_end, written), clause=True
            ):
                return start
        return end

    def _may_repeat(self, begun: int, written: int, *, clause: bool = False) -> bool:
        """Whether the sentence (with ``clause``, the clause: ``agents.replies.clauses``)
        begun at ``begun``, its complete words written up to ``written``, starts as an
        earlier one of the raw text does."""
        so_far = words_of(self.raw[begun:written])
        earlier = sentences(self.raw[:begun])
        if clause:
            earlier = [span for sentence in earlier for span in clauses(self.raw, *sentence)]
        return bool(so_far) and any(
            _starts_as(so_far, words_of(self.raw[start:end])) for start, end in earlier
        )


def _starts_as(so_far: tuple[str, ...], earlier: tuple[str, ...]) -> bool:
    """Whether words written so far begin as ``earlier`` does, or hold all of it and go
    on: a marker still to come may cut what follows (", a source of joy, a source of
    joyThe assistant can use tools" is cut to the loop ", a source of joy" said twice),
    its last word glued to the next ("joyThe")."""
    if len(so_far) <= len(earlier):
        return earlier[: len(so_far)] == so_far
    return bool(earlier) and (
        so_far[: len(earlier) - 1] == earlier[:-1]
        and so_far[len(earlier) - 1].startswith(earlier[-1])
    )
