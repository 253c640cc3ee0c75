"""Helpers of the tests that run ``scripts/run.py`` (``make run``) as a real process tree."""

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from scripts import embedded_runtime

PROJECT_DIR = Path(__file__).resolve().parent.parent


def _stat_fields(pid: int | str) -> list[str]:
    """The fields of /proc/PID/stat after the command name: state, ppid, pgrp, ..."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting to be reaped."""
    try:
        return _stat_fields(pid)[0] != "Z"
    except FileNotFoundError:
        return False


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(_stat_fields(entry.name)[1])
            except (FileNotFoundError, ProcessLookupError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = _stat_fields(entry.name)
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def start_run(tmp_path: Path, **env: str) -> tuple[subprocess.Popen, Path]:
    """``python -m scripts.run`` in its own session, with a fresh SQLite database and var
    directory under ``tmp_path``, the web on a free port, no .env, no ``LOG_LEVEL`` (quiet,
    as ``make run`` is by default); output in the log."""
    log = tmp_path / "run.log"
    base_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "PORT": str(embedded_runtime.free_port()),
        "WEB_CONCURRENCY": "1",
        "Q_WORKERS": "1",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "scripts.run", "--env-file", str(tmp_path / "none.env")],
        cwd=PROJECT_DIR,
        env={**base_env, **env},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return process, log


def wait_for_line(process: subprocess.Popen, log: Path, prefix: str, timeout: float) -> str:
    """Waits for a line of the log starting with ``prefix``; returns it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith(prefix):
                return line
        if process.poll() is not None:
            break
        time.sleep(0.1)
    pytest.fail(f"no line starting {prefix!r}:\n{log.read_text()[-3000:]}")


def post_json(url: str, body: dict, *, timeout: float = 60) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)
