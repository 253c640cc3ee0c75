"""Cleaning a model's reply before it is stored.

Small models, base models above all, keep writing after their answer: a ``User:`` turn
they invent, a copy of a tool list they once saw, the prompt's own headers, the same
sentence again and again until the token limit; and some wrap the answer in quotes. None
of that is the reply, and stored it would be fed back into every later prompt.
:func:`clean_reply` removes it; the raw text stays in the model-call step. A reply that
is empty once cleaned is treated as an empty answer.
"""

import itertools
import re
from dataclasses import dataclass, field

# A line where the model starts a turn of its own: everything from it on is invented.
_INVENTED_TURN = re.compile(
    r"^\s*(?:user|assistant|system|human|ai|q|question|task|tool call|tool result)\s*:",
    re.IGNORECASE,
)
# A base model continuing a transcript also invents turns of other speakers, named after
# someone in the conversation ("Marta: Yes, ..."): a line that starts with a label of one
# or two capitalised words, after the first line of a transcript reply.
_SPEAKER_TURN = re.compile(r"^\s*[A-Z][\w'.-]*(?: [A-Z][\w'.-]*)?:[ \t]+\S")
# The label of its own turn, which some models repeat at the start.
_OWN_LABEL = re.compile(r"^\s*(?:assistant|ai|answer)\s*:\s*", re.IGNORECASE)
# A line of an invented tool list or tool call.
_TOOL_LINE = re.compile(
    r"\barguments\s*:|\{\s*\"tool\"\s*:|^\s*[-*•]\s*[\w.]+\s*:.*\{.*\}\s*$", re.IGNORECASE
)
# A bullet of the shape ``- name: description``, dropped when it touches a tool line.
_BULLET = re.compile(r"^\s*[-*•]\s*[\w. ]{1,40}:\s")
# An invented list that starts in the middle of a line of real text.
_INLINE_BULLET = re.compile(r"\s[-*•]\s*[\w.]+\s*:\s")
# Lines of the prompt's frame that a model copies.
_FRAME_ECHO = re.compile(
    r"the assistant can use tools|to use one, the assistant answers|"
    r"earlier messages are not shown|messages found in the earlier history|"
    r"^\s*recent messages:\s*$|^\s*earlier in the conversation:\s*$|"
    r"^\s*summary of the conversation up to|\[message cut: about",
    re.IGNORECASE,
)
_QUOTES = {'"': '"', "“": "”", "'": "'", "«": "»", "„": "“"}
# Where a sentence ends inside a line: a tool or frame marker in a line that does not
# start as a bullet cuts the line from the start of the sentence that holds it (or from the
# marker itself, after more than MARKER_TAKES_WORDS words), so that what came before it,
# which a stream may have shown, stays.
#: How many words before a marker in its sentence the marker takes along.
MARKER_TAKES_WORDS = 3
_SENTENCE_END = re.compile("[.!?\u2026][\"'\u201d\u2019)\\]]*\\s+")
# Where a sentence ends for the loop rule: the end of a sentence, or of a line.
_SENTENCE_OR_LINE_END = re.compile(f"{_SENTENCE_END.pattern}|\n+")
# A sentence, or a clause of one, of at least this many words said again is a loop (a
# short "Yes." may repeat).
LOOP_WORDS = 3
# Where a clause starts inside a sentence, for the loop rule: at a comma or semicolon.
_CLAUSE_START = re.compile(r"[,;](?=\s)")


@dataclass
class CleanReply:
    text: str
    removed: list[str] = field(default_factory=list)  # what was removed, by kind


def _cut_invented_turn(lines: list[str], removed: list[str], *, transcript: bool) -> list[str]:
    for index, line in enumerate(lines):
        if _INVENTED_TURN.match(line) or (transcript and index and _SPEAKER_TURN.match(line)):
            removed.append("invented_turn")
            return lines[:index]
    return lines


def _drop_tool_lines(lines: list[str], removed: list[str]) -> list[str]:
    marked = {i for i, line in enumerate(lines) if _TOOL_LINE.search(line)}
    marked |= {i for i, line in enumerate(lines) if _FRAME_ECHO.search(line)}
    if not marked:
        return lines
    grown = True
    while grown:  # bullets next to a tool line belong to the same invented list
        extra = {
            j
            for i in marked
            for j in (i - 1, i + 1)
            if 0 <= j < len(lines) and j not in marked and _BULLET.match(lines[j])
        }
        marked |= extra
        grown = bool(extra)
    removed.append("tool_list")
    kept = []
    for index, line in enumerate(lines):
        if index not in marked:
            kept.append(line)
            continue
        head = line[: _head_end(line)]
        if head.strip() and not (_TOOL_LINE.search(head) or _FRAME_ECHO.search(head)):
            kept.append(head)
    return kept


