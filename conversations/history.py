"""The messages the context builder works with: :class:`Item` (one message with its
stored token count), :class:`Turn` (one turn of this job's tool exchange) and
:class:`History` (the newest messages of a conversation, read a page at a time)."""

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from conversations import selectors
from conversations.models import Role
from conversations.tokens import estimate

LABELS = {Role.USER: "User:", Role.ASSISTANT: "Assistant:", Role.SYSTEM: "System:"}


def label(role: str) -> str:
    return LABELS.get(role, f"{role.title()}:")


@functools.cache
def label_cost(role: str) -> int:
    return estimate(label(role))


def _when(created_at: str | datetime | None) -> datetime | None:
    if isinstance(created_at, str):
        return datetime.fromisoformat(created_at)
    return created_at


@dataclass(frozen=True)
class Item:
    """A message as the builder sees it."""

    seq: int
    role: str
    content: str
    tokens: int
    # The message's own token count when this is a clipped copy of it, else 0.
    clipped_from: int = 0
    created_at: datetime | None = None
    similarity: float | None = None
    # A retrieved message's time as the prompt shows it ("3 days ago") and its mark
    # ("most recent": the newest of several found about the same thing).
    when: str = ""
    mark: str = ""
    # A retrieved message's group rank (0: the best hit and the messages read with it;
    # -1: a newer hit about the same thing, placed after the best, with its partner; -2:
    # that hit itself, read last).
    rank: int = 0
    # Why a retrieved message came along (``conversations.linked``): the name that
    # reached it, or the seq of the hit it may update.
    via: str = ""
    updates: int | None = None
    # The seq of the newer retrieved message that replaces this one (``arrange``: the
    # same thing said again with another value); such a message is left out of the prompt.
    replaced_by: int | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Item":
        tokens = row.get("token_estimate") or row.get("tokens") or estimate(row["content"])
        return cls(
            seq=row["seq"],
            role=row["role"],
            content=row["content"],
            tokens=tokens,
            created_at=_when(row.get("created_at")),
            similarity=row.get("similarity"),
            via=row.get("via") or "",
            updates=row.get("updates"),
        )

    def tag(self) -> str:
        """A retrieved message's position and time: ``#12 (3 days ago, most recent)``."""
        notes = ", ".join(note for note in (self.when, self.mark) if note)
        return f"#{self.seq} ({notes})" if notes else f"#{self.seq}"

    def line(self, *, numbered: bool = False) -> str:
        prefix = f"{self.tag()} {label(self.role)}" if numbered else label(self.role)
        return f"{prefix} {self.content}"

    def cost(self, *, numbered: bool = False) -> int:
        """Its tokens with its label and newline; ``numbered``: as a retrieved line, with
        its tag and room for a gap mark before it."""
        return self.tokens + self.label_cost(numbered=numbered)

    def label_cost(self, *, numbered: bool = False) -> int:
        cost = label_cost(self.role) + 1  # +1: its newline
        if numbered:
            cost += estimate(self.tag()) + 1 + GAP_COST
        return cost


# The role of a tool's result told to the model: a line of its own in a transcript, a
# user message in chat messages.
TOOL_RESULT = "tool"


@dataclass(frozen=True)
class Turn:
    """One turn of this job's tool exchange, after the new message: the model's tool call
    (``Role.ASSISTANT``, its JSON) or a tool's result told to it (:data:`TOOL_RESULT`)."""

    role: str
    content: str

    def line(self) -> str:
        """The turn as a transcript line (its cost is counted on it)."""
        return self.content if self.role == TOOL_RESULT else f"{label(self.role)} {self.content}"

    def cost(self) -> int:
        return estimate(self.line()) + 1  # +1: its newline


GAP_MARK = "…"
GAP_COST = 2  # the mark and its newline


def retrieved_lines(items: list[Item]) -> list[str]:
    """Retrieved messages as lines, a gap mark between two that are not adjacent."""
    lines: list[str] = []
    for before, item in zip([None, *items], items, strict=False):
        if before is not None and item.seq != before.seq + 1:
            lines.append(GAP_MARK)
        lines.append(item.line(numbered=True))
    return lines


def ago(then: datetime | None, now: datetime) -> str:
    """How long before ``now``, as a person says it."""
    if then is None:
        return ""
    seconds = max(0.0, (now - then).total_seconds())
    for unit, size in (("year", 365 * 86400), ("month", 30 * 86400), ("week", 7 * 86400),
                       ("day", 86400), ("hour", 3600), ("minute", 60)):  # fmt: skip
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count > 1 else ''} ago"
    return "just now"


class History:
    """The messages a chat may show, newest first, read a page at a time when needed:
    those before its own message (later ones belong to later chats)."""

    FIRST_PAGE = 48
    MAX_PAGE = 256

    def __init__(self, conversation_id: str, own_seq: int) -> None:
        self.conversation_id = conversation_id
        self.own_seq = own_seq
        self._items: list[Item] = []
        self._cursor: int | None = own_seq
        self._page = self.FIRST_PAGE
        self.pages_read = 0

    def older_than(self, seq: int) -> int:
        return selectors.messages_older_than(conversation_id=self.conversation_id, seq=seq)

    def _fetch(self) -> None:
        rows = selectors.messages_before(
            conversation_id=self.conversation_id, before_seq=self._cursor, limit=self._page
        )
        self.pages_read += 1
        self._items.extend(Item.from_row(row) for row in rows)
        self._cursor = rows[-1]["seq"] if len(rows) == self._page else None
        self._page = min(self._page * 2, self.MAX_PAGE)

    def take(self, budget: int, *, keep: int = 0) -> tuple[list[Item], bool]:
        """The newest messages whose costs add up to at most ``budget`` (newest first), and
        whether they are the whole visible history. The newest ``keep`` are returned
        whatever they cost (the caller may clip them); then the history is whole only if
        they fit too."""
        used, index = 0, 0
        while True:
            if index == len(self._items):
                if self._cursor is None:
                    return self._items[:index], used <= budget
                self._fetch()
                continue
            cost = self._items[index].cost()
            if used + cost > budget and index >= keep:
                return self._items[:index], False
            used += cost
            index += 1
