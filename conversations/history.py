"""The messages the context builder works with: :class:`Item` (one message with its
stored token count) and :class:`History` (the newest messages of a conversation, read a
page at a time)."""

import functools
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Item:
    """A message as the builder sees it."""

    seq: int
    role: str
    content: str
    tokens: int
    # The message's own token count when this is a clipped copy of it, else 0.
    clipped_from: int = 0

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Item":
        tokens = row.get("token_estimate") or row.get("tokens") or estimate(row["content"])
        return cls(seq=row["seq"], role=row["role"], content=row["content"], tokens=tokens)

    def line(self, *, numbered: bool = False) -> str:
        prefix = f"#{self.seq} {label(self.role)}" if numbered else label(self.role)
        return f"{prefix} {self.content}"

    def cost(self, *, numbered: bool = False) -> int:
        """Its tokens with its label and newline; ``numbered``: with ``#<seq> `` too."""
        return self.tokens + self.label_cost(numbered=numbered)

    def label_cost(self, *, numbered: bool = False) -> int:
        cost = label_cost(self.role) + 1  # +1: its newline
        if numbered:  # '#' and one token per digit
            cost += 1 + len(str(self.seq))
        return cost


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
