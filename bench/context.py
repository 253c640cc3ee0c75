"""Benchmark of the chat agent's context building and history reads, on SQLite and
PostgreSQL, measured as a client of the service.

    .venv/bin/python bench/context.py [--repeat N] [--only sqlite|postgres]
                                      [--sizes 100,10000,100000] [--needle-conversations 4]

For each database (a migrated SQLite temp file; a throwaway PostgreSQL database created
and dropped here) the service runs as in production (deploy/gunicorn.conf.py and a
qcluster) in front of a loopback runtime (tests/runtime_server.py) that answers at once
and records what it was sent. Conversations are filled with generated chat messages through
the conversations' public service (``messages_import``), then chats are started over HTTP
(``POST /agent/chat``) and read back (``GET /agent/job/{id}``). It reports:

* context-build time for conversations of 100, 10,000 and 100,000 messages: from the start
  of a chat job's first ``context`` step to the start of its first model call (the window,
  the agent's own ``search_history`` and ``read_history``, the context again), as the job's
  steps tell it, median of N chats each; target: the largest at most 1.5 x the smallest;
* ``GET /agent/conversation/{id}`` of a 10,000-message conversation, median of N; target
  <= 300 ms;
* needle recall: 200 facts planted at random depths in 10,000-message conversations
  (4 x 50), then a question about each asked as a new chat; the share of facts whose
  message is in the prompt the runtime received, within a 2,000-token budget; target
  >= 95%. Every first context is also checked against its budget (the ``context`` step's
  ``used_tokens``, the service's own heuristic count, which over-counts).

The needle profile (a 2,256-token window with the history tools) is a copy of the default
profile saved by the setup step: no service creates profiles (the admin does).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    DATABASES,
    MODEL,
    PROJECT_DIR,
    AgentClient,
    agent_service,
    create_api_key,
    first_context,
    first_prompt,
    manage,
    python,
    result_of,
    service_env,
    table,
)
from tests.runtime_server import RuntimeServer

SIZES = "100,10000,100000"
NEEDLE_CONVERSATIONS = 4
NEEDLES_PER_CONVERSATION = 50
NEEDLE_SIZE = 10_000
NEEDLE_BUDGET = 2000
TARGET_RATIO = 1.5
TARGET_GET_MS = 300.0
TARGET_RECALL = 0.95

# --- Generated conversations -----------------------------------------------------------------


def words(text: str, sep: str | None = None) -> list[str]:
    return text.split(sep)


NAMES = words("Ann Ben Carla Dan Eva Finn Greta Hugo Ida Jonas Kira Leo Mia Nils Olga Paul")
PLACES = words("office garden station kitchen market library harbour museum school bakery")
TOPICS = words(
    "the weekend trip, the new budget, the train times, a birthday present, the garden "
    "fence, the quarterly report, a recipe for soup, the football match, the dentist "
    "appointment, the broken printer, the team lunch, the holiday photos",
    ", ",
)
VERBS = words("fixed moved painted checked ordered cleaned returned booked cancelled shared")
TIMES = words("yesterday|this morning|last week|on Monday|after lunch|tonight|tomorrow", "|")
# The words of the facts also occur in ordinary messages, as distractors.
ADJECTIVES = words(
    "silver golden rusty wooden purple striped tiny heavy ancient spare velvet frozen "
    "crooked polished muddy hollow"
)
OBJECTS = words(
    "bicycle kettle suitcase umbrella lantern violin toolbox trophy mirror ladder hammock "
    "compass teapot blanket"
)


def filler(rng: random.Random) -> str:
    """One ordinary chat message of about 20-30 words."""
    name, place, topic = rng.choice(NAMES), rng.choice(PLACES), rng.choice(TOPICS)
    verb, when = rng.choice(VERBS), rng.choice(TIMES)
    thing = f"{rng.choice(ADJECTIVES)} {rng.choice(OBJECTS)}"
    return rng.choice(
        (
            f"{name} said the {thing} at the {place} was {verb} {when}, so we can talk about "
            f"{topic} next time we meet there.",
            f"Could you remind {name} about {topic}? I think it was {verb} {when} near the "
            f"{place}, together with the {thing}.",
            f"Sure. I noted that {topic} comes first, then the {thing}; {name} will be at the "
            f"{place} {when} if anything changes.",
            f"Thanks! {name} and I {verb} everything about {topic} {when}. The {place} was "
            "busy, but it all worked out in the end.",
        )
    )


def fact(adjective: str, thing: str, room: int) -> tuple[str, str]:
    """A fact and the question that asks for it."""
    return (
        f"Please keep in mind: the {adjective} {thing} is stored in cabinet {room}.",
        f"Where is the {adjective} {thing} stored?",
    )


# --- Setting up: Django in this process, the conversations' public services ---------------


def fill_conversations(key: str, sizes: list[int], needle_conversations: int) -> dict:
    """Fills the conversations the driver asks in, owned by ``key``'s owner."""
    import django

    django.setup()
    from django.db import connection

    from agents.selectors import profile_get
    from conversations import services
    from gateway.services import api_key_authenticate

    rng = random.Random(20261122)
    owner_id = api_key_authenticate(key).owner_id
    default = profile_get("default")
    needle = profile_get("default")
    needle.pk, needle.name, needle.tools = None, "needle", ["search_history", "read_history"]
    needle.context_window, needle.answer_reserve = NEEDLE_BUDGET + 256, 256
    needle.save()

    def fill(scope_id: str, size: int, planted: dict[int, str] | None = None) -> str:
        conversation = services.conversation_get_or_create(
            owner_id=owner_id, source="bench", scope_type="ctx", scope_id=scope_id,
            profile=default,
        )  # fmt: skip
        planted = planted or {}
        for start in range(1, size + 1, 10_000):
            services.messages_import(
                conversation=conversation,
                messages=[
                    ("user" if seq % 2 else "assistant", planted.get(seq) or filler(rng))
                    for seq in range(start, min(start + 10_000, size + 1))
                ],
            )
        if connection.vendor == "postgresql":  # what autovacuum does after a bulk load
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE conversations_message")
        return conversation.pk

    result: dict = {"fill_seconds": {}, "conversations": {}, "needles": []}
    for size in sizes:
        started = time.perf_counter()
        result["conversations"][size] = fill(f"size-{size}", size)
        result["fill_seconds"][size] = round(time.perf_counter() - started, 1)
    pairs = [(a, o) for a in ADJECTIVES for o in OBJECTS]
    rng.shuffle(pairs)
    for index in range(needle_conversations):
        chosen = pairs[index * NEEDLES_PER_CONVERSATION : (index + 1) * NEEDLES_PER_CONVERSATION]
        depths = rng.sample(range(1, NEEDLE_SIZE + 1), NEEDLES_PER_CONVERSATION)
        facts = {
            depth: fact(adjective, thing, rng.randint(100, 999))
            for depth, (adjective, thing) in zip(depths, chosen, strict=True)
        }
        fill(f"needles-{index}", NEEDLE_SIZE, {d: text for d, (text, _) in facts.items()})
        order = list(facts.values())
        rng.shuffle(order)
        result["needles"].append({"scope_id": f"needles-{index}", "facts": order})
    return result


