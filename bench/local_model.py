"""Figures of the one-command setup and the embedded model.

    python bench/local_model.py                   # fresh clone -> `make run` -> figures
    python bench/local_model.py --no-pip-cache    # the same with pip's cache off (minutes)
    python bench/local_model.py --base-url http://127.0.0.1:8000 --key-file var/demo_key

The first two clone the committed HEAD of this repository into a temporary directory, run
`make run` there as a newcomer would (venv, install, migrate, demo key, web + worker +
embedded model), and time it up to "ready" and to the first answer of `/api.php`. Then,
against that service (or the one named by ``--base-url``):

* generated tokens/s: ``usage.completion_tokens / elapsed`` of `/api.php` calls (elapsed
  includes the prompt's evaluation and the gateway, so this slightly undercounts the
  model's own speed);
* the share of a chat turn spent outside the model: per chat job, (started -> finished)
  minus the ``model_call`` steps' elapsed, over (started -> finished); also from the job's
  creation, and as the client saw it (POST -> finished seen by polling every 50 ms).
  Falls back to task jobs, saying so, when `/agent/chat` is not there.

Finally the clone's `make run` gets SIGINT (a terminal's Ctrl-C) and every process it
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


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def fresh_clone(args: argparse.Namespace) -> int:
    port = embedded_runtime.free_port()
    if not embedded_runtime.port_is_free(embedded_runtime.PORT):
        print(f"port {embedded_runtime.PORT} (the embedded runtime's) is in use; stop that first")
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="llmgw-fresh-"))
    clone = workdir / "llmgw"
    log_path = workdir / "make-run.log"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "PORT": str(port),
    }
    if args.no_pip_cache:
        env["PIP_NO_CACHE_DIR"] = "1"
    print(f"Cloning into {clone}; `make run` logs to {log_path}")
    t0 = time.perf_counter()
    subprocess.run(["git", "clone", "-q", str(PROJECT_DIR), str(clone)], check=True)
    with log_path.open("w") as log:
        make = subprocess.Popen(
            ["make", "run"],
            cwd=clone,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    t_ready = None
    family: set[int] = set()
    try:
        deadline = time.monotonic() + args.timeout
        while t_ready is None:
            if make.poll() is not None or time.monotonic() > deadline:
                print(log_path.read_text()[-4000:])
                print("`make run` exited or timed out before ready")
                return 1
            if any(line.startswith("ready: ") for line in log_path.read_text().splitlines()):
                t_ready = time.perf_counter()
            time.sleep(0.2)
        key = (clone / "var" / "demo_key").read_text().strip()
        base_url = f"http://127.0.0.1:{port}"
        answer = call(
            "POST",
            f"{base_url}/api.php",
            {
                "api_key": key,
                "model": embedded_runtime.MODEL_ALIAS,
                "prompt": QUESTION,
                "options": {"temperature": 0, "num_predict": 32, "stop": ["\n"]},
            },
        )
        t_answer = time.perf_counter()
        cache = "pip's cache OFF" if args.no_pip_cache else "pip's wheel cache warm"
        print(f"Fresh clone -> `make run` ready: {t_ready - t0:.1f} s ({cache})")
        print(f"Fresh clone -> first /api.php answer: {t_answer - t0:.1f} s: {answer}")
        if not args.setup_only:
            figures(base_url, key, embedded_runtime.MODEL_ALIAS, runs=args.runs, turns=args.turns)
        family = descendants(make.pid)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        returncode = make.wait(timeout=120)
    left = [pid for pid in family if alive(pid)]
    # make ends itself with the SIGINT it got once its child is done ("Interrupt").
    clean = returncode in (0, -signal.SIGINT)
    print(
        f"After Ctrl-C: make exited {returncode} ({'clean' if clean else 'NOT clean'}); "
        f"{len(family)} processes had been started, {len(left)} still alive {left or ''}"
    )
    return 0 if clean and not left else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-pip-cache", action="store_true", help="PIP_NO_CACHE_DIR=1.")
    parser.add_argument("--setup-only", action="store_true", help="Only time the setup.")
    parser.add_argument("--base-url", help="Measure this running service instead.")
    parser.add_argument("--key-file", type=Path, default=PROJECT_DIR / "var" / "demo_key")
    parser.add_argument("--model", default=embedded_runtime.MODEL_ALIAS)
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
