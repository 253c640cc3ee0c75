"""Benchmark of the chat agent's memory: does the fact a question asks about reach the
prompt, found by its words or by its meaning, and what does one turn's retrieval cost.

    .venv/bin/python bench/memory.py [--only sqlite|postgres] [--repeat N] [--base REV]

For each database (a migrated SQLite temp file; a throwaway PostgreSQL database) the
service runs as in production (deploy/gunicorn.conf.py and a qcluster) in front of a
loopback runtime (tests/runtime_server.py) that answers at once and records what it was
sent. A fixture process of the bench's own fills the conversations through the public
service ``messages_import`` and stores their vectors; chats are started over HTTP
(``POST /agent/chat``) and read back (``GET /agent/job/{id}``).

* **Recall.** Conversations of 100, 1,000 and 10,000 messages of varied length (one-word
  answers, chat lines, paragraphs, and pastes of 800-1,700 tokens, near the default
  profile's 2,048-token window), with the facts of ``bench/memory_facts.py`` told at
  random depths. Each fact is asked about twice as a new chat, once with a question
  that shares words with it and once with a paraphrase that shares none. The score is
  the share of questions whose fact is in the prompt the runtime received at the chat's
  first model call (the default profile's budget), with the service run text-only
  (``EMBEDDING_BACKEND=none``) and hybrid (the local embedder), side by side; each
  question and its reply are deleted after it (they do not become history). Targets,
  hybrid, at every depth: >= 0.98 with shared words, >= 0.90 for paraphrases.
* **Cost.** One turn's retrieval in conversations of 1,000, 10,000 and 100,000 messages,
  from the chat job's steps: its ``search_history`` and ``read_history`` tool calls in
  hybrid mode (the question's vector made and stored by the job before them), text only
  beside it (the service run text-only, after the hybrid turns, questions not kept),
  "embed question": the job's start to its first ``context`` step (the turn's load and the
  question's embedding), and the whole preparation of a turn (first ``context`` step to
  the first model call); median and p90 of N. The hybrid questions are kept, so the
  history grows by a question and a reply a turn, as a real one does. The first of the
  turns (not in the medians) is also shown apart: the worker reads the conversation's
  vectors then. "common words": the retrieval of chats whose words are in a large share
  of the messages (the full-text ranking ranks every match), reported, without a target.
  Targets: retrieval p50 <= 50 ms at 10,000 and <= 500 ms at 100,000 messages.

With ``--base REV`` an earlier commit serves (from a temporary git worktree, on a database
of its own) just before the working tree, database by database, and the p50s are printed
side by side; the fixture runs this tree's code against it.

Vectors are made by the local embedder once per distinct text (the conversations reuse
a pool of generated messages) and stored as the worker stores them.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    DATABASES,
    MODEL,
    PROJECT_DIR,
    AgentClient,
    Fixture,
    agent_service,
    before_first_call,
    create_api_key,
    delete_job_messages,
    first_context,
    first_prompt,
    fixture_serve,
    manage,
    python,
    service_env,
    table,
)
from bench.context import NAMES, PLACES, TOPICS, filler
from bench.memory_facts import FACTS
from tests.runtime_server import RuntimeServer

RECALL_DEPTHS = (100, 1_000, 10_000)
COST_SIZES = (1_000, 10_000, 100_000)
TARGET_SHARED = 0.98
TARGET_PARAPHRASE = 0.90
TARGET_P50_MS = {10_000: 50.0, 100_000: 500.0}
POOL = 3000  # distinct ordinary messages
# Questions whose words are in a large share of the generated messages (tens of thousands
# of matches at 100,000): the full-text ranking's worst case.
COMMON_QUESTIONS = (
    "When did we talk about meeting there next time?",
    "Was it busy, but it all worked out in the end?",
    "What did the worker log say about the request?",
)
SHORT = ("Ok.", "Thanks!", "Sure, go ahead.", "Yes.", "No, not yet.", "Got it.", "Haha, true.")


# --- Generated messages ---------------------------------------------------------------------


def paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(filler(rng) for _ in range(sentences))


def paste(rng: random.Random, tokens: int) -> str:
    """A log or data paste of about ``tokens`` tokens (by the heuristic)."""
    lines, count = [], 0
    while count < tokens:
        line = (
            f"{rng.randint(10, 23)}:{rng.randint(10, 59)}:{rng.randint(10, 59)} "
            f"{rng.choice(('INFO', 'WARN', 'DEBUG'))} worker {rng.choice(NAMES).lower()} "
            f"handled request for {rng.choice(PLACES)} in {rng.randint(1, 999)} ms"
        )
        lines.append(line)
        count += 30
    return "Here is the log: " + "\n".join(lines)


def pool(rng: random.Random) -> list[str]:
    """Distinct ordinary messages: mostly chat lines, some short, some long, a few pastes."""
    texts: set[str] = set()
    while len(texts) < POOL:
        kind = rng.random()
        if kind < 0.12:
            texts.add(rng.choice(SHORT) + f" ({rng.choice(TOPICS)})")
        elif kind < 0.80:
            texts.add(filler(rng))
        elif kind < 0.97:
            texts.add(paragraph(rng, rng.randint(4, 12)))
        else:
            texts.add(paste(rng, rng.randint(800, 1700)))
    return sorted(texts)


SUFFIXES = ("ies", "ing", "ed", "es", "s", "ly")


def _stem(word: str) -> str:
    """A light stemmer: 'lockers' -> 'locker', 'stored' -> 'stor'."""
    for suffix in SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word.removesuffix("e") if len(word) > 3 else word


def _stems(text: str) -> set[str]:
    from conversations.search import keywords

    return {_stem(word) for word in keywords(text)}


def check_facts() -> list[str]:
    """Paraphrases that share a word stem with their fact (they would not test meaning)."""
    bad = []
    for fact, shared, paraphrase in FACTS:
        if _stems(paraphrase) & _stems(fact):
            bad.append(f"{paraphrase!r} shares {_stems(paraphrase) & _stems(fact)}")
        if not _stems(shared) & _stems(fact):
            bad.append(f"{shared!r} shares no word with its fact")
    return bad


# --- The fixture: Django in its own process, the conversations' public services ----------------


class Setup:
    """Fills the conversations the driver asks in (``messages_import``) and stores their
    vectors, made once per distinct text (``conversations.vectors.message_vectors_store``;
    ``messages_embed`` would make them again)."""

    def __init__(self, key: str, cache: Path) -> None:
        from agents.selectors import profile_get
        from gateway.services import api_key_authenticate

        self.rng = random.Random(20261123)
        self.owner_id = api_key_authenticate(key).owner_id
        self.profile = profile_get("default")
        self.pool = pool(self.rng)
        texts = self.pool + [f for f, _, _ in FACTS]
        self.vectors = self._embed_all(texts, cache)
        self.questions = [q for _, shared, para in FACTS for q in (shared, para)]

    def _embed_all(self, texts: list[str], cache: Path) -> dict[str, object]:
        import numpy as np

        from gateway import embeddings

        digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
        path = cache / f"vectors-{digest}.npy"
        if path.exists():
            matrix = np.load(path)
        else:
            matrix = embeddings.embed(texts)
            np.save(path, matrix)
        return dict(zip(texts, matrix, strict=True))

    def fill(self, scope_id: str, size: int, planted: dict[int, str]) -> str:
        import numpy as np

        from conversations import services, vectors
        from conversations.models import Message

        conversation = services.conversation_get_or_create(
            owner_id=self.owner_id, source="bench", scope_type="memory",
            scope_id=scope_id, profile=self.profile,
        )  # fmt: skip
        for start in range(1, size + 1, 10_000):
            services.messages_import(
                conversation=conversation,
                messages=[
                    ("user" if seq % 2 else "assistant",
                     planted.get(seq) or self.rng.choice(self.pool))
                    for seq in range(start, min(start + 10_000, size + 1))
                ],
            )  # fmt: skip
        stored = list(
            Message.objects.filter(conversation=conversation).only(
                "conversation_id", "seq", "content"
            )
        )
        for start in range(0, len(stored), 5000):
            part = stored[start : start + 5000]
            matrix = np.vstack([self.vectors[m.content] for m in part])
            vectors.message_vectors_store(messages=part, vectors=matrix)
        return scope_id

    def analyze(self) -> None:
        from django.db import connection

        if connection.vendor == "postgresql":  # what autovacuum does after a bulk load
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE conversations_message")
                cursor.execute("ANALYZE conversations_messageembedding")

    def recall_fill(self, depth: int) -> dict:
        """A conversation of ``depth`` messages with facts told at random depths."""
        count = min(len(FACTS), max(10, depth // 10))
        chosen = self.rng.sample(FACTS, count)
        seqs = self.rng.sample(range(1, depth - 1), count)
        planted = {seq: fact for seq, (fact, _, _) in zip(seqs, chosen, strict=True)}
        scope_id = self.fill(f"recall-{depth}", depth, planted)
        self.analyze()
        return {"scope_id": scope_id, "chosen": chosen}

    def cost_fill(self) -> dict:
        filled = {size: self.fill(f"cost-{size}", size, {}) for size in COST_SIZES}
        self.analyze()
        return filled

    def question(self) -> str:
        return self.rng.choice(self.questions)


def setup_main(key: str, cache: Path) -> None:
    import django

    django.setup()
    from conversations.search import backend

    setup = Setup(key, cache)
    operations = {
        "recall_fill": setup.recall_fill, "cost_fill": setup.cost_fill,
        "question": setup.question, "forget": delete_job_messages,
    }  # fmt: skip
    fixture_serve({"search": backend(), "bad_facts": check_facts()}, operations)


# --- The driver: a client of the service ---------------------------------------------------------


def ask(client: AgentClient, runtime: RuntimeServer, scope_id: str, question: str) -> tuple:
    """A new chat's job and the prompt of its first model call."""
    sent = len(runtime.requests)
    job = client.chat(scope_id, question, "default", scope_type="memory")
    return job, first_prompt(runtime, sent)


