"""How the messages the agent retrieved are arranged for a small model to read.

* **Pairs travel together.** A retrieved user message brings the reply after it, and a
  retrieved reply the message before it, whichever of the two ranked: a fact the
  assistant stated is found by the question that asked for it, and the other way round.
  A partner longer than ``PARTNER_TOKENS`` is clipped around the question's words (it
  came along; it did not rank).
* **Groups by relevance.** A hit, its partner and the messages read around it form a
  group; groups keep the order of their best hit (rank 0 the best). The prompt shows
  them worst first, so the best hit is what the model reads last (just before the new
  message in a transcript, at the end of the system block in chat messages), each
  group in conversation order.
* **Updates win.** When several hits are about the same thing (about as similar to the
  question as the best hit, and close to it in meaning; or close to it and at least as
  similar to the question as one that is, or newer than one that is, close to it and
  about as similar to the question; or one of the messages said after it that stand out
  as the closest to it, ``Item.updates``), the newest of them is marked ``most recent``
  and placed after the best, itself after its partner (ranks -1 and -2): a value said
  again later reads as current, on the line the model reads last. The best hit found
  alone is marked so too when its speaker said something close to it in meaning before
  (:func:`_said_before`: the floor left the older value out). A line about the same
  topic less close to the best than such a message does not outrank it
  (:func:`_past_echoes`), nor one about something else that such a message outdoes
  (:func:`_outdone`). The older hits of its
  role about it by meaning alone are replaced by it (``Item.replaced_by``): the builder
  leaves them out of the prompt and its step lists them, so that a small model cannot
  answer the stale value; so is the hit it may say what changed of (``Item.updates``),
  however much more like the question that one reads ("My salary is 48,000 a year."
  beside "After the promotion my salary went up to 55,000."). Facts that add up are not
  replaced: a hit a name reached (``conversations.linked``), or one sharing a capitalised
  word with the newest, unless the newest changed it and tells a change in so many words
  ("I sold the Skoda and bought a grey Volvo estate."). When the newest tells an update
  (it may say what changed, or its speaker says they changed something), the replaced
  hits' partners go with them, and its own partner is not brought when it says nothing
  of it (less close to it in meaning than ``linked.NEIGHBOUR``): a small model copies
  such a line. Otherwise a
  replaced hit's partner goes with it only when it says the same again (close to it in
  meaning: "Got it, you live in Lyon."), so that a request replaced by a later chat line
  about the same thing keeps the reply that stated a fact.
* **Dated.** Each line carries its position and its time relative to the new message
  ("3 days ago"), so that the order of what was said is plain.
"""

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np

from conversations import entities, linked, selectors, vectors
from conversations.clipping import clip
from conversations.history import Item, ago
from conversations.models import Role
from conversations.outdated import CHANGED, tells_change

SAME_TOPIC_MARGIN = 0.1
SAME_MEANING = 0.5
WIDE_MARGIN = 0.3
LATEST = "most recent"
NAME, MEANING = "name", "meaning"
# A newer hit at most this much less similar to the question than an older one about the
# same thing replaces it (chosen on the tuning half of bench/memory_abilities.py: a crowd
# of chat lines about "the dentist appointment", 0.2-0.25 below the fact, must not).
REPLACE_MARGIN = 0.15
PARTNER_TOKENS = 24
CLIP_MARK_ROOM = 16  # the mark that says a message is cut
PARTNER_OFFSET = {Role.USER: 1, Role.ASSISTANT: -1}


