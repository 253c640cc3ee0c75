"""LongMemEval-style benchmark of the chat agent's memory: five abilities at three depths.

    .venv/bin/python bench/memory_abilities.py [--base REV] [--model] [--only sqlite|postgres]

The abilities (``bench/memory_cases.py``): extraction (a fact said once), multi-session
(facts joined by a name, said far apart), updates (a value said, then changed: the current
one must win), abstention (asked about something never said), assistant-stated facts.
Each case's messages are planted at random places in the older part of a conversation of
200, 2,000 or 10,000 generated messages spread over 90 days (five cases a conversation,
one per ability), far out of the recent window; then its question is asked as a new chat
and the agent builds its prompt as the chat job does before its first model call (the
default profile; search in hybrid mode with the local embedder, every message embedded).

Figures per ability and depth, the tuning half and the held-out half apart (only the
held-out half counts: nothing is tuned on it):

* extraction, multi-session, assistant: every planted message in the prompt;
* updates: the current value in the prompt, and "marked": in the prompt, after every
  stale value that is there too, on a line that says it is the most recent;
* abstention: retrieval added at most 2 messages and at most 5% of the budget.

"catch-up": a 10,000-message import asked at once, before the embedder's catch-up gave
any of it a vector, and after it: facts asked with shared words and paraphrased, in
hybrid mode (tuning: ``memory_cases.CATCH_UP_TUNING``; held-out:
``memory_cases.CATCH_UP_HELD_OUT``).

``MEMORY_BENCH_DEPTHS`` (default 200,2000,10000), ``MEMORY_BENCH_HALVES`` (default
tuning,held_out), ``MEMORY_BENCH_PARTS`` (default abilities,catch_up) and
``MEMORY_BENCH_MODEL_DEPTH`` (default 200,2000) narrow a run.

With ``--model`` (the ``local`` extra), the embedded model answers each held-out
question at 200 and 2,000 messages (``MEMORY_BENCH_MODEL_DEPTH``) from that prompt, and a reply
is right when it contains one of the case's answers (abstention: says it does not know).
With ``--base REV`` an earlier commit builds the same prompts (its own code, this file's
cases) in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

THIS_TREE = Path(__file__).resolve().parent.parent
# The worker runs the code of the tree it is given (an earlier commit's), the cases of this file.
sys.path.insert(0, os.environ.get("MEMORY_BENCH_TREE", str(THIS_TREE)))
sys.path.insert(1, str(THIS_TREE))

DEPTHS = tuple(int(d) for d in os.environ.get("MEMORY_BENCH_DEPTHS", "200,2000,10000").split(","))
# Which halves run (e.g. "tuning" while choosing values: the held-out half is not looked at).
HALVES = tuple(os.environ.get("MEMORY_BENCH_HALVES", "tuning,held_out").split(","))
PARTS = tuple(os.environ.get("MEMORY_BENCH_PARTS", "abilities,catch_up").split(","))
PER_CONVERSATION = 5
SPAN = timedelta(days=90)
RECENT_MARGIN = 120  # planted messages stay this far before the question
MODEL_DEPTHS = tuple(
    int(d) for d in os.environ.get("MEMORY_BENCH_MODEL_DEPTH", "200,2000").split(",")
)
CATCH_UP_DEPTH = 10_000


def _cases():
    spec = importlib.util.spec_from_file_location(
        "memory_cases", THIS_TREE / "bench" / "memory_cases.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["memory_cases"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# --- The worker: Django in this process, on the benchmark's database --------------------------


class Worker:
    def __init__(self, cache: Path, model: bool) -> None:
        import django

        django.setup()
        from agents.models import AgentProfile
        from bench.memory import pool
        from gateway.services import api_key_create

        self.cases = _cases()
        self.model = model
        self.rng = random.Random(20261125)
        self.key, _ = api_key_create(name="bench", rate_limit_per_minute=0)
        self.profile = AgentProfile.objects.get(name="default")
        self.pool = pool(self.rng)
        planted = [c for case in self.cases.TUNING + self.cases.HELD_OUT for _, c in case.planted]
        self.facts = {
            "tuning": self.cases.CATCH_UP_TUNING,
            "held_out": self.cases.CATCH_UP_HELD_OUT,
        }
        facts = [f for half in self.facts.values() for f, _, _ in half]
        self.vectors = self._embed_all(self.pool + planted + facts, cache)

    def _embed_all(self, texts: list[str], cache: Path) -> dict:
        import numpy as np

        from gateway import embeddings

        texts = sorted(set(texts))
        digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
        path = cache / f"vectors-{digest}.npy"
        matrix = np.load(path) if path.exists() else embeddings.embed(texts)
        np.save(path, matrix)
        return dict(zip(texts, matrix, strict=True))

    def fill(self, scope_id: str, size: int, planted: dict[int, str], embed_from: float = 0.0):
        """A conversation of ``size`` messages (``planted`` at their seqs), dated over
        ``SPAN``, with vectors for the messages from ``embed_from`` of it on."""
        import numpy as np
        from django.utils import timezone

        from conversations import services, vectors
        from conversations.models import Message
        from gateway import embeddings

        conversation = services.conversation_get_or_create(
            owner_id=self.key.owner_id, source="bench", scope_type="abilities",
            scope_id=scope_id, profile=self.profile,
        )  # fmt: skip
        rows = [
            ("user" if seq % 2 else "assistant", planted.get(seq) or self.rng.choice(self.pool))
            for seq in range(1, size + 1)
        ]
        services.messages_import(conversation=conversation, messages=rows)
        now, step = timezone.now(), SPAN / size
        stored = list(Message.objects.filter(conversation=conversation).order_by("seq"))
        for message in stored:
            message.created_at = now - (size - message.seq + 1) * step
        Message.objects.bulk_update(stored, ["created_at"], batch_size=2000)
        embedded = [m for m in stored if m.seq > embed_from * size]
        for start in range(0, len(embedded), 5000):
            part = embedded[start : start + 5000]
            matrix = np.vstack([self.vectors[m.content] for m in part])
            keys = [(m.pk, m.conversation_id, m.seq) for m in part]
            vectors._store(keys, matrix, embeddings.model_id())
        return conversation

    def place(self, cases: list, size: int) -> tuple[dict[int, str], list[list[int]]]:
        """Random seqs for each case's planted messages, in order, users' on odd seqs and
        an assistant's reply just after its lead-in."""
        taken: set[int] = set()
        planted: dict[int, str] = {}
        where: list[list[int]] = []
        top = size - RECENT_MARGIN
        for case in cases:
            while True:
                starts = sorted(self.rng.sample(range(1, top, 2), len(case.planted)))
                seqs = [starts[0], starts[0] + 1] if case.planted[-1][0] == "assistant" else starts
                if not taken & {s + d for s in seqs for d in (-1, 0, 1)}:
                    break
            taken.update(seqs)
            planted.update(
                {seq: content for seq, (_, content) in zip(seqs, case.planted, strict=True)}
            )
            where.append(seqs)
        return planted, where

    def ask(self, conversation, question: str, *, answer: bool) -> tuple[object, str]:
        """The prompt the agent builds for ``question`` (and the model's cleaned reply)."""
        from agents import services as jobs
        from agents.context import JobContext
        from agents.replies import clean_reply
        from agents.runner import drive
        from conversations import render, services, tokens
        from conversations.chat_agent import first_context
        from conversations.models import Message

        _, job, _ = services.chat_start(
            api_key=self.key, source="bench", scope_type="abilities",
            scope_id=conversation.scope_id, prompt=question,
            prompt_tokens=tokens.estimate(question), profile=self.profile,
        )  # fmt: skip
        claimed = jobs.job_claim(job.pk, token="bench")
        ctx = JobContext(claimed, "bench")
        context = drive(ctx, first_context(claimed))
        reply = ""
        if answer:
            text = ctx.perform(render.model_call(self.profile, context))
            reply = clean_reply(text, transcript=self.profile.is_transcript).text
        if os.environ.get("MEMORY_BENCH_DEBUG"):  # what the searches found, on stderr
            from agents.models import Step

            for step in Step.objects.filter(job=claimed, name="search_history"):
                result = step.output.get("result", {})
                found = [(m["seq"], m.get("similarity"), m["content"][:50])
                         for m in result.get("messages", [])]  # fmt: skip
                print(question, step.input, found, result.get("left_out", [])[:4], file=sys.stderr)
        jobs.job_finish(claimed, token="bench", final_result={"benchmark": True})
        Message.objects.filter(job=claimed).delete()
        return context, reply

    def judge(self, case, context) -> dict:
        from conversations.render import transcript

        prompt = transcript(context)
        stats = context.stats()
        found = all(content in prompt for content in case.must_find)
        result = {"found": found, "retrieved": stats["retrieved_messages"]}
        if case.ability == "updates":
            current = case.planted[-1][1]
            line = next((ln for ln in prompt.splitlines() if current in ln), "")
            stale = [prompt.rfind(c) for _, c in case.planted[:-1]]
            last = found and all(at < prompt.rfind(current) for at in stale)
            result["marked"] = last and "most recent" in line.lower()
        if case.ability == "abstention":
            small = stats["retrieved_tokens"] <= 0.05 * stats["budget"]
            result["found"] = stats["retrieved_messages"] <= 2 and small
            result["tokens"] = stats["retrieved_tokens"]
        return result

    def abilities(self) -> dict:
        out: dict = {}
        for depth in DEPTHS:
            for half, cases in (("tuning", self.cases.TUNING), ("held_out", self.cases.HELD_OUT)):
                if half not in HALVES:
                    continue
                by_ability = {a: [c for c in cases if c.ability == a] for a in self.cases.ABILITIES}
                groups = list(zip(*by_ability.values(), strict=True))
                for number, group in enumerate(groups):
                    planted, _ = self.place(list(group), depth)
                    conversation = self.fill(f"{half}-{depth}-{number}", depth, planted)
                    for case in group:
                        answer = self.model and half == "held_out" and depth in MODEL_DEPTHS
                        context, reply = self.ask(conversation, case.question, answer=answer)
                        result = self.judge(case, context)
                        if answer:
                            result["reply"] = reply
                            result["right"] = any(a in reply.lower() for a in case.answers)
                        key = f"{depth}/{half}/{case.ability}"
                        out.setdefault(key, []).append({"question": case.question, **result})
        return out

    def catch_up(self) -> dict:
        from conversations.render import transcript

        out = {}
        for half, facts in self.facts.items():
            if half not in HALVES:
                continue
            for state, embed_from in (("none embedded", 1.0), ("all embedded", 0.0)):
                seqs = self.rng.sample(range(1, CATCH_UP_DEPTH - RECENT_MARGIN, 2), len(facts))
                planted = {seq: fact for seq, (fact, _, _) in zip(seqs, facts, strict=True)}
                conversation = self.fill(
                    f"catch-up-{half}-{state}", CATCH_UP_DEPTH, planted, embed_from
                )
                for kind, index in (("shared", 1), ("paraphrase", 2)):
                    hits = sum(
                        entry[0]
                        in transcript(self.ask(conversation, entry[index], answer=False)[0])
                        for entry in facts
                    )
                    out[f"{half}/{state}/{kind}"] = hits / len(facts)
        return out