def recall(fixture: Fixture, env: dict, key: str, runtime: RuntimeServer) -> dict:
    """The share of questions whose fact reached the prompt, the service run text-only and
    hybrid; the questions are not kept."""
    result = {}
    for depth in RECALL_DEPTHS:
        filled = fixture.call("recall_fill", depth=depth)
        chosen, scores = filled["chosen"], {}
        for backend, label in (("none", "text"), ("local", "hybrid")):
            with agent_service({**env, "EMBEDDING_BACKEND": backend}, key) as client:
                for kind, index in (("shared", 1), ("paraphrase", 2)):
                    found = 0
                    for entry in chosen:
                        job, prompt = ask(client, runtime, filled["scope_id"], entry[index])
                        fixture.call("forget", job_id=job["job_id"])
                        found += entry[0] in prompt
                    scores[f"{kind}_{label}"] = found / len(chosen)
        result[depth] = {"questions": len(chosen), **scores}
    return result


def _figures(measured: dict[str, list[float]]) -> dict:
    return {
        name: {"p50": statistics.median(values),
               "p90": sorted(values)[int(0.9 * (len(values) - 1))]}
        for name, values in measured.items()
    }  # fmt: skip


def cost(fixture: Fixture, env: dict, key: str, runtime: RuntimeServer, repeat: int) -> dict:
    """One turn's cost from its job's steps: hybrid turns kept (the history grows by a
    question a turn), common-words chats not kept; then the text-only turns, not kept, on
    the service run text-only."""
    filled = {int(size): scope for size, scope in fixture.call("cost_fill").items()}
    timings = {size: {n: [] for n in ("hybrid", "text", "prepare", "embed", "common")}
               for size in COST_SIZES}  # fmt: skip
    with agent_service(env, key) as client:
        for n in range(repeat + 2):
            for size in COST_SIZES:  # sizes take turns: a noisy neighbour slows all alike
                job, _ = ask(client, runtime, filled[size], fixture.call("question"))
                steps = before_first_call(job)
                if n >= 2:
                    timings[size]["hybrid"].append(steps["retrieval"])
                    timings[size]["embed"].append(steps["load"])
                    timings[size]["prepare"].append(first_context(job)[0])
                elif n == 0:
                    timings[size]["first"] = [steps["retrieval"]]
                common = COMMON_QUESTIONS[n % len(COMMON_QUESTIONS)]
                job, _ = ask(client, runtime, filled[size], common)
                fixture.call("forget", job_id=job["job_id"])
                if n >= 2:
                    timings[size]["common"].append(before_first_call(job)["retrieval"])
    with agent_service({**env, "EMBEDDING_BACKEND": "none"}, key) as client:
        for n in range(repeat + 2):
            for size in COST_SIZES:
                job, _ = ask(client, runtime, filled[size], fixture.call("question"))
                fixture.call("forget", job_id=job["job_id"])
                if n >= 2:
                    timings[size]["text"].append(before_first_call(job)["retrieval"])
    return {size: _figures(measured) for size, measured in timings.items()}