def _short(item: Item, focus: Sequence[str]) -> Item:
    if item.tokens <= PARTNER_TOKENS:
        return item
    limit = PARTNER_TOKENS + CLIP_MARK_ROOM + item.label_cost(numbered=True)
    return (
        clip(item, limit, numbered=True, focus=focus, tool=False, least=PARTNER_TOKENS // 2) or item
    )


def _partners(conversation_id: str, hits: list[Item], known: set[int]) -> dict[int, Item]:
    """The other half of each hit's exchange, by the hit's seq."""
    wanted = {
        hit.seq + PARTNER_OFFSET[hit.role]: hit
        for hit in hits
        if hit.role in PARTNER_OFFSET and hit.seq + PARTNER_OFFSET[hit.role] not in known
    }
    if not wanted:
        return {}
    rows = selectors.messages_at(conversation_id=conversation_id, seqs=list(wanted))
    return {
        wanted[row["seq"]].seq: Item.from_row(row)
        for row in rows
        if row["role"] != wanted[row["seq"]].role and row["role"] in PARTNER_OFFSET
    }


def _relation(best: Item, hit: Item, closeness: float | None) -> str:
    """How ``hit`` is about what the best hit is about: ``NAME`` when a name of the best
    hit reached it and it is close to it in meaning (a fact about the same person or
    thing, not necessarily the same fact); ``MEANING`` when it is close in meaning
    (``linked.NEIGHBOUR``) and about as similar to the question (within
    ``SAME_TOPIC_MARGIN``), or very close (``SAME_MEANING``) and still relevant (within
    ``WIDE_MARGIN``), or one of the messages of its speaker said after it that stand out
    as the closest to it (``Item.updates``); "" when it is about something else.
    ``closeness``: the two
    messages' similarity, None when one has no vector (then the question's similarities
    alone decide)."""
    near = closeness is None or closeness >= linked.NEIGHBOUR
    if hit.via and hit.via in best.content:
        return NAME if near else ""
    if hit.updates == best.seq and hit.role == best.role:
        return MEANING  # one of the closest said after it (``linked.newer_neighbours``)
    if hit.similarity is None or best.similarity is None:
        return ""
    gap = best.similarity - hit.similarity
    very_near = closeness is not None and closeness >= SAME_MEANING
    close = (near and gap <= SAME_TOPIC_MARGIN) or (very_near and gap <= WIDE_MARGIN)
    return MEANING if close else ""


def _current(conversation_id: str, groups: list[list[Item]]) -> tuple[int | None, dict[int, int]]:
    """The index of the group whose hit is the newest of several about what the best hit
    (the most similar to the question) is about (:func:`_relation`): the newest of those
    about as relevant as the best (within ``REPLACE_MARGIN``), the best's own when it is
    the newest, else the newest of all; when no other hit is about it, the best's own if
    its speaker said something about the same before (:func:`_said_before`), else None.
    And the groups it replaces (:func:`_replaced`), only when it is one of those about as
    relevant."""
    heads = {i: g[0] for i, g in enumerate(groups) if g}
    scored = {i: hit for i, hit in heads.items() if hit.similarity is not None}
    if not scored:
        return None, {}
    at = max(scored, key=lambda i: scored[i].similarity)
    best = heads[at]
    unit = vectors.vectors_of(conversation_id=conversation_id, seqs=[h.seq for h in heads.values()])

    def closeness(hit: Item) -> float | None:
        if hit.seq in unit and best.seq in unit:
            return float(unit[hit.seq] @ unit[best.seq])
        return None

    found_updating = [hit for hit in heads.values() if hit.updates == best.seq]
    for i, hit in heads.items():
        if hit.updates == best.seq and _outdone(hit, found_updating, closeness):
            heads[i] = replace(hit, updates=None)  # a stray: not what changed the best
    related = {i: _relation(best, hit, closeness(hit)) for i, hit in heads.items() if i != at}
    same = [i for i, relation in related.items() if relation]
    if not same:
        return (at if _said_before(conversation_id, best, unit.get(best.seq)) else None), {}
    # A hit close to the best in meaning and at least as similar to the question as one
    # about the same thing is about it too ("Nakamura Ramen has become my favourite" beside
    # "My favourite is Bistro Lumière" and, less similar, "Bistro Lumière is still ...").
    weakest = min((scored[i].similarity for i in same if i in scored), default=1.0)
    for i in sorted(scored.keys() - {at, *same}):
        if scored[i].similarity >= weakest and (closeness(scored[i]) or 0.0) >= linked.NEIGHBOUR:
            related[i] = MEANING
            same.append(i)
    related[at] = "" if best.via else MEANING
    rivals = [i for i in same if i in scored and _rivals(heads[i], best)]
    updating = [i for i in same if heads[i].updates == best.seq]
    rivals = _past_echoes(rivals, updating, heads, closeness)
    # A newer hit close in meaning to the best and to one of its rivals, and about as
    # similar to the question as that rival, says the thing again, later ("These days
    # Ursula Le Guin is the author I love most." 0.16 less similar to the question than
    # "My favourite author is Haruki Murakami.", 0.04 less than "Murakami has been my
    # favourite writer for years.").
    newer = [heads[i] for i in updating]
    for i in sorted(scored.keys() - {at, *same}):
        hit = scored[i]
        again = any(_again(hit, heads[r], unit) for r in rivals)
        near = (closeness(hit) or 0.0) >= linked.NEIGHBOUR
        if again and near and not _outdone(hit, newer, closeness):
            related[i] = MEANING
            same.append(i)
            rivals.append(i)
    latest = max([at, *(rivals or same), *updating], key=lambda i: heads[i].seq)
    changes = heads[latest].updates is not None
    return latest, _replaced(heads, related, latest) if rivals or changes else {}


def _said_before(conversation_id: str, best: Item, vector: np.ndarray | None) -> bool:
    """Whether the best hit, found alone, is the newest of several its speaker said about
    the same thing: an earlier message of theirs is at least ``linked.NEIGHBOUR`` close to
    it in meaning (the floor left it out, or it ranked too low: "Ludmila took a desk job at
    the printing works." after "My partner Ludmila drives a delivery van for the
    brewery.", 0.42). A hit a name reached is not. ``vector``: the hit's, None when it has
    none."""
    if best.via or vector is None:
        return False
    seqs, similarity = vectors.similarities(
        conversation_id=conversation_id, query=vector, before_seq=best.seq
    )
    near = [seq for seq, score in vectors.best(seqs, similarity, 5) if score >= linked.NEIGHBOUR]
    rows = selectors.messages_at(conversation_id=conversation_id, seqs=near) if near else []
    return any(row["role"] == best.role for row in rows)


def _outdone(hit: Item, updating: list[Item], closeness: Callable) -> bool:
    """Whether a hit that may say what changed the best hit (``updating``: those retrieval
    found so) is closer to the best in meaning than ``hit`` by more than
    ``SAME_TOPIC_MARGIN``, and more similar to the question. A line about something else
    that stood out among those said after the best ("My aunt Rosamund teaches pilates in
    Bath.", 0.38 close to "My chiropractor is Dr. Pennington.") is not what changed it, nor
    says it again, beside "Dr. Pennington moved practices, so ..." (0.56 close, more like
    the question)."""
    near = closeness(hit) or 0.0
    return any(
        (closeness(other) or 0.0) - near > SAME_TOPIC_MARGIN
        and (other.similarity or 0.0) > (hit.similarity or 0.0)
        for other in updating
    )


def _past_echoes(
    rivals: list[int], updating: list[int], heads: dict[int, Item], closeness: Callable
) -> list[int]:
    """The rivals but those less close to the best in meaning than the closest of the
    messages said after it that stand out as the closest to it (``updating``:
    ``linked.newer_neighbours``): a line about the same topic that says nothing of it
    ("Ok. (the dentist appointment)", 0.73 close to "My dentist appointment is on the 4th
    of May.") does not outrank what changed it ("The dentist rang and moved my appointment
    to the 11th of May.", 0.82)."""
    if not updating:
        return rivals
    least = max(closeness(heads[i]) or 0.0 for i in updating)
    return [i for i in rivals if i in updating or (closeness(heads[i]) or 0.0) >= least]


def _again(hit: Item, rival: Item, unit: dict) -> bool:
    """Whether ``hit`` says again, later, what ``rival`` says: newer, close to it in
    meaning (``linked.NEIGHBOUR``) and about as similar to the question (within
    ``SAME_TOPIC_MARGIN``). ``unit``: the hits' vectors by seq."""
    if hit.seq <= rival.seq or hit.seq not in unit or rival.seq not in unit:
        return False
    near = float(unit[hit.seq] @ unit[rival.seq]) >= linked.NEIGHBOUR
    gap = abs((hit.similarity or 0.0) - (rival.similarity or 0.0))
    return near and gap <= SAME_TOPIC_MARGIN


def _rivals(newer: Item, older: Item) -> bool:
    """Whether ``newer`` is about as relevant to the question as ``older`` (it may answer
    in its place)."""
    if newer.similarity is None or older.similarity is None:
        return False
    return older.similarity - newer.similarity <= REPLACE_MARGIN


def _replaced(heads: dict[int, Item], related: dict[int, str], latest: int) -> dict[int, int]:
    """The groups, by index, that the newest hit about the thing replaces, with its seq:
    the older hits of its role about the same thing that it rivals in relevance, when it
    is about it by meaning (not reached through a name). Facts about one person or thing
    add up: a hit that shares a capitalised word with it is kept ("My sister is Ana." and
    "Ana lives in Oslo."; "I drive a red Skoda." and "I sold the Skoda and bought ...")."""
    newest = heads[latest]
    if related[latest] != MEANING or newest.via:
        return {}
    names = set(entities.capitalised(newest.content))

    def earlier(hit: Item) -> bool:
        return hit.seq < newest.seq and hit.role == newest.role

    def changed(hit: Item) -> bool:
        return newest.updates == hit.seq and earlier(hit)

    def older(hit: Item) -> bool:
        return (earlier(hit) and _rivals(newest, hit)) or changed(hit)

    def apart(hit: Item) -> bool:
        if changed(hit) and tells_change(newest.content):
            return True  # "I sold the Skoda and bought a grey Volvo.": the Skoda is the past
        return not names & set(entities.capitalised(hit.content))

    replaced = [i for i, relation in related.items() if relation and older(heads[i])]
    replaced = [i for i in replaced if apart(heads[i])]
    # What a name of a replaced hit reached is about the old value too ("I live in Lyon."
    # brought "Home for me is Lyon."), unless the newest names it as well.
    stale = " ".join(heads[i].content for i in replaced)
    replaced += [
        i
        for i, hit in heads.items()
        if i not in replaced and hit.via and hit.via in stale and earlier(hit) and apart(hit)
    ]
    return dict.fromkeys(replaced, newest.seq)


def _echoes(conversation_id: str, pairs: list[tuple[Item, Item]]) -> set[int]:
    """The seqs of the partners (of replaced hits) that say what their hit says: close to
    it in meaning (``linked.NEIGHBOUR``). One without a vector is not known to."""
    seqs = [item.seq for pair in pairs for item in pair]
    unit = vectors.vectors_of(conversation_id=conversation_id, seqs=seqs) if pairs else {}
    return {
        partner.seq
        for hit, partner in pairs
        if hit.seq in unit
        and partner.seq in unit
        and float(unit[hit.seq] @ unit[partner.seq]) >= linked.NEIGHBOUR
    }


def _tells_update(newest: Item) -> bool:
    """Whether the hit marked newest says what changed: retrieval found it as what may
    have changed an older hit (``Item.updates``), or it tells that its speaker changed
    something ("I moved to Porto."; a chat line "I think it was moved ..." does not)."""
    return newest.updates is not None or bool(CHANGED.search(newest.content))


def _silent_partner(
    conversation_id: str,
    groups: list[list[Item]],
    partners: dict[int, Item],
    latest: int | None,
    replaced: dict[int, int],
) -> int | None:
    """The seq of the partner of the hit marked newest that is left out: when that hit
    tells an update (it replaces an older hit or may say what changed of one) and its
    partner says nothing of it (less close to it in meaning than ``linked.NEIGHBOUR``:
    "That sounds nice." after "I moved to Porto.", but not "Got it, you live in Porto
    now."). A small model copies such a line, read just before the current value."""
    if latest is None:
        return None
    newest = groups[latest][0]
    partner = partners.get(newest.seq)
    if partner is None or not (replaced or _tells_update(newest)):
        return None
    unit = vectors.vectors_of(conversation_id=conversation_id, seqs=[newest.seq, partner.seq])
    if newest.seq not in unit or partner.seq not in unit:
        return None  # not known to say nothing of it
    close = float(unit[newest.seq] @ unit[partner.seq]) >= linked.NEIGHBOUR
    return None if close else partner.seq


def arrange(
    conversation_id: str,
    groups: list[list[Item]],
    now: datetime | None,
    focus: Sequence[str] = (),
    paired: int | None = None,
) -> list[Item]:
    """The retrieved messages, best first (the order the budget takes them in), each with
    its rank, time and mark; ``groups[i][0]`` is the i-th best hit; the first ``paired``
    groups (all by default) bring their hit's partner; ``focus``: the question's keywords
    (where a long partner's clip starts)."""
    seen: set[int] = set()
    paired = len(groups) if paired is None else paired
    kept = [[i for i in g if not (i.seq in seen or seen.add(i.seq))] for g in groups]
    paired = sum(1 for group in kept[:paired] if group)
    groups = [group for group in kept if group]
    partners = _partners(conversation_id, [group[0] for group in groups[:paired]], seen)
    latest, replaced = _current(conversation_id, groups)
    silent = _silent_partner(conversation_id, groups, partners, latest, replaced)
    pairs = [(groups[i][0], partners.get(groups[i][0].seq)) for i in replaced]
    echoes = _echoes(conversation_id, [(hit, p) for hit, p in pairs if p is not None])
    # An update that tells what changed takes the older exchanges with it whole.
    whole = latest is not None and _tells_update(groups[latest][0])
    arranged: list[Item] = []
    for rank, group in enumerate(groups):
        partner = partners.get(group[0].seq)
        if partner is not None and partner.seq not in seen and partner.seq != silent:
            seen.add(partner.seq)
            group = [*group, _short(partner, focus)]
        marked = rank == latest
        for item in sorted(group, key=lambda item: item.seq):
            hit = item is group[0]
            goes = hit or whole or item.seq in echoes
            arranged.append(
                Item(
                    **{
                        **item.__dict__,
                        "when": ago(item.created_at, now) if now else "",
                        "mark": LATEST if marked and hit else "",
                        "rank": (-2 if hit else -1) if marked else rank,
                        "replaced_by": replaced.get(rank) if goes else None,
                    }
                )
            )
    return sorted(arranged, key=lambda item: item.rank)