# --- The client ------------------------------------------------------------------------------


def measure(client: AgentClient, runtime: RuntimeServer, setup: dict, repeat: int) -> dict:
    rng = random.Random(20261126)
    sizes = list(setup["conversations"])
    result: dict = {"build": {}}
    # Sizes take turns, so that a noisy neighbour slows them all alike.
    timings: dict[str, list[float]] = {size: [] for size in sizes}
    for n in range(repeat + 2):
        for size in sizes:
            question = (
                f"What did {rng.choice(NAMES)} say about the {rng.choice(OBJECTS)} "
                f"at the {rng.choice(PLACES)}?"
            )
            elapsed, _ = first_context(client.chat(f"size-{size}", question, "default"))
            if n >= 2:  # two warm-up rounds
                timings[size].append(elapsed)
    for size, measured in timings.items():
        result["build"][size] = {
            "median_ms": statistics.median(measured),
            "p90_ms": sorted(measured)[int(0.9 * (len(measured) - 1))],
        }
    found, total, over_budget, max_used = 0, 0, 0, 0
    for needles in setup["needles"]:
        for text, question in needles["facts"]:
            sent = len(runtime.requests)
            _, context = first_context(client.chat(needles["scope_id"], question, "needle"))
            total += 1
            found += text in first_prompt(runtime, sent)
            max_used = max(max_used, context["used_tokens"])
            over_budget += context["used_tokens"] > context["budget"]
    result["recall"] = {
        "found": found,
        "total": total,
        "max_prompt_tokens": max_used,
        "over_budget": over_budget,
    }
    return result


