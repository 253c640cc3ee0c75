"""The newcomer part of ``bench/chat_quality.py`` (``--part newcomer``): a new user's first
turns, self-introductions, statements and small talk, and whether the replies answer as the
assistant.

A small model continuing a transcript copies the shape of the user's turn: to "Hi there!
I'm Nadia, I work as a nurse." it answers "Hi there! I'm Sarah." or "I'm Alex and I'm a
pharmacist.", speaking as the user or as someone it invented. Each conversation is told
turn by turn (the ``default`` profile); every stored reply is read back and counted:

* ``name``: the reply gives the assistant a name ("I'm Sarah", "my name is ...", "call me
  ..."): the default profile gives it none, so the name is invented or the user's;
* ``job``: the reply gives the assistant a job ("I work as ...", "I'm a pharmacist");
* ``life``: the reply tells a life of its own (where it lives, its family, its pets, its
  shift, its studies: "I live in ...", "my kids ...");
* ``shape``: the reply opens with the user's first three words ("Hi there! I'm ...");
* ``persona``: replies with any of the above (goal 0);
* ``example`` and ``repeat``: the replies that name the default profile's example facts
  (or a chat profile's calculator tool), or say the previous reply again
  (``chat_quality.borrowed``; goal 0);
* ``unknown``: replies that say "I don't know" to a turn that asked nothing.

The held-out talks are ``bench.held_out.NEWCOMER_TALKS``; ``TUNING_TALKS`` below are for
reproducing and trying changes (``--pair-set tuning``).
"""

from __future__ import annotations

import re
import time

# Written to reproduce and tune on (the held-out talks are bench/held_out.py's).
TUNING_TALKS = [
    [
        "Hi there! I'm Nadia, I work as a nurse.",
        "I had a long shift today.",
        "My feet hurt.",
        "What should I cook for dinner?",
    ],
    [
        "Hello, my name is Bram. I'm an electrician.",
        "I live in Utrecht with my wife.",
        "We have a garden full of tomatoes.",
    ],
    [
        "Hey! I'm Lucia and I study architecture.",
        "My exams start next week.",
        "I'm a bit nervous.",
    ],
    [
        "Hi, I'm Dev, a bus driver from Leicester.",
        "I love cricket.",
        "My team won yesterday!",
    ],
    [
        "Good afternoon! Call me Hamid.",
        "I'm a chef in a hotel kitchen.",
        "Tonight we serve lamb.",
    ],
    [
        "Hiya, I'm Agnieszka. I'm a dentist in Krakow.",
        "I have two teenage sons.",
        "They both play volleyball.",
    ],
    [
        "Hello! I'm Tomasz, a software tester.",
        "I work from home on Fridays.",
        "I like hiking in the mountains.",
    ],
    [
        "Hey there, my name's Chloe.",
        "I'm a florist.",
        "Valentine's Day is my busiest day.",
    ],
]
_NOT_NAMES = "Sorry Glad Happy Not So Here Fine Good Just Very Really Sure Afraid Still Also I"
# The assistant names itself.
NAME = re.compile(
    r"\b(?:I['\u2019]m|I am|my name is|my name['\u2019]s|call me|name['\u2019]s)\s+"
    rf"(?!(?:{'|'.join(_NOT_NAMES.split())})\b)([A-Z][a-z]+)"
)
_JOBS = (
    "nurse|doctor|teacher|pharmacist|engineer|carpenter|plumber|electrician|chef|cook|"
    "librarian|designer|developer|programmer|student|driver|guard|lawyer|accountant|"
    "architect|farmer|baker|waiter|waitress|writer|artist|musician|manager|mechanic|"
    "dentist|vet|pilot|scientist|journalist|photographer|cashier|cleaner|firefighter|"
    "retired|web designer|bus driver|security guard|shop assistant"
)
# The assistant gives itself a job.
JOB = re.compile(
    rf"\bI (?:work|worked) (?:as|at|in|for|nights|days)\b|\bmy (?:job|work|profession) is\b"
    rf"|\bI(?:['\u2019]m| am) (?:a|an) (?:\w+ )?(?:{_JOBS})\b",
    re.IGNORECASE,
)
# The assistant tells a life of its own.
LIFE = re.compile(
    r"\bI (?:live|lived|grew up|was born|moved|study|studied|teach|run|design|drive|bake"
    r"|have (?:a|an|two|three|four|\d+) (?!question|suggestion|idea|tip)\w+|['\u2019]ve got)"
    r"|\bmy (?:wife|husband|partner|kids|children|son|daughter|grandchildren|cat|dog|shift"
    r"|students|team|exams?|feet|family|garden|village|pizzeria|boss|home)\b",
    re.IGNORECASE,
)
KINDS = ("name", "job", "life", "shape")