def _head_end(line: str) -> int:
    """Where the invented part of a marked line starts: at an invented list that starts in
    the line ("Hi there - camera: ... Arguments: ..."), or at the sentence holding the first
    marker; a line that starts as a bullet is invented whole."""
    cuts = []
    inline = _INLINE_BULLET.search(line)
    if inline:
        cuts.append(inline.start())
    markers = [m.start() for m in (_TOOL_LINE.search(line), _FRAME_ECHO.search(line)) if m]
    if markers and not _BULLET.match(line):
        first = min(markers)
        ends = [m.end() for m in _SENTENCE_END.finditer(line, 0, first)]
        sentence = ends[-1] if ends else 0
        # A marker after a few words of its sentence takes them along ("(12 earlier
        # messages are not shown)"); after more, the words before it stay.
        cuts.append(sentence if len(line[sentence:first].split()) <= MARKER_TAKES_WORDS else first)
    return min(cuts) if cuts else 0


def _unquote(text: str, removed: list[str]) -> str:
    if len(text) >= 2 and _QUOTES.get(text[0]) == text[-1]:
        inner = text[1:-1]
        if text[0] not in inner and text[-1] not in inner:
            removed.append("quotes")
            return inner.strip()
    return text


def clean_reply(text: str, *, transcript: bool = False) -> CleanReply:
    """The reply without what the model invented after or around it (see the module).
    ``transcript``: the reply continues a transcript (a base model's), where a later line
    in someone's name is an invented turn too."""
    removed: list[str] = []
    text = clean_lines(text, removed, transcript=transcript)
    return CleanReply(text=_unquote(text, removed), removed=removed)


def clean_lines(text: str, removed: list[str], *, transcript: bool) -> str:
    """:func:`clean_reply` but for the quotes around the whole reply."""
    text = text.strip()
    if _OWN_LABEL.match(text):
        removed.append("role_label")
        text = _OWN_LABEL.sub("", text, count=1)
    lines = _cut_invented_turn(text.splitlines(), removed, transcript=transcript)
    lines = _drop_tool_lines(lines, removed)
    text = "\n".join(line.rstrip() for line in lines).strip()
    return _cut_loop(re.sub(r"\n{3,}", "\n\n", text), removed)


def words_of(sentence: str) -> tuple[str, ...]:
    """A sentence's words, lowercase: what the loop rule compares."""
    return tuple(re.findall(r"\w+", sentence.lower()))


def sentences(text: str) -> list[tuple[int, int]]:
    """The spans of ``text``'s sentences (the last one ends with the text)."""
    spans, start = [], 0
    for end in _SENTENCE_OR_LINE_END.finditer(text):
        spans.append((start, end.end()))
        start = end.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def clauses(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The spans of the clauses of the sentence at ``start:end`` of ``text``: it is cut
    before each comma or semicolon (a clause holds the mark that opens it)."""
    bounds = [start, *(m.start() for m in _CLAUSE_START.finditer(text, start, end)), end]
    return list(itertools.pairwise(bounds))


def _cut_loop(text: str, removed: list[str]) -> str:
    """The text up to the first sentence, or clause of a sentence, (of :data:`LOOP_WORDS`
    words or more) that says an earlier one again: a model caught in a loop repeats it
    to the token limit ("a source of joy, a source of hope, a source of joy, ...")."""
    seen: set[tuple[str, ...]] = set()
    seen_clauses: set[tuple[str, ...]] = set()
    for start, end in sentences(text):
        words = words_of(text[start:end])
        if len(words) >= LOOP_WORDS and words in seen:
            removed.append("repeated")
            return text[:start].rstrip()
        seen.add(words)
        for clause_start, clause_end in clauses(text, start, end):
            words = words_of(text[clause_start:clause_end])
            if len(words) >= LOOP_WORDS and words in seen_clauses:
                removed.append("repeated")
                return text[:clause_start].rstrip()
            seen_clauses.add(words)
    return text
