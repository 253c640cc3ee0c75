"""LongMemEval-style benchmark of the chat agent's memory: five abilities at three depths.

    .venv/bin/python bench/memory_abilities.py [--base REV] [--model] [--only sqlite|postgres]

The abilities (``bench/memory_cases.py``): extraction (a fact said once), multi-session
(facts joined by a name, said far apart), updates (a value said, then changed: the current
one must win), abstention (asked about something never said), assistant-stated facts.
Each case's messages are planted at random places in the older part of a conversation of
200, 2,000 or 10,000 generated messages spread over 90 days (five cases a conversation,
one per ability), far out of the recent window; then its question is asked as a new chat
over HTTP (``POST /agent/chat``) of the service run as in production (gunicorn and a
qcluster) in front of a loopback runtime (tests/runtime_server.py), and judged on the
prompt that runtime received at the chat's first model call and the figures of the job's
last ``context`` step before it (``GET /agent/job/{id}``); the question and its reply are
then deleted (the default profile; search in hybrid mode with the local embedder, every
message embedded). A fixture process of the bench's own fills the conversations through
the public service ``messages_import``.

Figures per ability and depth, each half apart (``memory_cases.HALVES``: the tuning half,
the held-out half of earlier rounds, and the fresh half ``memory_cases.FRESH``; only the
fresh half counts: nothing is tuned on it):

* extraction, multi-session, assistant: every planted message in the prompt;
* updates: the current value in the prompt, and "marked": in the prompt, after every
  stale value that is there too, on a line that says it is the most recent;
* abstention: retrieval added at most 2 messages and at most 5% of the budget.

"catch-up": a 10,000-message import asked at once, before the embedder's catch-up gave
any of it a vector, and after it: facts asked with shared words and paraphrased, in
hybrid mode (tuning: ``memory_cases.CATCH_UP_TUNING``; held-out:
``memory_cases.CATCH_UP_HELD_OUT``).

``MEMORY_BENCH_DEPTHS`` (default 200,2000,10000), ``MEMORY_BENCH_HALVES`` (default
tuning,held_out; or e.g. fresh31), ``MEMORY_BENCH_PARTS`` (default abilities,catch_up),
``MEMORY_BENCH_ABILITIES`` (default all five) and ``MEMORY_BENCH_MODEL_DEPTH`` (default
200,2000) narrow a run. Per-case lines (the questions, found or not, the model's replies, the
``RAW`` figures) are never printed for the fresh half, nor for the halves named in
``MEMORY_BENCH_SUMMARY_ONLY`` (e.g. ``fresh33``, to run a held-out half and keep it so): only
their summary tables.

With ``--model`` (the ``local`` extra), the service runs in front of the embedded model
for the questions of the halves run other than tuning at 200 and 2,000 messages
(``MEMORY_BENCH_MODEL_DEPTH``; ``MEMORY_BENCH_MODEL_HALVES=tuning,held_out`` chooses, and
``MEMORY_BENCH_DEBUG=1`` shows each case's prompt and reply on stderr, but the fresh
half's): the
prompt is then read from the job's first ``model_call`` step (through
``agents.selectors.job_get_for_owner``: the HTTP view cuts long texts), and the reply the
chat stored is right when it contains one of the case's answers (abstention: says it does
not know). With ``--base REV`` an earlier commit serves the same chats (its own code; this
file's cases, filled by this tree's fixture) in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import itertools
import json
import os
import random
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

THIS_TREE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(THIS_TREE))

DEPTHS = tuple(int(d) for d in os.environ.get("MEMORY_BENCH_DEPTHS", "200,2000,10000").split(","))
# Which halves run (e.g. "tuning" while choosing values: the held-out half is not looked at).
HALVES = tuple(os.environ.get("MEMORY_BENCH_HALVES", "tuning,held_out").split(","))
PARTS = tuple(os.environ.get("MEMORY_BENCH_PARTS", "abilities,catch_up").split(","))
ABILITIES = tuple(
    os.environ.get(
        "MEMORY_BENCH_ABILITIES", "extraction,multi_session,updates,abstention,assistant"
    ).split(",")
)
PER_CONVERSATION = 5
SPAN = timedelta(days=90)
RECENT_MARGIN = 120  # planted messages stay this far before the question
# The halves the embedded model answers with --model (add "tuning" while choosing values).
UNTUNED = ",".join(half for half in HALVES if half != "tuning")
MODEL_HALVES = tuple(os.environ.get("MEMORY_BENCH_MODEL_HALVES", UNTUNED).split(","))
MODEL_DEPTHS = tuple(
    int(d) for d in os.environ.get("MEMORY_BENCH_MODEL_DEPTH", "200,2000").split(",")
)
CATCH_UP_DEPTH = 10_000
# Halves whose per-case lines are not printed, besides the fresh one (held out).
SUMMARY_ONLY = tuple(filter(None, os.environ.get("MEMORY_BENCH_SUMMARY_ONLY", "").split(",")))


def summary_only(cases, half: str) -> bool:
    """Whether ``half`` is held out: only its summary lines are printed."""
    return half == cases.FRESH or half in SUMMARY_ONLY


def _cases():
    spec = importlib.util.spec_from_file_location(
        "memory_cases", THIS_TREE / "bench" / "memory_cases.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["memory_cases"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# --- The fixture: Django in its own process, the conversations' public services -------------


class Setup:
    """Fills the conversations the driver asks in (``messages_import``), dates their messages
    over ``SPAN`` (no service does: by the model) and stores their vectors, made once per
    distinct text (``conversations.vectors.message_vectors_store``)."""

    def __init__(self, key: str, cache: Path) -> None:
        from agents.selectors import profile_get
        from bench.memory import pool
        from gateway.services import api_key_authenticate

        self.cases = _cases()
        self.rng = random.Random(20261125)
        self.owner_id = api_key_authenticate(key).owner_id
        self.profile = profile_get("default")
        self.pool = pool(self.rng)
        every = [case for half in self.cases.HALVES.values() for case in half]
        planted = [c for case in every for _, c in case.planted]
        facts = [f for half in catch_up_facts(self.cases).values() for f, _, _ in half]
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

        conversation = services.conversation_get_or_create(
            owner_id=self.owner_id, source="bench", scope_type="abilities",
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
            vectors.message_vectors_store(messages=part, vectors=matrix)
        return scope_id

    def place(self, cases: list, size: int) -> dict[int, str]:
        """Random seqs for each case's planted messages, in order, users' on odd seqs and
        an assistant's reply just after its lead-in."""
        taken: set[int] = set()
        planted: dict[int, str] = {}
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
        return planted

    def group_fill(self, depth: int, half: str, number: int) -> str:
        """The conversation of one group of cases (one per ability)."""
        group = groups(self.cases, half)[number]
        return self.fill(f"{half}-{depth}-{number}", depth, self.place(list(group), depth))

    def catch_up_fill(self, half: str, state: str, embed_from: float) -> str:
        facts = catch_up_facts(self.cases)[half]
        seqs = self.rng.sample(range(1, CATCH_UP_DEPTH - RECENT_MARGIN, 2), len(facts))
        planted = {seq: fact for seq, (fact, _, _) in zip(seqs, facts, strict=True)}
        return self.fill(f"catch-up-{half}-{state}", CATCH_UP_DEPTH, planted, embed_from)