def _opening(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower().replace("\u2019", "'"))[:3]


def persona_kinds(reply: str, message: str) -> list[str]:
    """The ways ``reply`` speaks as a person rather than as the assistant (see the module)."""
    patterns = (("name", NAME), ("job", JOB), ("life", LIFE))
    found = [kind for kind, pattern in patterns if pattern.search(reply)]
    opening = _opening(message)
    if len(opening) == 3 and _opening(reply) == opening:
        found.append("shape")
    return found


def run_talks(service, talks: list[list[str]], deadline: float, show: bool) -> dict:
    """Tells each talk turn by turn; the figures of its stored replies (see the module)."""
    from bench.chat_quality import ABSTAINS, borrowed

    figures = dict.fromkeys((*KINDS, "persona", "example", "repeat", "unknown", "replies"), 0)
    figures["talks"] = figures["turns"] = figures["failed"] = 0
    figures["shown"] = []
    for index, talk in enumerate(talks):
        if time.monotonic() > deadline:
            print(f"  (time budget spent: stopping after {index} talks)", flush=True)
            break
        figures["talks"] += 1
        conversation = ""
        for message in talk:
            job = service.chat(f"newcomer-{index}", message)
            figures["turns"] += 1
            failed = job.get("status") != "finished"
            figures["failed"] += failed
            if show and failed:
                print(f"    {message[:50]!r} -> [{job.get('status')}: {job.get('error')}]")
            conversation = (job.get("final_result") or {}).get("conversation_id") or conversation
        talk_messages = service.messages(conversation) if conversation else []
        example, repeat, _, _ = borrowed(talk_messages)
        figures["example"] += example
        figures["repeat"] += repeat
        asked = ""
        for role, text in talk_messages:
            if role == "user":
                asked = text
                continue
            figures["replies"] += 1
            kinds = persona_kinds(text, asked)
            for kind in kinds:
                figures[kind] += 1
            figures["persona"] += bool(kinds)
            figures["unknown"] += bool(ABSTAINS.search(text)) and not asked.rstrip().endswith("?")
            if show:
                print(f"    {asked[:50]!r} -> {text[:70]!r} {kinds or ''}", flush=True)
        print(f"  talk {index + 1}/{len(talks)} told", flush=True)
    return figures


def report(figures: dict) -> None:
    replies = figures["replies"]

    def share(count: int) -> str:
        return f"{count}/{replies} = {count / replies:.2f}" if replies else "n/a"

    print(
        f"\nnewcomer turns: {figures['talks']} talks, {figures['turns']} turns"
        f" ({figures['failed']} jobs not finished)"
    )
    print(f"  replies speaking as a person (goal 0):  {share(figures['persona'])}")
    for kind in KINDS:
        print(f"    {kind:5}                                {share(figures[kind])}")
    print(f"  replies naming the example's facts or a tool: {share(figures['example'])}")
    print(f"  the previous reply again:               {share(figures['repeat'])}")
    print(f"  'I don't know' to a turn that asked nothing: {share(figures['unknown'])}")
