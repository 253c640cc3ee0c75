"""Benchmark of the chat agent's context building and history reads, on SQLite and
PostgreSQL.

    .venv/bin/python bench/context.py [--repeat N] [--only sqlite|postgres]

For each database (a migrated SQLite temp file; a throwaway PostgreSQL database created
and dropped here) it fills conversations with generated chat messages and reports:

* context-build time for conversations of 100, 10,000 and 100,000 messages: the work a
  chat job does before its first model call (reading the window, the agent's own
  ``search_history`` and ``read_history``, the context steps it records), as the job
  runs it, median of N chats each; target: the largest at most 1.5 x the smallest;
* ``GET /agent/conversation/{id}`` of a 10,000-message conversation through gunicorn
  (the production server, keep-alive, loopback), median of N; target <= 300 ms;
* needle recall: 200 facts planted at random depths in 10,000-message conversations
  (4 x 50), then a question about each asked as a new chat; the share of facts whose
  message is in the prompt built within a 2,000-token budget by the agent's own
  retrieval, with no model involved; target >= 95%. Every prompt is also checked
  against the budget.

No model runtime is needed: no model is called, and token counts come from the
heuristic (``conversations.tokens``), which over-counts.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    DATABASES,
    PROJECT_DIR,
    gunicorn,
    manage,
    python,
    service_env,
    table,
)

SIZES = (100, 10_000, 100_000)
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


# --- The worker: Django in this process, on the benchmark's database ----------------------------


def worker(repeat: int) -> dict:
    import django

    django.setup()
    from django.db import connection

    from agents import services as jobs
    from agents.context import JobContext
    from agents.models import AgentProfile
    from agents.runner import drive
    from conversations import services, tokens
    from conversations.chat_agent import first_context
    from conversations.render import transcript
    from conversations.search import backend
    from gateway.services import api_key_create

    rng = random.Random(20261122)
    key, plain = api_key_create(
        name="bench",
        rate_limit_per_minute=0,
        agent_starts_per_minute=0,
        agent_reads_per_minute=0,
        max_active_jobs=0,
    )
    default = AgentProfile.objects.get(name="default")
    needle_profile = AgentProfile.objects.create(
        name="needle",
        model=default.model,
        system_prompt=default.system_prompt,
        options=default.options,
        context_window=NEEDLE_BUDGET + 256,
        answer_reserve=256,
        tools=["search_history", "read_history"],
    )

    def fill(scope_id: str, size: int, planted: dict[int, str] | None = None):
        conversation = services.conversation_get_or_create(
            owner_id=key.owner_id, source="bench", scope_type="ctx", scope_id=scope_id,
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
        return conversation

    def prepare(conversation, question: str, profile) -> tuple[object, float]:
        """Starts a chat as the API does, runs its job up to the first model call."""
        _, job, _ = services.chat_start(
            api_key=key, source="bench", scope_type="ctx", scope_id=conversation.scope_id,
            prompt=question, prompt_tokens=tokens.estimate(question), profile=profile,
        )  # fmt: skip
        claimed = jobs.job_claim(job.pk, token="bench")
        assert claimed is not None, "the chat job could not be claimed"
        started = time.perf_counter()
        context = drive(JobContext(claimed, "bench"), first_context(claimed))
        elapsed = time.perf_counter() - started
        jobs.job_finish(claimed, token="bench", final_result={"benchmark": True})
        return context, elapsed

    def analyze() -> None:
        """What autovacuum does after a bulk load: the planner's statistics, which the
        PostgreSQL search reads to tell common words from rare ones."""
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE conversations_message")

    result: dict = {"search": backend(), "key": plain, "build": {}, "fill_seconds": {}}
    conversations = {}
    for size in SIZES:
        started = time.perf_counter()
        conversations[size] = fill(f"size-{size}", size)
        result["fill_seconds"][size] = round(time.perf_counter() - started, 1)
    analyze()
    # Sizes take turns, so that a noisy neighbour slows them all alike.
    timings: dict[int, list[float]] = {size: [] for size in SIZES}
    for n in range(repeat + 2):
        for size in SIZES:
            question = (
                f"What did {rng.choice(NAMES)} say about the {rng.choice(OBJECTS)} "
                f"at the {rng.choice(PLACES)}?"
            )
            _, elapsed = prepare(conversations[size], question, default)
            if n >= 2:  # two warm-up rounds
                timings[size].append(elapsed * 1000)
    for size, measured in timings.items():
        result["build"][size] = {
            "median_ms": statistics.median(measured),
            "p90_ms": sorted(measured)[int(0.9 * (len(measured) - 1))],
        }
    result["get_conversation"] = conversations[10_000].pk

    pairs = [(a, o) for a in ADJECTIVES for o in OBJECTS]
    rng.shuffle(pairs)
    found, total, over_budget, max_used = 0, 0, 0, 0
    for index in range(NEEDLE_CONVERSATIONS):
        chosen = pairs[index * NEEDLES_PER_CONVERSATION : (index + 1) * NEEDLES_PER_CONVERSATION]
        depths = rng.sample(range(1, NEEDLE_SIZE + 1), NEEDLES_PER_CONVERSATION)
        facts = {
            depth: fact(adjective, thing, rng.randint(100, 999))
            for depth, (adjective, thing) in zip(depths, chosen, strict=True)
        }
        conversation = fill(
            f"needles-{index}", NEEDLE_SIZE, {d: text for d, (text, _) in facts.items()}
        )
        analyze()
        order = list(facts.values())
        rng.shuffle(order)
        for text, question in order:
            context, _ = prepare(conversation, question, needle_profile)
            total += 1
            prompt = transcript(context)
            found += text in prompt
            used = tokens.estimate(prompt)
            max_used = max(max_used, used)
            over_budget += used > NEEDLE_BUDGET
    result["recall"] = {
        "found": found,
        "total": total,
        "max_prompt_tokens": max_used,
        "over_budget": over_budget,
    }
    return result


# --- The driver ----------------------------------------------------------------------------


def time_get(base_url: str, path: str, key: str, repeat: int) -> tuple[float, float, int]:
    """Median and worst of ``repeat`` GETs (after two warm-ups) and the answer's size."""
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    timings, size = [], 0
    try:
        for n in range(repeat + 2):
            started = time.perf_counter()
            conn.request("GET", path, headers={"Authorization": f"Bearer {key}"})
            response = conn.getresponse()
            body = response.read()
            elapsed = (time.perf_counter() - started) * 1000
            if response.status != 200:
                raise RuntimeError(f"GET {path} answered {response.status}: {body[:300]!r}")
            if n >= 2:
                timings.append(elapsed)
            size = len(json.loads(body)["data"]["messages"])
    finally:
        conn.close()
    return statistics.median(timings), max(timings), size


