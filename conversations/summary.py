"""The rolling summary of a conversation's older messages.

When the messages that slid out of the prompt's window and are not yet summarised number
``SUMMARY_THRESHOLD`` or more (counted by sequence numbers), the chat job, after storing
its reply, asks the model to fold the oldest of them into the summary: the previous
summary plus as many of those messages as fit in the budget (at most ``SUMMARY_CHUNK``
per job, so a job's cost stays bounded; a long backlog is caught up over later turns).
The summary moves forward with ``summary_until_seq`` and is capped at ``SUMMARY_SHARE``
of the budget, the share the context builder gives it.
"""

from dataclasses import dataclass

from agents.models import AgentProfile
from agents.replies import clean_reply
from conversations import selectors
from conversations.context import (
    LABELS,
    SAFETY_MARGIN,
    SUMMARY_SHARE,
    Context,
    Item,
    summary_block,
    summary_header,
)
from conversations.models import Conversation
from conversations.tokens import estimate, fit_text

SUMMARY_THRESHOLD = 10
SUMMARY_CHUNK = 100
INSTRUCTION = (
    "Below are the summary of a conversation so far and the messages that follow it. "
    "Write an updated summary in a few sentences. Keep names, numbers, facts and "
    "decisions; leave out small talk."
)
ANSWER_CUE = "Updated summary:"
SUMMARY_STOP = ["\nUser:", "\nAssistant:", "\n\n"]


@dataclass
class SummaryRequest:
    prompt: str
    until_seq: int
    messages: int
    max_tokens: int


def summary_limit(profile: AgentProfile) -> int:
    """Tokens a summary may have: its share of the budget, less its header."""
    budget = profile.prompt_budget - SAFETY_MARGIN
    return max(0, int(budget * SUMMARY_SHARE) - estimate(summary_header(10**9)) - 4)


def summary_due(conversation: Conversation, context: Context, own_seq: int) -> bool:
    if context.fits:
        return False
    window_start = context.window_start or own_seq
    unsummarised = min(window_start, own_seq) - 1 - conversation.summary_until_seq
    return unsummarised >= SUMMARY_THRESHOLD


def summary_request(
    *, profile: AgentProfile, conversation: Conversation, before_seq: int
) -> SummaryRequest | None:
    """The prompt that folds the oldest unsummarised messages into the summary, or None
    when there is nothing to fold or the budget cannot hold a single message."""
    budget = profile.prompt_budget - SAFETY_MARGIN
    max_tokens = min(summary_limit(profile), profile.answer_reserve)
    if max_tokens < 8:
        return None
    previous = summary_block(conversation) if conversation.summary else "Summary so far: none."
    fixed = estimate(INSTRUCTION) + estimate(previous) + estimate(ANSWER_CUE) + 6
    rows = selectors.messages_between(
        conversation_id=conversation.pk,
        after_seq=conversation.summary_until_seq,
        before_seq=before_seq,
        limit=SUMMARY_CHUNK,
    )
    items, used = [], fixed
    for item in (Item.from_row(row) for row in rows):
        if used + item.cost() > budget:
            break
        items.append(item)
        used += item.cost()
    if not items:
        return None
    transcript = "\n".join(item.line() for item in items)
    prompt = "\n\n".join([INSTRUCTION, previous, transcript, ANSWER_CUE])
    return SummaryRequest(
        prompt=prompt, until_seq=items[-1].seq, messages=len(items), max_tokens=max_tokens
    )


def clean_summary(text: str, *, limit: int) -> str:
    """The model's summary, cleaned like a reply (``agents.replies``: an invented turn, a
    tool line), stripped of a role label it may start and cut to ``limit``."""
    text = clean_reply(text, transcript=True).text
    for label in (*LABELS.values(), ANSWER_CUE):
        if text.startswith(label):
            text = text[len(label) :].strip()
    return fit_text(text, limit)
