"""Benchmark of the chat agent's memory: does the fact a question asks about reach the
prompt, found by its words or by its meaning, and what does one turn's retrieval cost.

    .venv/bin/python bench/memory.py [--only sqlite|postgres] [--repeat N] [--base REV]

For each database (a migrated SQLite temp file; a throwaway PostgreSQL database):

* **Recall.** Conversations of 100, 1,000 and 10,000 messages of varied length (one-word
  answers, chat lines, paragraphs, and pastes of 800-1,700 tokens, near the default
  profile's 2,048-token window), with the facts of ``bench/memory_facts.py`` told at
  random depths. Each fact is asked about twice as a new chat, once with a question
  that shares words with it and once with a paraphrase that shares none. The score is
  the share of questions whose fact is in the prompt the agent builds before its first
  model call (the default profile's budget; no model is called), with the search in
  text-only mode (``EMBEDDING_BACKEND=none``) and hybrid (the local embedder), side by
  side. Targets, hybrid, at every depth: >= 0.98 with shared words, >= 0.90 for
  paraphrases.
* **Cost.** One turn's retrieval (the agent's ``search_history`` in hybrid mode plus
  its ``read_history``, the question's vector already made and stored, as the chat job
  does when it starts) in conversations of 1,000, 10,000 and 100,000 messages, text
  only beside it, embedding the question apart, and the whole preparation of a turn
  (context, retrieval, context again); median and p90 of N. Questions are kept, so the
  history grows by one message a turn, as a real one does. The first of the turns (not
  in the medians) is also shown apart: the process reads the conversation's vectors then.
  "common words": a hybrid search for questions whose words are in a large share of the
  messages (the full-text ranking ranks every match), reported, without a target.
  Targets: retrieval p50 <= 50 ms at 10,000 and <= 500 ms at 100,000 messages.

With ``--base REV`` an earlier commit runs the same worker (from a temporary git worktree,
on a database of its own) just before the working tree, database by database, and the
p50s are printed side by side.

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

from bench.common import DATABASES, PROJECT_DIR, manage, python, service_env, table
from bench.context import NAMES, PLACES, TOPICS, filler
from bench.memory_facts import FACTS

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


# --- The worker: Django in this process, on the benchmark's database ----------------------------


class Worker:
    def __init__(self, cache: Path) -> None:
        import django

        django.setup()
        from agents.models import AgentProfile
        from gateway.services import api_key_create

        self.rng = random.Random(20261123)
        self.key, _ = api_key_create(name="bench", rate_limit_per_minute=0)
        self.profile = AgentProfile.objects.get(name="default")
        self.pool = pool(self.rng)
        texts = self.pool + [f for f, _, _ in FACTS]
        self.vectors = self._embed_all(texts, cache)

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

    def fill(self, scope_id: str, size: int, planted: dict[int, str]) -> object:
        from conversations import services, vectors
        from conversations.models import Message
        from gateway import embeddings

        conversation = services.conversation_get_or_create(
            owner_id=self.key.owner_id, source="bench", scope_type="memory",
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
        rows = list(
            Message.objects.filter(conversation=conversation).values_list(
                "id", "conversation_id", "seq", "content"
            )
        )
        import numpy as np

        for start in range(0, len(rows), 5000):
            part = rows[start : start + 5000]
            matrix = np.vstack([self.vectors[content] for *_, content in part])
            vectors._store([(a, b, c) for a, b, c, _ in part], matrix, embeddings.model_id())
        return conversation

    def analyze(self) -> None:
        from django.db import connection

        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE conversations_message")
                cursor.execute("ANALYZE conversations_messageembedding")

    def start(self, conversation, question: str) -> tuple[object, object]:
        """Starts a chat as the API does and claims its job: (job, its user message)."""
        from agents import services as jobs
        from conversations import services, tokens
        from conversations.models import Role
        from conversations.selectors import message_of_job

        _, job, _ = services.chat_start(
            api_key=self.key, source="bench", scope_type="memory",
            scope_id=conversation.scope_id, prompt=question,
            prompt_tokens=tokens.estimate(question), profile=self.profile,
        )  # fmt: skip
        claimed = jobs.job_claim(job.pk, token="bench")
        assert claimed is not None, "the chat job could not be claimed"
        return claimed, message_of_job(claimed, Role.USER)

    def prepare_started(self, claimed, own, *, keep: bool) -> tuple[object, float]:
        """Runs a started job up to its first model call and finishes it; unless ``keep``,
        its question is deleted afterwards so that it does not become history."""
        from agents import services as jobs
        from agents.context import JobContext
        from agents.runner import drive
        from conversations.chat_agent import first_context
        from conversations.models import Message

        started = time.perf_counter()
        context = drive(JobContext(claimed, "bench"), first_context(claimed))
        elapsed = time.perf_counter() - started
        jobs.job_finish(claimed, token="bench", final_result={"benchmark": True})
        if not keep:
            Message.objects.filter(job=claimed).delete()
        return context, elapsed

    def prepare(self, conversation, question: str) -> tuple[object, float]:
        """A new chat's prompt, the question not kept."""
        return self.prepare_started(*self.start(conversation, question), keep=False)

    def recall(self) -> dict:
        from django.conf import settings

        from conversations.render import transcript

        result = {}
        for depth in RECALL_DEPTHS:
            count = min(len(FACTS), max(10, depth // 10))
            chosen = self.rng.sample(FACTS, count)
            seqs = self.rng.sample(range(1, depth - 1), count)
            planted = {seq: fact for seq, (fact, _, _) in zip(seqs, chosen, strict=True)}
            conversation = self.fill(f"recall-{depth}", depth, planted)
            self.analyze()
            scores = {}
            for backend, label in (("none", "text"), ("local", "hybrid")):
                settings.EMBEDDING_BACKEND = backend
                for kind, index in (("shared", 1), ("paraphrase", 2)):
                    found = 0
                    for entry in chosen:
                        context, _ = self.prepare(conversation, entry[index])
                        found += entry[0] in transcript(context)
                    scores[f"{kind}_{label}"] = found / count
            settings.EMBEDDING_BACKEND = "local"
            result[depth] = {"questions": count, **scores}
        return result

    def cost(self, repeat: int) -> dict:
        from conversations import selectors, vectors
        from conversations.retrieval import find_messages
        from gateway import embeddings

        result = {}
        conversations = {size: self.fill(f"cost-{size}", size, {}) for size in COST_SIZES}
        self.analyze()
        questions = [q for _, shared, para in FACTS for q in (shared, para)]
        timings: dict[int, dict[str, list[float]]] = {
            size: {"hybrid": [], "text": [], "prepare": [], "embed": [], "common": []}
            for size in COST_SIZES
        }
        for n in range(repeat + 2):
            for size in COST_SIZES:  # sizes take turns: a noisy neighbour slows all alike
                conversation = conversations[size]
                question = self.rng.choice(questions)
                claimed, own = self.start(conversation, question)
                # The chat job embeds and stores its question when it starts (its search
                # then finds the vector in the embedder's cache and the stored row as the
                # one added since the last turn). Timed apart.
                started = time.perf_counter()
                embeddings.forget()
                vectors.messages_embed(message_ids=[own.pk])
                if n >= 2:
                    timings[size]["embed"].append((time.perf_counter() - started) * 1000)
                for mode in ("hybrid", "text"):
                    started = time.perf_counter()
                    found = find_messages(
                        conversation_id=conversation.pk, query=question, limit=10,
                        before_seq=own.seq, mode=mode,
                    )  # fmt: skip
                    if found.rows:
                        selectors.messages_before(
                            conversation_id=conversation.pk,
                            before_seq=found.rows[0]["seq"] + 2,
                            limit=3,
                        )
                    elapsed = (time.perf_counter() - started) * 1000
                    if n >= 2:
                        timings[size][mode].append(elapsed)
                    elif n == 0 and mode == "hybrid":
                        timings[size]["first"] = [elapsed]
                common = COMMON_QUESTIONS[n % len(COMMON_QUESTIONS)]
                embeddings.embed_query(common)
                started = time.perf_counter()
                find_messages(
                    conversation_id=conversation.pk, query=common, limit=10, before_seq=own.seq
                )
                if n >= 2:
                    timings[size]["common"].append((time.perf_counter() - started) * 1000)
                # Kept: the history grows by a question a turn, as a real one does.
                _, elapsed = self.prepare_started(claimed, own, keep=True)
                if n >= 2:
                    timings[size]["prepare"].append(elapsed * 1000)
        for size, measured in timings.items():
            result[size] = {
                name: {
                    "p50": statistics.median(values),
                    "p90": sorted(values)[int(0.9 * (len(values) - 1))],
                }
                for name, values in measured.items()
            }
        return result


def worker_main(repeat: int, cache: Path) -> dict:
    worker = Worker(cache)  # sets Django up
    from conversations.search import backend

    return {"search": backend(), "recall": worker.recall(), "cost": worker.cost(repeat)}


# --- The driver ----------------------------------------------------------------------------


def check_facts() -> list[str]:
    """Paraphrases that share a word stem with their fact (they would not test meaning)."""
    bad = []
    for fact, shared, paraphrase in FACTS:
        if _stems(paraphrase) & _stems(fact):
            bad.append(f"{paraphrase!r} shares {_stems(paraphrase) & _stems(fact)}")
        if not _stems(shared) & _stems(fact):
            bad.append(f"{shared!r} shares no word with its fact")
    return bad


def run_database(name: str, repeat: int, cache: Path, tree: Path = PROJECT_DIR) -> dict:
    """The worker's figures on a new database of its own, run from checkout ``tree``."""
    with DATABASES[name]() as url:
        env = service_env(
            url, runtime_url="http://127.0.0.1:9", tree=tree, EMBEDDING_BACKEND="local"
        )
        manage(env, "migrate")
        done = subprocess.run(
            [python(), str(tree / "bench" / "memory.py"), "--worker", "--repeat", str(repeat),
             "--cache", str(cache)],
            cwd=tree, env=env, capture_output=True, text=True, timeout=5400,
        )  # fmt: skip
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if done.returncode != 0 or line is None:
            raise RuntimeError(f"the {name} worker failed:\n{done.stdout}\n{done.stderr}")
        return json.loads(line.removeprefix("RESULT "))


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
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--cache", type=Path, help="keep the computed vectors in this folder for the next run"
    )
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker_main(args.repeat, args.cache)), flush=True)
        return 0
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    bad = check_facts()
    if bad:
        print("Facts that do not test what they should:\n" + "\n".join(bad))
        return 2
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