# --- The driver -------------------------------------------------------------------------------


def run_tree(tree: Path, database: str, cache: Path, runtime_url: str | None) -> dict:
    from bench.common import DATABASES, manage, python, service_env

    with DATABASES[database]() as url:
        extra = {"EMBEDDING_BACKEND": "local", "MEMORY_BENCH_TREE": str(tree)}
        for name in (
            *("MEMORY_BENCH_DEPTHS", "MEMORY_BENCH_DEBUG", "MEMORY_BENCH_HALVES"),
            *("MEMORY_BENCH_MODEL_DEPTH", "MEMORY_BENCH_PARTS"),
        ):  # for trying things out
            if name in os.environ:
                extra[name] = os.environ[name]
        if runtime_url:
            extra |= {"MODEL_RUNTIME_API": "openai", "RUNTIME_READ_TIMEOUT": 240}
        env = service_env(url, runtime_url=runtime_url or "http://127.0.0.1:9", tree=tree, **extra)
        manage(env, "migrate")
        command = [python(), str(THIS_TREE / "bench" / "memory_abilities.py"), "--worker",
                   "--cache", str(cache)] + (["--model"] if runtime_url else [])  # fmt: skip
        done = subprocess.run(
            command, cwd=tree, env=env, capture_output=True, text=True, timeout=7200
        )
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if os.environ.get("MEMORY_BENCH_DEBUG"):
            print(done.stderr, file=sys.stderr)
        if done.returncode != 0 or line is None:
            raise RuntimeError(f"the worker failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
        return json.loads(line.removeprefix("RESULT "))


def _share(rows: list[dict], field: str) -> str:
    rows = [row for row in rows if field in row]
    return f"{sum(bool(r[field]) for r in rows) / len(rows):.2f}" if rows else ""


def report(results: dict[str, dict]) -> None:
    from bench.common import table

    cases = _cases()
    for half in ("held_out", "tuning"):
        if half not in HALVES:
            continue
        print(f"\n== fact in prompt, {half.replace('_', '-')} cases ==")
        rows = []
        for ability in cases.ABILITIES:
            for depth in DEPTHS:
                cells = [ability, f"{depth:,}"]
                for result in results.values():
                    cases_here = result["abilities"].get(f"{depth}/{half}/{ability}", [])
                    cells += [_share(cases_here, "found"), _share(cases_here, "marked")]
                rows.append(cells)
        heads = [f"{name}: {what}" for name in results for what in ("in prompt", "marked newest")]
        print(table(["ability", "messages", *heads], rows))
    keys = next(iter(results.values()))["catch_up"].keys()
    if keys:
        print("\n== catch-up: 10,000 imported messages, hybrid, fact in prompt ==")
        print(
            table(
                ["state/question", *results],
                [[k, *(r["catch_up"][k] for r in results.values())] for k in keys],
            )
        )
    answered = {n: r["abilities"] for n, r in results.items()}
    if any("right" in row for r in answered.values() for rows in r.values() for row in rows):
        for depth in MODEL_DEPTHS:
            _report_answers(answered, depth)


def _report_answers(answered: dict[str, dict], depth: int) -> None:
    from bench.common import table

    cases = _cases()
    at = f"{depth}/held_out/"
    if not any(at + a in r for r in answered.values() for a in cases.ABILITIES):
        return
    print(f"\n== embedded model's answers, held-out, {depth:,} messages ==")
    rows = [[a, *(_share(r.get(at + a, []), "right") for r in answered.values())]
            for a in cases.ABILITIES]  # fmt: skip
    print(table(["ability", *answered], rows))
    for name, r in answered.items():
        print(f"\n-- {name}: replies at {depth:,} --")
        for ability in cases.ABILITIES:
            for row in r.get(at + ability, []):
                mark = "ok " if row.get("right") else "NO "
                print(f"{mark}{ability}: {row['question']} -> {row.get('reply', '')[:160]!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="also run an earlier commit (any git revision)")
    parser.add_argument("--only", default="sqlite", choices=("sqlite", "postgres"))
    parser.add_argument("--model", action="store_true", help="the embedded model answers")
    parser.add_argument("--cache", type=Path, help="keep the computed vectors here")
    parser.add_argument(
        "--base-only", action="store_true", help="run --base alone (another run has this tree)"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker = Worker(args.cache, args.model)
        abilities = worker.abilities() if "abilities" in PARTS else {}
        catch_up = worker.catch_up() if "catch_up" in PARTS else {}
        print("RESULT " + json.dumps({"abilities": abilities, "catch_up": catch_up}))
        return 0
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from bench.memory import base_checkout
    from scripts import embedded_runtime

    results: dict[str, dict] = {}
    with contextlib.ExitStack() as stack:
        cache = args.cache or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        cache.mkdir(parents=True, exist_ok=True)
        runtime_url = None
        if args.model:
            if embedded_runtime.missing_modules():
                print(f"--model needs the embedded runtime: {embedded_runtime.INSTALL_HINT}")
                return 2
            model = embedded_runtime.ensure_model(THIS_TREE / "var" / "models")
            runtime_url = stack.enter_context(embedded_runtime.running(model))
        if args.base:
            tree = stack.enter_context(base_checkout(args.base))
            results[f"before ({args.base})"] = run_tree(
                tree, args.only, cache.resolve(), runtime_url
            )
        if not args.base_only:
            results["after"] = run_tree(THIS_TREE, args.only, cache.resolve(), runtime_url)
    report(results)
    print("\nRAW " + json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
