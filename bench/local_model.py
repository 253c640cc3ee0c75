"""Figures of the one-command setup and the embedded model.

    python bench/local_model.py --cold --setup-only --again   # first run, then a second
    python bench/local_model.py --cold --commit af0e8ed       # the same for another commit
    python bench/local_model.py                   # fresh clone -> `make run` -> figures
    python bench/local_model.py --no-pip-cache    # pip's cache off
    python bench/local_model.py --base-url http://127.0.0.1:8000 --key-file var/demo_key

Without ``--base-url`` it clones a commit of this repository (HEAD by default) into a
temporary directory, runs `make run` there as a newcomer would (venv, install, migrate,
demo key, web + worker + embedded model), and prints the time to "ready" phase by phase
(clone, venv, packages, local runtime, model, migrate, start), then the time to the first
answer of `/api.php`. ``--cold`` gives pip an empty cache of its own (the first run on a
new machine; the user's cache is left alone). ``--again`` then runs `make run` a second
time in the same clone, everything installed. Then, against that service (or the one
named by ``--base-url``):

* generated tokens/s: ``usage.completion_tokens / elapsed`` of `/api.php` calls (elapsed
  includes the prompt's evaluation and the gateway, so this slightly undercounts the
  model's own speed);
* the share of a chat turn spent outside the model: per chat job, (started -> finished)
  minus the ``model_call`` steps' elapsed, over (started -> finished); also from the job's
  creation, and as the client saw it (POST -> finished seen by polling every 50 ms).
  Falls back to task jobs, saying so, when `/agent/chat` is not there.

Each `make run` of the clone gets SIGINT (a terminal's Ctrl-C) and every process it
started must be gone.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from scripts import embedded_runtime  # noqa: E402
from tests.processes import descendants  # noqa: E402

QUESTION = "Q: What is the capital of France?\nA:"
STORY = "Once upon a time, in a small village,"
CHAT_PROMPTS = [
    "Hello! Which city is the capital of France?",
    "And what is it famous for?",
    "Name one museum there.",
    "Thanks. What language do people speak there?",
    "Summarise our conversation in one sentence.",
]


# --- HTTP ---------------------------------------------------------------------------------


def call(method: str, url: str, body: dict | None = None, key: str | None = None) -> dict:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.load(response)
    except urllib.error.HTTPError as err:
        return {"ok": False, "status": err.code, **json.loads(err.read() or b"{}")}


def seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


# --- The figures of a running service -----------------------------------------------------


def tokens_per_second(base_url: str, key: str, model: str, runs: int) -> list[float]:
    rates = []
    for seed in range(runs):
        answer = call(
            "POST",
            f"{base_url}/api.php",
            {
                "api_key": key,
                "model": model,
                "prompt": STORY,
                "options": {"temperature": 0.8, "seed": seed, "num_predict": 128},
            },
        )
        if not answer.get("ok"):
            raise RuntimeError(f"/api.php failed: {answer}")
        tokens = answer["usage"]["completion_tokens"]
        rate = tokens / answer["elapsed"]
        rates.append(rate)
        print(f"  run {seed}: {tokens} tokens in {answer['elapsed']:.2f} s = {rate:.1f} tokens/s")
    return rates


def run_job(base_url: str, key: str, path: str, body: dict) -> tuple[dict, float] | None:
    """Starts a job, polls it to its end; (job data, seconds the client waited) or None."""
    posted = time.perf_counter()
    started = call("POST", f"{base_url}{path}", body, key)
    if not started.get("ok"):
        if started.get("status") == 404:
            return None
        raise RuntimeError(f"POST {path} failed: {started}")
    job_id = started["data"]["job_id"]
    while True:
        job = call("GET", f"{base_url}/agent/job/{job_id}", key=key)["data"]
        if job["status"] in ("finished", "failed", "cancelled"):
            return job, time.perf_counter() - posted
        time.sleep(0.05)


def outside_model_shares(base_url: str, key: str, turns: int) -> None:
    scope = {"source": "bench", "scope_type": "run", "scope_id": str(os.getpid())}
    kind = "chat"
    rows = []
    for turn in range(turns):
        prompt = CHAT_PROMPTS[turn % len(CHAT_PROMPTS)]
        result = run_job(base_url, key, "/agent/chat", {**scope, "prompt": prompt})
        if result is None:
            kind = "task"
            result = run_job(base_url, key, "/agent/job/start", {**scope, "task": prompt})
        job, client_seconds = result
        model = sum(s["elapsed"] or 0 for s in job["steps"] if s["kind"] == "model_call")
        run_seconds = seconds_between(job["started_at"], job["finished_at"])
        total_seconds = seconds_between(job["created_at"], job["finished_at"])
        rows.append((run_seconds, total_seconds, client_seconds, model))
        answer = (job.get("final_result") or {}).get("message", {}).get("content") or (
            job.get("final_result") or {}
        ).get("text", job.get("error", ""))
        print(
            f"  {kind} turn {turn + 1} ({job['status']}): model {model:.2f} s of "
            f"{run_seconds:.2f} s running, {total_seconds:.2f} s from creation, "
            f"{client_seconds:.2f} s seen by the client; "
            f"outside the model {100 * (1 - model / run_seconds):.1f}% / "
            f"{100 * (1 - model / total_seconds):.1f}% / {100 * (1 - model / client_seconds):.1f}%"
            f" -- {str(answer).strip()[:60]!r}"
        )
    if kind == "task":
        print("  NOTE: POST /agent/chat answered 404; these are task jobs, not chat turns.")
    run_s, total_s, client_s, model_s = (sum(column) for column in zip(*rows, strict=True))
    print(
        f"Share outside the model over {turns} {kind} jobs (sum over sum): "
        f"{100 * (1 - model_s / run_s):.1f}% of the job's running time, "
        f"{100 * (1 - model_s / total_s):.1f}% from its creation, "
        f"{100 * (1 - model_s / client_s):.1f}% as the polling client saw it"
    )


def figures(base_url: str, key: str, model: str, *, runs: int, turns: int) -> None:
    print(f"Generated tokens/s through /api.php ({runs} runs of 128 tokens, temperature 0.8):")
    rates = tokens_per_second(base_url, key, model, runs)
    print(f"Generated tokens/s: median {statistics.median(rates):.1f}, min {min(rates):.1f}")
    print(f"Chat turns ({turns}):")
    outside_model_shares(base_url, key, turns)


# --- A fresh clone and `make run` ---------------------------------------------------------

# Where each phase of a first `make run` starts: the first line of its output holding the
# text (the Makefile's echoes and commands, then scripts/run.py's lines). Older trees lack
# some of them; a phase not seen is merged into the one before.
PHASES = (
    ("venv", " -m venv "),
    ("pip upgrade", "pip install -q --upgrade pip"),
    ("service packages", " -m pip install -q -e "),
    ("local runtime", "Installing the local model runtime"),
    ("model package", "Installing the model "),
    ("scripts.run starts, Django set up", "-m scripts.run"),
    ("migrate", "migrating the database"),
    ("static files", "collecting static files"),
    ("demo key", " demo key in "),
    ("model file checked, runtime started", "assembling the model file"),
    ("web and worker started, all up", "starting the web server"),
)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class MakeRun:
    """`make run` in ``clone``, its output timed line by line into ``log_path``."""

    def __init__(self, clone: Path, env: dict[str, str], log_path: Path) -> None:
        self.started = time.perf_counter()
        self.lines: list[tuple[float, str]] = []
        self.process = subprocess.Popen(
            ["make", "run"],
            cwd=clone,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        self.reader = threading.Thread(target=self._read, args=(log_path,), daemon=True)
        self.reader.start()

    def _read(self, log_path: Path) -> None:
        assert self.process.stdout is not None
        with log_path.open("a") as log:
            for line in self.process.stdout:
                self.lines.append((time.perf_counter(), line.rstrip("\n")))
                log.write(line)
                log.flush()

    def wait_ready(self, timeout: float) -> float | None:
        """Seconds from the start to the ``ready:`` line; None if make exited or timed out."""
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline and self.process.poll() is None:
            for at, line in self.lines[seen:]:
                if line.startswith("ready: "):
                    return at - self.started
            seen = len(self.lines)
            time.sleep(0.2)
        return None

    def phases(self, ready: float, before: float = 0.0) -> list[tuple[str, float]]:
        """(phase, seconds) up to ``ready``; ``before`` seconds (the clone) come first."""
        starts = [("clone", -before), ("make", 0.0)]
        for name, marker in PHASES:
            at = next((t for t, line in self.lines if marker in line), None)
            if at is not None and at - self.started >= starts[-1][1]:
                starts.append((name, at - self.started))
        ends = [start for _, start in starts[1:]] + [ready]
        return [(name, end - start) for (name, start), end in zip(starts, ends, strict=True)]

    def stop(self) -> int:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        returncode = self.process.wait(timeout=120)
        self.reader.join(timeout=10)
        return returncode


def print_phases(title: str, phases: list[tuple[str, float]]) -> None:
    total = sum(seconds for _, seconds in phases)
    print(f"{title}: {total:.1f} s")
    for name, seconds in phases:
        print(f"  {name:<36} {seconds:7.1f} s")


def make_env(args: argparse.Namespace, port: int, workdir: Path) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "PORT": str(port),
        "EMBEDDED_RUNTIME_PORT": str(embedded_runtime.free_port()),
    }
    # --model names a packaged model: `make run` installs and serves that one.
    for packaged in embedded_runtime.MODELS.values():
        if packaged.alias == args.model:
            env["EMBEDDED_MODEL"] = packaged.name
    if args.no_pip_cache:
        env["PIP_NO_CACHE_DIR"] = "1"
    elif args.cold:
        env["PIP_CACHE_DIR"] = str(workdir / "pip-cache")  # empty: every package downloaded
    elif args.pip_cache_dir:
        env["PIP_CACHE_DIR"] = str(args.pip_cache_dir)
    return env


def fresh_clone(args: argparse.Namespace) -> int:
    port = embedded_runtime.free_port()
    workdir = Path(tempfile.mkdtemp(prefix="llmgw-fresh-"))
    clone = workdir / "llmgw"
    log_path = workdir / "make-run.log"
    env = make_env(args, port, workdir)
    cache = (
        "pip's cache off"
        if args.no_pip_cache
        else "pip's cache empty"
        if args.cold
        else f"pip's cache {env.get('PIP_CACHE_DIR', 'as configured')}"
    )
    print(f"Cloning {args.commit} into {clone}; `make run` logs to {log_path} ({cache})")
    t0 = time.perf_counter()
    subprocess.run(["git", "clone", "-q", str(PROJECT_DIR), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", args.commit], check=True)
    cloned = time.perf_counter() - t0
    run = MakeRun(clone, env, log_path)
    family: set[int] = set()
    try:
        ready = run.wait_ready(args.timeout)
        if ready is None:
            print(log_path.read_text()[-4000:])
            print("`make run` exited or timed out before ready")
            return 1
        print_phases("Fresh clone -> `make run` ready", run.phases(ready, before=cloned))
        key = (clone / "var" / "demo_key").read_text().strip()
        base_url = f"http://127.0.0.1:{port}"
        model = args.model
        answer = call(
            "POST",
            f"{base_url}/api.php",
            {
                "api_key": key,
                "model": model,
                "prompt": QUESTION,
                "options": {"temperature": 0, "num_predict": 32, "stop": ["\n"]},
            },
        )
        t_answer = time.perf_counter() - t0
        print(f"Fresh clone -> first /api.php answer: {t_answer:.1f} s: {answer}")
        if not args.setup_only:
            figures(base_url, key, model, runs=args.runs, turns=args.turns)
        family = descendants(run.process.pid)
    finally:
        returncode = run.stop()
    clean = stopped_cleanly(returncode, family)
    if clean and args.again:
        clean = run_again(clone, env, log_path, args.timeout)
    return 0 if clean else 1


def stopped_cleanly(returncode: int, family: set[int]) -> bool:
    left = [pid for pid in family if alive(pid)]
    # make ends itself with the SIGINT it got once its child is done ("Interrupt").
    clean = returncode in (0, -signal.SIGINT)
    print(
        f"After Ctrl-C: make exited {returncode} ({'clean' if clean else 'NOT clean'}); "
        f"{len(family)} processes had been started, {len(left)} still alive {left or ''}"
    )
    return clean and not left


def run_again(clone: Path, env: dict[str, str], log_path: Path, timeout: float) -> bool:
    """A second `make run` in the same clone (everything installed): time to ready."""
    run = MakeRun(clone, env, log_path)
    family: set[int] = set()
    try:
        ready = run.wait_ready(timeout)
        if ready is None:
            print("the second `make run` exited or timed out before ready")
            return False
        print_phases("Second `make run` in that clone -> ready", run.phases(ready))
        family = descendants(run.process.pid)
    finally:
        returncode = run.stop()
    return stopped_cleanly(returncode, family)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-pip-cache", action="store_true", help="PIP_NO_CACHE_DIR=1.")
    parser.add_argument(
        "--cold", action="store_true", help="an empty PIP_CACHE_DIR: every package downloaded"
    )
    parser.add_argument("--pip-cache-dir", type=Path, help="PIP_CACHE_DIR for `make run`")
    parser.add_argument("--commit", default="HEAD", help="the commit to clone (default HEAD)")
    parser.add_argument(
        "--again", action="store_true", help="then a second `make run` in the same clone"
    )
    parser.add_argument("--setup-only", action="store_true", help="Only time the setup.")
    parser.add_argument("--base-url", help="Measure this running service instead.")
    parser.add_argument("--key-file", type=Path, default=PROJECT_DIR / "var" / "demo_key")
    parser.add_argument(
        "--model",
        default=embedded_runtime.MODEL_ALIAS,
        help="the model to call; a packaged model's name (qwen2.5-coder:1.5b) is also the one"
        " `make run` installs and serves",
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=1800.0, help="For `make run`.")
    args = parser.parse_args()
    if args.base_url:
        key = args.key_file.read_text().strip()
        figures(args.base_url.rstrip("/"), key, args.model, runs=args.runs, turns=args.turns)
        return 0
    return fresh_clone(args)


if __name__ == "__main__":
    sys.exit(main())
