"""The packaged models side by side on the embedded runtime: size, load time, memory, speed.

    .venv/bin/python bench/model_choice.py             # every packaged model installed
    .venv/bin/python bench/model_choice.py --runs 9 --threads 1 --model gemma3-270m

One model after the other (``scripts/embedded_runtime.MODELS``; a model whose package is
not installed is named with the command that installs it), each served by the embedded
runtime as ``make run`` serves it (the prebuilt one when installed: run it with a venv
that has only the one built from source to measure that), on a free loopback port:

* installed size: the bytes of the model's packages (their RECORD), and the GGUF file;
* load: seconds from starting the server to ``/v1/models`` answering;
* generated tokens/s: ``usage.completion_tokens`` over the wall time of ``POST
  /v1/completions`` (128 tokens at temperature 0.8, one seed a run, after one warm-up
  call), median and lowest;
* peak memory: the server process's ``VmHWM`` after the runs.

The answers' quality is measured by ``bench/chat_quality.py --model NAME`` and
``bench/task_quality.py --model NAME``; docs/local-model.md puts the figures together.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from importlib import metadata
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from scripts import embedded_runtime  # noqa: E402

STORY = "Once upon a time, in a small village,"
MB = 1_000_000


def installed_bytes(model: embedded_runtime.PackagedModel) -> int:
    """The bytes of the files of every package its requirements file lists."""
    names = re.findall(r"^([A-Za-z0-9_.-]+)==", model.requirements.read_text(), re.M)
    return sum(f.size or 0 for name in names for f in metadata.distribution(name).files or ())


def complete(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"{url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.load(response)


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1)) * 1000 / MB


def measure(model: embedded_runtime.PackagedModel, runs: int, threads: int) -> dict:
    path = embedded_runtime.ensure_model(PROJECT_DIR / "var" / "models", model)
    port = embedded_runtime.free_port()
    url = f"http://{embedded_runtime.HOST}:{port}"
    argv = embedded_runtime.server_command(
        path, alias=model.alias, port=port, threads=threads, transcript_chat=model.transcript_chat
    )
    started = time.perf_counter()
    process = subprocess.Popen(
        argv,
        env=embedded_runtime.server_env(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        embedded_runtime.wait_until_answering(f"{url}/v1/models", timeout=180, process=process)
        load = time.perf_counter() - started
        complete(url, {"prompt": STORY, "max_tokens": 16, "temperature": 0})  # warm-up
        rates = []
        for seed in range(runs):
            body = {"prompt": STORY, "max_tokens": 128, "temperature": 0.8, "seed": seed}
            before = time.perf_counter()
            answer = complete(url, body)
            rates.append(answer["usage"]["completion_tokens"] / (time.perf_counter() - before))
        rss = peak_rss_mb(process.pid)
    finally:
        embedded_runtime.stop(process)
    return {
        "installed": installed_bytes(model) / MB,
        "file": path.stat().st_size / MB,
        "load": load,
        "median": statistics.median(rates),
        "lowest": min(rates),
        "rss": rss,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="EMBEDDED_RUNTIME_THREADS")
    parser.add_argument(
        "--model", action="append", choices=embedded_runtime.MODELS, help="only these"
    )
    args = parser.parse_args(argv)
    runtime = embedded_runtime.runtime_module()
    if runtime is None:
        print(f"skipped: no embedded runtime installed ({embedded_runtime.INSTALL_HINT})")
        return 0
    version = metadata.version("xllamacpp" if runtime == "xllamacpp" else "llama-cpp-python")
    print(f"runtime: {runtime} {version}, {args.threads} thread(s), {args.runs} runs a model")
    print(
        f"{'model':<14} {'installed MB':>12} {'GGUF MB':>8} {'load s':>7} "
        f"{'tokens/s median':>15} {'lowest':>7} {'peak RSS MB':>11}"
    )
    for model in embedded_runtime.MODELS.values():
        if args.model and model.name not in args.model:
            continue
        if embedded_runtime.missing_modules(model):
            print(f"{model.name:<14} not installed: make install-local EMBEDDED_MODEL={model.name}")
            continue
        f = measure(model, args.runs, args.threads)
        print(
            f"{model.name:<14} {f['installed']:>12.0f} {f['file']:>8.0f} {f['load']:>7.1f} "
            f"{f['median']:>15.1f} {f['lowest']:>7.1f} {f['rss']:>11.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