def run_database(name: str, repeat: int) -> dict:
    with DATABASES[name]() as url:
        env = service_env(url, runtime_url="http://127.0.0.1:9")
        manage(env, "migrate")
        done = subprocess.run(
            [python(), str(Path(__file__).resolve()), "--worker", "--repeat", str(repeat)],
            cwd=PROJECT_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if done.returncode != 0 or line is None:
            raise RuntimeError(f"the {name} worker failed:\n{done.stdout}\n{done.stderr}")
        result = json.loads(line.removeprefix("RESULT "))
        with gunicorn(env) as server:
            path = f"/agent/conversation/{result['get_conversation']}"
            median, worst, size = time_get(server.url, path, result["key"], repeat)
        result["get"] = {"median_ms": median, "max_ms": worst, "messages": size}
        return result


def report(name: str, result: dict) -> bool:
    build = result["build"]
    smallest, largest = build[str(SIZES[0])], build[str(SIZES[-1])]
    ratio = largest["median_ms"] / smallest["median_ms"]
    recall = result["recall"]
    share = recall["found"] / recall["total"]
    get = result["get"]
    print(f"\n== {name} (full-text search: {result['search']}) ==")
    rows = [
        [f"{size:,}", build[str(size)]["median_ms"], build[str(size)]["p90_ms"],
         result["fill_seconds"][str(size)]]
        for size in SIZES
    ]  # fmt: skip
    print(table(["messages", "build median ms", "build p90 ms", "fill s"], rows))
    checks = [
        (f"context build {SIZES[-1]:,} / {SIZES[0]:,}", f"{ratio:.2f}x", f"<= {TARGET_RATIO}x",
         ratio <= TARGET_RATIO),
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
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(args.repeat)), flush=True)
        return 0
    print(
        f"bench/context.py on {platform.node()}, {os.cpu_count()} CPUs, {platform.python_version()}"
    )
    ok = True
    for name in [args.only] if args.only else list(DATABASES):
        started = time.perf_counter()
        ok &= report(name, run_database(name, args.repeat))
        print(f"({time.perf_counter() - started:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
