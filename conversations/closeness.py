"""How close in meaning the messages of a chat's context are to the new one, by their stored
vectors, and the sets of them the reply checks read (``conversations.borrowing``,
``conversations.quoting``)."""

from conversations import vectors
from conversations.chat_turn import ChatTurn
from conversations.context import Context
from conversations.told import user_items
from gateway import embeddings

# The messages closest in meaning to the new one, by their vectors: what it may ask about
# (``borrowing.told_about``) when it shares no word with them.
SIMILAR_MESSAGES = 2
SIMILAR_FLOOR = 0.35
# A user's message about as close in meaning to the new one as the closest (within this
# cosine) is one a reply's facts may come from (``relevant_seqs``).
RELEVANT_MARGIN = 0.08
# Below this cosine a message is about something else, however close it is beside the
# others (a long filler turn's words are no answer when the fact is not in the prompt).
RELEVANT_FLOOR = 0.25
# Below this cosine a message that tells the user changed something ("Dan and I moved
# everything about the team lunch.") changed nothing the question asks
# (``outdated.changed_own``).
UNRELATED_FLOOR = 0.2


def closeness(turn: ChatTurn, context: Context) -> dict[int, float]:
    """How close in meaning each of the context's messages is to the new one (cosine of
    the stored vectors), by seq; empty without them."""
    seqs = [item.seq for item in (*context.recent, *context.retrieved)]
    try:
        found = vectors.vectors_of(
            conversation_id=turn.job.conversation_id, seqs=[*seqs, turn.message.seq]
        )
    except embeddings.EmbeddingUnavailable:
        return {}
    own = found.pop(turn.message.seq, None)
    return {} if own is None else {seq: float(own @ vector) for seq, vector in found.items()}


def similar_seqs(scores: dict[int, float]) -> set[int]:
    """The seqs of the messages closest in meaning to the new one (see ``SIMILAR_*``)."""
    scored = sorted(((score, seq) for seq, score in scores.items()), reverse=True)
    return {seq for score, seq in scored[:SIMILAR_MESSAGES] if score >= SIMILAR_FLOOR}


def unrelated_seqs(scores: dict[int, float]) -> set[int]:
    """The seqs of the messages far in meaning from the new one (``UNRELATED_FLOOR``)."""
    return {seq for seq, score in scores.items() if score < UNRELATED_FLOOR}


def far_seqs(scores: dict[int, float]) -> set[int]:
    """The seqs of the messages about something else than the new one (below
    ``RELEVANT_FLOOR``): what a reply that copies them copies from elsewhere
    (``copying.copied_message``)."""
    return {seq for seq, score in scores.items() if score < RELEVANT_FLOOR}


def relevant_seqs(context: Context, scores: dict[int, float]) -> set[int] | None:
    """The user's messages most relevant to the new one (``borrowing.borrowed``'s
    ``relevant``): the closest in meaning and those within ``RELEVANT_MARGIN`` of it, at
    least ``RELEVANT_FLOOR`` (none when the prompt holds nothing on it); None without
    vectors."""
    own = {item.seq: scores[item.seq] for item in user_items(context) if item.seq in scores}
    if not own:
        return None
    floor = max(max(own.values()) - RELEVANT_MARGIN, RELEVANT_FLOOR)
    return {seq for seq, score in own.items() if score >= floor}