def run_database(name: str, repeat: int, cache: Path, tree: Path = PROJECT_DIR) -> dict:
    """The figures on a new database of its own, the service run from checkout ``tree``
    (the fixture runs this tree's code)."""
    with DATABASES[name]() as url, RuntimeServer(models=(MODEL,)) as runtime:
        # One worker process: the chats run one at a time.
        env = service_env(url, runtime_url=runtime.url, tree=tree, AGENT_MODEL=MODEL,
                          Q_WORKERS=1, EMBEDDING_BACKEND="local")  # fmt: skip
        # No tokenizer: the service counts with its heuristic, as with no runtime at all.
        runtime.tokenizer = False
        manage(env, "migrate")
        key = create_api_key(env, name="bench", scopes="agent")
        command = [python(), str(Path(__file__).resolve()), "--setup", key, "--cache", str(cache)]
        with Fixture(command, {**env, "PYTHONPATH": str(PROJECT_DIR)}) as fixture:
            if fixture.ready["bad_facts"]:
                raise RuntimeError("Facts that do not test what they should:\n"
                                   + "\n".join(fixture.ready["bad_facts"]))  # fmt: skip
            result = {"search": fixture.ready["search"]}
            result["recall"] = recall(fixture, env, key, runtime)
            result["cost"] = cost(fixture, env, key, runtime, repeat)
    return json.loads(json.dumps(result))  # keys as the report reads them