def time_get(client: AgentClient, path: str, repeat: int) -> tuple[float, float, int]:
    """Median and worst of ``repeat`` GETs (after two warm-ups) and the messages answered."""
    timings, size = [], 0
    for n in range(repeat + 2):
        started = time.perf_counter()
        data, _ = client.call("GET", path)
        if n >= 2:
            timings.append((time.perf_counter() - started) * 1000)
        size = len(data["messages"])
    return statistics.median(timings), max(timings), size


def run_database(name: str, args: argparse.Namespace) -> dict:
    with DATABASES[name]() as url, RuntimeServer(models=(MODEL,)) as runtime:
        # One worker process: the chats run one at a time, and the warm-up rounds warm it.
        env = service_env(url, runtime_url=runtime.url, AGENT_MODEL=MODEL, Q_WORKERS=1)
        manage(env, "migrate")
        key = create_api_key(env, name="bench", scopes="agent")
        command = [python(), str(Path(__file__).resolve()), "--setup", key, "--sizes", args.sizes]
        command += ["--needle-conversations", str(args.needle_conversations)]
        setup = result_of(command, env, PROJECT_DIR)
        with agent_service(env, key) as client:
            result = measure(client, runtime, setup, args.repeat)
            filled = setup["conversations"]
            shown = str(NEEDLE_SIZE) if str(NEEDLE_SIZE) in filled else max(filled, key=int)
            path = f"/agent/conversation/{filled[shown]}"
            median, worst, size = time_get(client, path, args.repeat)
        result["get"] = {"median_ms": median, "max_ms": worst, "messages": size}
        result["fill_seconds"] = setup["fill_seconds"]
        return result


def report(name: str, result: dict) -> bool:
    build = result["build"]
    sizes = sorted(build, key=int)
    smallest, largest = build[sizes[0]], build[sizes[-1]]
    ratio = largest["median_ms"] / smallest["median_ms"]
    recall = result["recall"]
    share = recall["found"] / recall["total"]
    get = result["get"]
    print(f"\n== {name} ==")
    rows = [
        [f"{int(size):,}", round(build[size]["median_ms"], 1), round(build[size]["p90_ms"], 1),
         result["fill_seconds"][size]]
        for size in sizes
    ]  # fmt: skip
    print(table(["messages", "build median ms", "build p90 ms", "fill s"], rows))
    checks = [
        (f"context build {int(sizes[-1]):,} / {int(sizes[0]):,}", f"{ratio:.2f}x",
         f"<= {TARGET_RATIO}x", ratio <= TARGET_RATIO),
        (f"GET {get['messages']:,} messages (median; max {get['max_ms']:.0f} ms)",
         f"{get['median_ms']:.0f} ms", f"<= {TARGET_GET_MS:.0f} ms",
         get["median_ms"] <= TARGET_GET_MS),
        (f"needle recall, {NEEDLE_BUDGET:,}-token budget", f"{share:.1%} "
         f"({recall['found']}/{recall['total']})", f">= {TARGET_RECALL:.0%}",
         share >= TARGET_RECALL),
        ("prompts over the budget (max tokens)",
         f"{recall['over_budget']} ({recall['max_prompt_tokens']})", "0",
         recall["over_budget"] == 0),
    ]  # fmt: skip
    print()
    print(table(["figure", "measured", "target", "met"], checks))
    return all(met for *_, met in checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="timed runs per figure")
    parser.add_argument("--only", choices=sorted(DATABASES), help="one database only")
    parser.add_argument("--sizes", default=SIZES, help="conversation sizes, in messages")
    parser.add_argument(
        "--needle-conversations", type=int, default=NEEDLE_CONVERSATIONS, help="of 50 facts each"
    )
    parser.add_argument("--setup", metavar="KEY", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.setup:
        sizes = [int(size) for size in args.sizes.split(",")]
        filled = fill_conversations(args.setup, sizes, args.needle_conversations)
        print("RESULT " + json.dumps(filled), flush=True)
        return 0
    print(
        f"bench/context.py on {platform.node()}, {os.cpu_count()} CPUs, {platform.python_version()}"
    )
    ok = True
    for name in [args.only] if args.only else list(DATABASES):
        started = time.perf_counter()
        ok &= report(name, run_database(name, args))
        print(f"({time.perf_counter() - started:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