def sent_prompt(job_id: str) -> str:
    """The text of a chat job's first model call, untruncated (GET /agent/job/{id} cuts long
    texts; ``agents.selectors.job_get_for_owner`` and its steps are the closest public read)."""
    from agents.models import StepKind
    from agents.selectors import job_get_for_owner
    from bench.common import prompt_text

    job = job_get_for_owner(job_id=job_id, owner_id=SETUP_OWNER[0])
    step = job.steps.filter(kind=StepKind.MODEL_CALL).order_by("index").first()
    return prompt_text(step.input)


SETUP_OWNER: list[int] = []


def setup_main(key: str, cache: Path) -> None:
    import django

    django.setup()
    from bench.common import delete_job_messages, fixture_serve

    setup = Setup(key, cache)
    SETUP_OWNER.append(setup.owner_id)
    operations = {
        "group_fill": setup.group_fill, "catch_up_fill": setup.catch_up_fill,
        "forget": delete_job_messages, "prompt": lambda job_id: {"text": sent_prompt(job_id)},
    }  # fmt: skip
    fixture_serve({}, operations)


# --- The driver: a client of the service ---------------------------------------------------


def groups(cases, half: str) -> list[tuple]:
    """The half's cases of the abilities run (``MEMORY_BENCH_ABILITIES``) in groups of at
    most one per ability (an ability with more cases than the others fills later groups
    alone)."""
    chosen = cases.HALVES[half]
    by_ability = [[c for c in chosen if c.ability == a] for a in cases.ABILITIES if a in ABILITIES]
    together = itertools.zip_longest(*by_ability)
    return [tuple(case for case in group if case is not None) for group in together]


def catch_up_facts(cases) -> dict[str, list]:
    return {"tuning": cases.CATCH_UP_TUNING, "held_out": cases.CATCH_UP_HELD_OUT}