def report(name: str, result: dict) -> bool:
    print(f"\n== {name} (full-text search: {result['search']}; budget: default profile) ==")
    ok = True
    rows = []
    for depth in RECALL_DEPTHS:
        r = result["recall"][str(depth)]
        met = r["shared_hybrid"] >= TARGET_SHARED and r["paraphrase_hybrid"] >= TARGET_PARAPHRASE
        ok &= met
        rows.append(
            [f"{depth:,}", r["questions"], r["shared_text"], r["shared_hybrid"],
             r["paraphrase_text"], r["paraphrase_hybrid"], "yes" if met else "NO"]
        )  # fmt: skip
    print(
        table(
            [
                "messages",
                "facts",
                "shared: text",
                "shared: hybrid",
                "paraphrase: text",
                "paraphrase: hybrid",
                "targets met",
            ],
            rows,
        )
    )
    print(f"(targets, hybrid: shared >= {TARGET_SHARED}, paraphrase >= {TARGET_PARAPHRASE})\n")
    rows = []
    for size in COST_SIZES:
        c = result["cost"][str(size)]
        target = TARGET_P50_MS.get(size)
        met = "" if target is None else ("yes" if c["hybrid"]["p50"] <= target else "NO")
        ok &= met != "NO"
        rows.append(
            [f"{size:,}", c["hybrid"]["p50"], c["hybrid"]["p90"], c["text"]["p50"],
             c["embed"]["p50"], c["prepare"]["p50"], c["prepare"]["p90"],
             c["first"]["p50"] if "first" in c else "",
             c["common"]["p50"] if "common" in c else "",
             f"<= {target:.0f}" if target else "", met]
        )  # fmt: skip
    print(
        table(
            [
                "messages",
                "retrieval p50 ms",
                "p90 ms",
                "text-only p50 ms",
                "embed question ms",
                "turn prep p50 ms",
                "p90 ms",
                "first turn ms",
                "common words p50 ms",
                "target p50",
                "met",
            ],
            rows,
        )
    )
    return ok


