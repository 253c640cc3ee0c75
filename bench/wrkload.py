"""A closed-loop HTTP load from ``wrk`` (Debian's package), the load generator the issue's
figures were measured with, beside the instant-call probe of ``bench.asyncload``.

wrk is C on its own threads: at a few hundred requests per second it costs a fraction of
the CPU of a Python client, which on a two-core machine would otherwise take its share from
the server it measures. Its latencies are its own percentiles (microsecond buckets), its
errors the sockets' (connect, read, write, timeout) plus the answers that were not 2xx/3xx.
Requests still in flight when the time is up are dropped (wrk closes their connections),
not counted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench import asyncload

# Prints what the run measured as one JSON line at the end (wrk's ``done`` hook).
_SCRIPT = """
wrk.method = "POST"
wrk.body = [==[{body}]==]
wrk.headers["Content-Type"] = "application/json"
{headers}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\\nWRK-JSON {{"requests": %d, "duration_us": %d, "connect": %d, "read": %d, '
    .. '"write": %d, "status": %d, "timeout": %d, "p50_us": %d, "p99_us": %d}}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def available() -> bool:
    return shutil.which("wrk") is not None


@dataclass
class Load(asyncload.Load):
    """What one wrk run measured: :class:`bench.asyncload.Load` with wrk's own percentiles
    in place of the list of latencies."""

    p50: float = 0.0
    p99: float = 0.0

    def p(self, q: float) -> float:
        return {50: self.p50, 99: self.p99}[q]


async def run(spec: asyncload.Spec, *, threads: int = 2) -> Load:
    """The load of ``spec`` from wrk's ``spec.clients`` connections; its instant calls (with
    ``spec.probe_body``) from :func:`bench.asyncload.run` beside it."""
    lines = "\n".join(
        f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in (spec.headers or {}).items()
    )
    script = _SCRIPT.format(body=json.dumps(spec.body), headers=lines)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "load.lua"
        path.write_text(script)
        command = [
            "wrk",
            f"-t{min(threads, spec.clients)}",
            f"-c{spec.clients}",
            f"-d{spec.seconds:g}s",
            f"--timeout={spec.timeout:g}s",
            "-s",
            str(path),
            spec.url,
        ]
        process = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        probe = None
        if spec.probe_body is not None:
            probe = asyncio.create_task(asyncload.run(dataclasses.replace(spec, clients=0)))
        output, _ = await process.communicate()
        probed = await probe if probe is not None else None
    text = output.decode(errors="replace")
    marker = next((line for line in text.splitlines() if line.startswith("WRK-JSON ")), None)
    if process.returncode != 0 or marker is None:
        raise RuntimeError(f"wrk failed ({process.returncode}): {text[-2000:]}")
    figures = json.loads(marker.removeprefix("WRK-JSON "))
    errors = sum(figures[k] for k in ("connect", "read", "write", "status", "timeout"))
    load = Load(
        requests=figures["requests"],
        errors=errors,
        seconds=figures["duration_us"] / 1e6,
        p50=figures["p50_us"] / 1e6,
        p99=figures["p99_us"] / 1e6,
        probes=probed.probes if probed is not None else [],
    )
    if errors:
        kinds = ", ".join(
            f"{figures[k]} {k}"
            for k in ("connect", "read", "write", "status", "timeout")
            if figures[k]
        )
        load.first_error = f"wrk: {kinds} (status: answers that were not 2xx or 3xx)"
    return load