class Asker:
    """Chats over HTTP with the service (in front of ``runtime``, a loopback one, or the
    embedded model's when ``runtime`` is None); reads what reached the prompt."""

    def __init__(self, client, runtime, fixture) -> None:
        self.client, self.runtime, self.fixture = client, runtime, fixture

    def ask(self, scope_id: str, question: str, show: bool = True) -> tuple[str, dict, str]:
        """The prompt of the chat's first model call, its context's figures and the reply;
        the question and reply are then deleted (they do not become history). ``show``:
        what the searches found may go to stderr (never for a held-out half)."""
        from bench.common import first_context, first_prompt

        sent = len(self.runtime.requests) if self.runtime else 0
        job = self.client.chat(scope_id, question, "default", scope_type="abilities")
        if self.runtime is not None:
            prompt = first_prompt(self.runtime, sent)
        else:
            prompt = self.fixture.call("prompt", job_id=job["job_id"])["text"]
        if show and os.environ.get("MEMORY_BENCH_DEBUG"):  # what the searches found, on stderr
            for step in job["steps"]:
                if step["name"] == "search_history":
                    result = (step["output"] or {}).get("result", {})
                    found = [(m["seq"], m.get("similarity"), m["content"][:50])
                             for m in result.get("messages", [])]  # fmt: skip
                    print(question, step["input"], found, result.get("left_out", [])[:4],
                          file=sys.stderr)  # fmt: skip
                elif step["name"].startswith("reply_"):  # the reply checks' notes
                    print("   ", step["name"], step["input"], step["output"], file=sys.stderr)
        self.fixture.call("forget", job_id=job["job_id"])
        reply = ((job.get("final_result") or {}).get("message") or {}).get("content", "")
        return prompt, first_context(job)[1], reply


def judge(case, prompt: str, stats: dict) -> dict:
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


def _show(case, prompt: str, result: dict, reply: str) -> None:
    """A case's prompt (from the retrieved block on) and reply, on stderr (the fresh half's
    are never shown)."""
    at = prompt.find("Earlier in the conversation:")
    print(f"--- {case.ability}: {case.question} {result}\n{prompt[at:]}\n>>> {reply!r}",
          file=sys.stderr)  # fmt: skip


def abilities(fixture, service, model: bool) -> dict:
    """``service(embedded)``: an Asker on the service in front of the loopback runtime or,
    for the held-out questions the model answers, the embedded one."""
    cases, out = _cases(), {}
    for depth in DEPTHS:
        for half in HALVES:
            answer = model and half in MODEL_HALVES and depth in MODEL_DEPTHS
            with service(answer) as asker:
                for number, group in enumerate(groups(cases, half)):
                    scope_id = fixture.call("group_fill", depth=depth, half=half, number=number)
                    shown = not summary_only(cases, half)
                    for case in group:
                        prompt, stats, reply = asker.ask(scope_id, case.question, shown)
                        result = judge(case, prompt, stats)
                        if answer:
                            result["reply"] = reply
                            result["right"] = any(a in reply.lower() for a in case.answers)
                        if shown and os.environ.get("MEMORY_BENCH_DEBUG"):
                            _show(case, prompt, result, reply)
                        key = f"{depth}/{half}/{case.ability}"
                        out.setdefault(key, []).append({"question": case.question, **result})
    return out


def catch_up(fixture, service) -> dict:
    out = {}
    for half, facts in catch_up_facts(_cases()).items():
        if half not in HALVES:
            continue
        for state, embed_from in (("none embedded", 1.0), ("all embedded", 0.0)):
            scope_id = fixture.call("catch_up_fill", half=half, state=state, embed_from=embed_from)
            with service(False) as asker:
                for kind, index in (("shared", 1), ("paraphrase", 2)):
                    hits = sum(entry[0] in asker.ask(scope_id, entry[index])[0] for entry in facts)
                    out[f"{half}/{state}/{kind}"] = hits / len(facts)
    return out