def report_ratios(name: str, before: dict, after: dict) -> None:
    """The working tree's p50s beside the base commit's, measured in the same run."""
    print(f"\n== {name}: before (base) against after (working tree), p50 ms ==")
    rows = []
    for size in COST_SIZES:
        b, a = before["cost"][str(size)], after["cost"][str(size)]
        rows.append(
            [f"{size:,}", b["hybrid"]["p50"], a["hybrid"]["p50"],
             f"{b['hybrid']['p50'] / a['hybrid']['p50']:.1f}x", b["text"]["p50"],
             a["text"]["p50"], b["prepare"]["p50"], a["prepare"]["p50"],
             f"{b['prepare']['p50'] / a['prepare']['p50']:.1f}x"]
        )  # fmt: skip
    print(
        table(
            ["messages", "retrieval before", "after", "faster", "text-only before", "after",
             "turn prep before", "after", "faster"],
            rows,
        )
    )  # fmt: skip


@contextlib.contextmanager
def base_checkout(revision: str) -> Iterator[Path]:
    """A temporary git worktree of ``revision``."""
    with tempfile.TemporaryDirectory(prefix="llmgw-memory-base-") as parent:
        tree = Path(parent) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--quiet", "--detach", str(tree), revision],
            cwd=PROJECT_DIR, check=True,
        )  # fmt: skip
        try:
            yield tree
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)], cwd=PROJECT_DIR, check=False
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="timed turns per size")
    parser.add_argument("--only", choices=sorted(DATABASES), help="one database only")
    parser.add_argument(
        "--base", help="also run an earlier commit (any git revision), database by database"
    )
    parser.add_argument("--setup", metavar="KEY", help=argparse.SUPPRESS)
    parser.add_argument(
        "--cache", type=Path, help="keep the computed vectors in this folder for the next run"
    )
    args = parser.parse_args(argv)
    if args.setup:
        setup_main(args.setup, args.cache)
        return 0
    print(f"bench/memory.py on {platform.node()}, {os.cpu_count()} CPUs, "
          f"{platform.python_version()}, {len(FACTS)} facts")  # fmt: skip
    ok = True
    with contextlib.ExitStack() as stack:
        temporary = stack.enter_context(tempfile.TemporaryDirectory(prefix="llmgw-memory-"))
        cache = args.cache or Path(temporary)
        cache.mkdir(parents=True, exist_ok=True)
        base = stack.enter_context(base_checkout(args.base)) if args.base else None
        for name in [args.only] if args.only else list(DATABASES):
            if base is not None:
                started = time.perf_counter()
                before = run_database(name, args.repeat, cache.resolve(), base)
                report(f"{name}, before ({args.base})", before)
                print(f"({time.perf_counter() - started:.0f} s)")
            started = time.perf_counter()
            after = run_database(name, args.repeat, cache.resolve())
            ok &= report(name, after)
            print(f"({time.perf_counter() - started:.0f} s)")
            if base is not None:
                report_ratios(name, before, after)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
