"""The supervised group of ``make run`` (scripts/run.py): child processes whose output is
prefixed with their name, readiness checks, and a stop in waves with a deadline."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TextIO

from scripts import embedded_runtime

BASE_DIR = Path(__file__).resolve().parent.parent


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen
    # Stopped after every child of a lower wave has ended (the model runtime goes last, so
    # that a job finishing its model call while the worker stops is not cut off).
    wave: int = 0
    pump: threading.Thread | None = field(default=None, repr=False)
    # Where its lines go instead of the terminal once diverted (Group.divert).
    log: Path | None = None
    sink: TextIO | None = field(default=None, repr=False)


class Group:
    """Child processes, each in its own session, whose output is prefixed with their name.

    Own sessions keep the terminal's Ctrl-C away from the children, so that only the
    supervisor decides the order and the deadline of a stop, and so that a whole process
    tree (qcluster's workers, gunicorn's) can be signalled through its group.
    """

    def __init__(self, out=sys.stdout) -> None:
        self.children: list[Child] = []
        self.out = out
        self.lock = threading.Lock()
        self.stop_signal: int | None = None
        self.hurry = False

    # Output ---------------------------------------------------------------------------

    def write(self, name: str, text: str) -> None:
        with self.lock:
            for line in text.splitlines() or [""]:
                self.out.write(f"{name:<7} | {line}\n")
            self.out.flush()

    def say(self, text: str) -> None:
        self.write("run", text)

    def block(self, text: str) -> None:
        """Unprefixed lines (the curl lines), kept together."""
        with self.lock:
            self.out.write(text)
            self.out.flush()

    def _pump(self, child: Child) -> None:
        assert child.process.stdout is not None
        for raw in iter(child.process.stdout.readline, b""):
            text = raw.decode(errors="replace").rstrip("\n")
            with self.lock:
                sink = child.sink
                if sink is not None:
                    sink.write(text + "\n")
                    sink.flush()
            if sink is None:
                self.write(child.name, text)

    def divert(self, child: Child, path: Path) -> None:
        """From now on, ``child``'s lines go to ``path`` (appended), not to the terminal."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with self.lock:
            child.log, child.sink = path, path.open("a", encoding="utf-8")

    def tail(self, child: Child, lines: int = 20) -> None:
        """Shows the last ``lines`` lines ``child`` wrote to its log, if it was diverted."""
        if child.log is None:
            return
        if child.pump is not None:
            child.pump.join(timeout=2)  # what it wrote before it ended
        last = child.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        self.say(f"the last lines of {child.log}:")
        self.write(child.name, "\n".join(last))

    # Signals --------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum
        else:
            self.hurry = True

    # Processes ------------------------------------------------------------------------

    def spawn(self, name: str, argv: list[str], env: dict[str, str], *, wave: int = 0) -> Child:
        process = subprocess.Popen(
            argv,
            cwd=BASE_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        child = Child(name=name, argv=argv, process=process, wave=wave)
        child.pump = threading.Thread(target=self._pump, args=(child,), daemon=True)
        child.pump.start()
        self.children.append(child)
        return child

    def exited(self) -> Child | None:
        return next((c for c in self.children if c.process.poll() is not None), None)

    def sleep(self, seconds: float) -> None:
        """Sleeps, waking early for a signal or a child's exit."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.stop_signal is None and not self.exited():
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    def stop(self, grace: float) -> None:
        """Stops every child, wave by wave: SIGTERM to each child of the wave, then, after
        at most ``grace`` seconds, SIGKILL to the whole process group of each.

        SIGTERM goes to the child alone, so that gunicorn and qcluster stop their own
        workers in their own order (django-q2 hangs when its workers get the signal
        directly); the SIGKILL to the group then ends whatever is left, grandchildren too.
        """
        for wave in sorted({c.wave for c in self.children}):
            self._stop_wave([c for c in self.children if c.wave == wave], grace)
        for child in self.children:
            if child.pump is not None:
                child.pump.join(timeout=2)
            with self.lock:
                if child.sink is not None:
                    child.sink.close()
                    child.sink = None

    def _stop_wave(self, children: list[Child], grace: float) -> None:
        for child in children:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and not self.hurry:
            if all(c.process.poll() is not None for c in children):
                break
            time.sleep(0.1)
        stragglers = [c.name for c in children if c.process.poll() is None]
        if stragglers:
            self.say(f"killing {', '.join(stragglers)} (still running after {grace:g} s)")
        for child in children:
            # The group outlives its leader when grandchildren remain; kill it anyway.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.process.pid, signal.SIGKILL)
            child.process.wait()


def wait_ready(group: Group, checks: dict[str, str], timeout: float) -> str | None:
    """Waits until every URL answers; returns why not if time ran out.

    Returns early, with None, on a signal or a child's exit: the caller looks at those.
    """
    pending = dict(checks)
    deadline = time.monotonic() + timeout
    while pending and group.stop_signal is None and group.exited() is None:
        if time.monotonic() > deadline:
            return f"{', '.join(pending.values())} did not answer within {timeout:g} s"
        for name, url in list(pending.items()):
            if embedded_runtime.answers(url, timeout=1.0):
                group.say(f"{name} answers at {url}")
                del pending[name]
        group.sleep(0.2)
    return None


def supervise(
    group: Group,
    checks: dict[str, str],
    *,
    banner: str,
    ready_timeout: float,
    divert: dict[str, Path],
) -> str | None:
    """Waits until every URL of ``checks`` answers, diverts the output of the children
    named in ``divert`` to their files, prints ``banner``, then runs until a signal
    (returns None) or a child's exit or a readiness time-out (returns what happened)."""
    problem = wait_ready(group, checks, ready_timeout)
    if problem is None and group.stop_signal is None and group.exited() is None:
        for child in group.children:
            if child.name in divert:
                group.divert(child, divert[child.name])
        group.block(banner)
        while group.stop_signal is None and group.exited() is None:
            group.sleep(1.0)
    if group.stop_signal is not None:
        return None
    if problem is None:
        child = group.exited()
        assert child is not None
        problem = f"{child.name} exited with status {child.process.returncode}"
        group.tail(child)
    return problem