def run_tree(tree: Path, database: str, cache: Path, runtime_url: str | None) -> dict:
    """The figures on a new database, the service run from ``tree`` (the fixture runs this
    tree's code); with ``runtime_url`` (the embedded model's), the held-out questions at
    ``MODEL_DEPTHS`` are answered by it."""
    from bench.common import (
        DATABASES,
        Fixture,
        agent_service,
        create_api_key,
        manage,
        python,
        service_env,
    )
    from scripts.embedded_runtime import MODEL_ALIAS
    from tests.runtime_server import RuntimeServer

    with DATABASES[database]() as url, RuntimeServer(models=(MODEL_ALIAS,)) as runtime:
        # One worker process: the chats run one at a time. The scheduled catch-up embeds
        # one message a minute at most: "none embedded" stays so while it is asked.
        extra = {"EMBEDDING_BACKEND": "local", "AGENT_MODEL": MODEL_ALIAS, "Q_WORKERS": 1}
        extra["EMBEDDING_CATCHUP_BATCH"] = 1
        env = service_env(url, runtime_url=runtime.url, tree=tree, **extra)
        # No tokenizer: the service counts with its heuristic, as with no runtime at all.
        runtime.tokenizer = False
        manage(env, "migrate")
        key = create_api_key(env, name="bench", scopes="agent")
        command = [python(), str(THIS_TREE / "bench" / "memory_abilities.py"), "--setup", key,
                   "--cache", str(cache)]  # fmt: skip
        # The embedded runtime accepts late while it generates on a busy machine.
        embedded = {"MODEL_RUNTIME_URL": runtime_url, "MODEL_RUNTIME_API": "openai",
                    "RUNTIME_READ_TIMEOUT": "240", "RUNTIME_CONNECT_TIMEOUT": "30"}  # fmt: skip
        with Fixture(command, {**env, "PYTHONPATH": str(THIS_TREE)}, THIS_TREE) as fixture:

            @contextlib.contextmanager
            def service(answer: bool):
                with agent_service({**env, **(embedded if answer else {})}, key) as client:
                    yield Asker(client, None if answer else runtime, fixture)

            parts = {"abilities": {}, "catch_up": {}}
            if "abilities" in PARTS:
                parts["abilities"] = abilities(fixture, service, runtime_url is not None)
            if "catch_up" in PARTS:
                parts["catch_up"] = catch_up(fixture, service)
            return parts


def _share(rows: list[dict], field: str) -> str:
    rows = [row for row in rows if field in row]
    return f"{sum(bool(r[field]) for r in rows) / len(rows):.2f}" if rows else ""


def report(results: dict[str, dict]) -> None:
    from bench.common import table

    cases = _cases()
    for half in HALVES:
        print(f"\n== fact in prompt, {half.replace('_', '-')} cases ==")
        rows = []
        for ability in (a for a in cases.ABILITIES if a in ABILITIES):
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
        for depth, half in itertools.product(MODEL_DEPTHS, MODEL_HALVES):
            _report_answers(answered, depth, half)


def _report_answers(answered: dict[str, dict], depth: int, half: str) -> None:
    from bench.common import table

    cases = _cases()
    at = f"{depth}/{half}/"
    if not any(at + a in r for r in answered.values() for a in cases.ABILITIES):
        return
    print(f"\n== embedded model's answers, {half}, {depth:,} messages ==")
    rows = [[a, *(_share(r.get(at + a, []), "right") for r in answered.values())]
            for a in cases.ABILITIES if a in ABILITIES]  # fmt: skip
    print(table(["ability", *answered], rows))
    if summary_only(cases, half):
        return
    for name, r in answered.items():
        print(f"\n-- {name}: replies at {depth:,} --")
        for ability in cases.ABILITIES:
            for row in r.get(at + ability, []):
                mark = "ok " if row.get("right") else "NO "
                print(f"{mark}{ability}: {row['question']} -> {row.get('reply', '')[:160]!r}")


def _raw(results: dict[str, dict]) -> dict[str, dict]:
    """The figures without the held-out halves' per-case rows (their summaries are above)."""
    cases = _cases()
    kept = {}
    for name, result in results.items():
        rows = result["abilities"].items()
        shown = {k: v for k, v in rows if not summary_only(cases, k.split("/")[1])}
        kept[name] = {**result, "abilities": shown}
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="also run an earlier commit (any git revision)")
    parser.add_argument("--only", default="sqlite", choices=("sqlite", "postgres"))
    parser.add_argument("--model", action="store_true", help="the embedded model answers")
    parser.add_argument("--cache", type=Path, help="keep the computed vectors here")
    parser.add_argument(
        "--base-only", action="store_true", help="run --base alone (another run has this tree)"
    )
    parser.add_argument("--setup", metavar="KEY", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.setup:
        setup_main(args.setup, args.cache)
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
            chosen = embedded_runtime.chosen_model()
            model = embedded_runtime.ensure_model(THIS_TREE / "var" / "models", chosen)
            runtime_url = stack.enter_context(
                embedded_runtime.running(
                    model, alias=chosen.alias, transcript_chat=chosen.transcript_chat
                )
            )
        if args.base:
            tree = stack.enter_context(base_checkout(args.base))
            results[f"before ({args.base})"] = run_tree(
                tree, args.only, cache.resolve(), runtime_url
            )
        if not args.base_only:
            results["after"] = run_tree(THIS_TREE, args.only, cache.resolve(), runtime_url)
    report(results)
    print("\nRAW " + json.dumps(_raw(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
