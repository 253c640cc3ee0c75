"""``make run``: set up the service and run all of it as one supervised group.

1. Reads ``.env`` if present (variables already in the environment win; empty values
   mean "use the default").
2. Migrates the database, collects the static files (served by whitenoise) and makes sure
   a demo key exists: its plain text is kept in ``var/demo_key`` (mode 0600), and a new key
   is made with ``create_api_key`` only when that one is missing, revoked or expired.
3. Starts, each in its own process group: the embedded model runtime (unless
   ``MODEL_RUNTIME_URL`` points elsewhere), gunicorn and a django-q2 cluster.
4. Waits until the runtime and the web answer, prints ready-to-paste ``curl`` lines, then
   "ready". From there it is quiet unless ``LOG_LEVEL`` asks otherwise: the web and the
   worker run at ``WARNING`` (so the worker's schedule lines do not scroll the curl lines
   away, while warnings and errors still show), and the model runtime, whose level cannot
   be set, writes to ``var/log/runtime.log``; its last lines are shown if it exits.
5. Supervises: Ctrl-C (SIGINT), SIGTERM or SIGHUP stop every child (SIGTERM to it, then
   SIGKILL to its whole process group after ``--grace`` seconds; a second Ctrl-C does not
   wait), the web and the worker first, the model runtime after them. When one child
   exits on its own, the others are stopped and this exits 1.

Environment read here (besides the service's own settings): ``HOST`` (default 127.0.0.1)
and ``PORT`` (8000) of the web server, ``WEB_CONCURRENCY`` and ``GUNICORN_WORKER_CONNECTIONS``
(see ``deploy/gunicorn.conf.py``), ``EMBEDDED_RUNTIME_PORT`` (8089),
``EMBEDDED_RUNTIME_THREADS`` (1) and ``LOG_LEVEL`` (unset: quiet after "ready").
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shlex
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
if str(BASE_DIR) not in sys.path:  # also runnable as `python scripts/run.py`
    sys.path.insert(0, str(BASE_DIR))

from scripts import embedded_runtime, static_files, supervisor  # noqa: E402

DEMO_KEY_NAME = "demo"
DEMO_SCOPES = ("model", "agent")


# --- Environment ------------------------------------------------------------------------


def load_dotenv(path: Path) -> list[str]:
    """Sets the ``NAME=value`` lines of ``path`` that the environment does not set yet.

    Understands comments, blank lines, ``export NAME=value`` and quoted values. An empty
    value is skipped, as ``.env.example`` uses it for "the default".
    """
    if not path.exists():
        return []
    applied = []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name.isidentifier():
            raise SystemExit(f"{path}:{number}: expected NAME=value, got {raw!r}")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if value and name not in os.environ:
            os.environ[name] = value
            applied.append(name)
    return applied


def wants_embedded_runtime() -> bool:
    """True unless MODEL_RUNTIME_URL names another runtime than the embedded one."""
    url = os.environ.get("MODEL_RUNTIME_URL", "").strip().rstrip("/")
    return url in ("", embedded_runtime.URL)


def port_from_env(name: str, default: int) -> int:
    raw = os.environ.get(name) or str(default)
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise SystemExit(f"{name} must be a port number, got {raw!r}")
    return int(raw)


def web_address() -> tuple[str, int]:
    return os.environ.get("HOST") or "127.0.0.1", port_from_env("PORT", 8000)


def local_url(host: str, port: int) -> str:
    """The URL to reach a server bound to ``host`` from this machine."""
    reach = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    if ":" in reach and not reach.startswith("["):
        reach = f"[{reach}]"
    return f"http://{reach}:{port}"


# --- Setup (in this process, before any child starts) -----------------------------------


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def write_private(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` with mode 0600, atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text + "\n")
    os.replace(tmp, path)


def ensure_demo_key(path: Path) -> tuple[str, bool]:
    """The plain demo key kept in ``path``, and whether it was made now.

    A new key (owner ``demo``, scopes model and agent) is made only when the kept one is
    missing, revoked, expired or lacks a scope; the owner stays the same user, so the demo
    conversations survive a new key.
    """
    from django.core.management import call_command

    from core.exceptions import InvalidApiKey
    from gateway import services

    if path.exists():
        plain = path.read_text().strip()
        try:
            api_key = services.api_key_authenticate(plain)
        except InvalidApiKey:
            api_key = None
        if api_key is not None and set(DEMO_SCOPES) <= set(api_key.scopes):
            return plain, False
    out = io.StringIO()
    call_command("create_api_key", name=DEMO_KEY_NAME, scopes=",".join(DEMO_SCOPES), stdout=out)
    plain = out.getvalue().strip().splitlines()[-1]
    write_private(path, plain)
    return plain, True


def prepare(say) -> tuple[str, Path]:
    """Migrates, collects static files (when changed), ensures the demo key; returns the
    key and its file."""
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    say("migrating the database")
    call_command("migrate", interactive=False, verbosity=0)
    static_files.collect(say)
    clear_metrics(settings.METRICS_DIR)
    key_path = settings.VAR_DIR / "demo_key"
    plain, created = ensure_demo_key(key_path)
    say(f"{'created a new' if created else 'using the'} demo key in {key_path}")
    connections.close_all()
    return plain, key_path


def clear_metrics(directory: Path) -> None:
    """Empties the metrics of the previous run (core.metrics): the counters of GET /metrics
    start from zero with the service, as Prometheus expects of a restart."""
    for path in directory.glob("*.db"):
        path.unlink(missing_ok=True)


# --- Putting it together ----------------------------------------------------------------


def curl_lines(base_url: str, key: str, key_path: Path, model: str) -> str:
    auth = shlex.quote(f"Authorization: Bearer {key}")
    json_type = "-H 'Content-Type: application/json'"
    api_body = json.dumps(
        {
            "api_key": key,
            "model": model,
            "prompt": "Q: What is the capital of France?\nA:",
            "options": {"temperature": 0, "num_predict": 32, "stop": ["\n"]},
        }
    )
    chat_body = json.dumps(
        {
            "source": "demo",
            "scope_type": "user",
            "scope_id": 1,
            "prompt": "Hello! Which city is the capital of France?",
        }
    )
    task_body = json.dumps(
        {"source": "demo", "scope_type": "user", "scope_id": 1, "task": "What is 17 * 23?"}
    )
    pick = 'python3 -c \'import json,sys; d=json.load(sys.stdin); print(d["data"]["job_id"])\''
    return f"""
Demo key (kept in {key_path}): {key}

# The stateless model endpoint (the prompt goes to the model as given, a text completion):
curl -s {base_url}/api.php {json_type} \\
  -d '{api_body}'

# A chat turn: it answers a job id (and the conversation id) at once; the job runs the model.
JOB=$(curl -s {base_url}/agent/chat -H {auth} {json_type} \\
  -d '{chat_body}' | {pick}); echo "$JOB"

# The job: status, steps and, once finished, final_result.message.content (repeat until finished).
curl -s {base_url}/agent/job/$JOB -H {auth}

# A task job (its status as above), and a cancel (a finished job answers 409):
JOB=$(curl -s {base_url}/agent/job/start -H {auth} {json_type} \\
  -d '{task_body}' | {pick}); echo "$JOB"
curl -s -X POST {base_url}/agent/job/$JOB/cancel -H {auth}

# The configured runtimes, and an admin user for {base_url}/admin/:
.venv/bin/python manage.py check_runtime --generate
.venv/bin/python manage.py createsuperuser

"""


def runtime_probe_url(plan: Plan) -> str:
    if plan.embedded:
        return f"{os.environ['MODEL_RUNTIME_URL']}/v1/models"
    url = os.environ["MODEL_RUNTIME_URL"].rstrip("/")
    api = os.environ.get("MODEL_RUNTIME_API", "openai")
    return f"{url}/api/tags" if api == "ollama" else f"{url}/v1/models"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--grace", type=float, default=10.0, help="Seconds children get to stop (default 10)."
    )
    parser.add_argument(
        "--env-file",
        type=Path,
        default=BASE_DIR / ".env",
        help="Variables to read if present (default: .env of the project).",
    )
    parser.add_argument(
        "--ready-timeout",
        type=float,
        default=180.0,
        help="Seconds to wait for the runtime and the web to answer (default 180).",
    )
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Plan:
    host: str
    port: int
    runtime_port: int | None  # the embedded runtime's, None when the runtime is elsewhere
    # No LOG_LEVEL asked for: warnings and errors only, the runtime's lines in a file.
    quiet: bool = True

    @property
    def embedded(self) -> bool:
        return self.runtime_port is not None

    @property
    def base_url(self) -> str:
        return local_url(self.host, self.port)


def make_plan(say) -> Plan | None:
    """What to start, from the environment; None (having said why) when it cannot run."""
    runtime_port = None
    if wants_embedded_runtime():
        missing = embedded_runtime.missing_modules()
        if missing:
            needs = ", ".join(missing)
            say(f"the embedded runtime needs {needs}: {embedded_runtime.INSTALL_HINT}")
            return None
        api = os.environ.get("MODEL_RUNTIME_API") or "openai"
        if api != "openai":
            say(f"the embedded runtime speaks MODEL_RUNTIME_API=openai, not {api!r}")
            return None
        runtime_port = port_from_env("EMBEDDED_RUNTIME_PORT", embedded_runtime.PORT)
        os.environ["MODEL_RUNTIME_URL"] = f"http://{embedded_runtime.HOST}:{runtime_port}"
        os.environ["MODEL_RUNTIME_API"] = "openai"
        # The agents use the model the runtime serves, unless AGENT_MODEL says otherwise.
        os.environ.setdefault("AGENT_MODEL", embedded_runtime.chosen_model().alias)
    host, port = web_address()
    ports = [(host, port)] + ([(embedded_runtime.HOST, runtime_port)] if runtime_port else [])
    busy = [str(p) for h, p in ports if not embedded_runtime.port_is_free(p, h)]
    if busy:
        say(
            f"port {', '.join(busy)} is in use (another `make run`?); PORT=... moves the web, "
            "EMBEDDED_RUNTIME_PORT=... the model runtime"
        )
        return None
    quiet = not os.environ.get("LOG_LEVEL")
    return Plan(host=host, port=port, runtime_port=runtime_port, quiet=quiet)


def start_children(group: supervisor.Group, plan: Plan, var_dir: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
    if plan.quiet:
        env["LOG_LEVEL"] = "WARNING"
    python = sys.executable
    if plan.embedded:
        group.say("assembling the model file (checked by sha256)")
        model = embedded_runtime.chosen_model()
        model_path = embedded_runtime.ensure_model(var_dir / "models", model)
        raw_threads = os.environ.get("EMBEDDED_RUNTIME_THREADS") or "1"
        if not raw_threads.isdigit() or int(raw_threads) < 1:
            raise SystemExit(f"EMBEDDED_RUNTIME_THREADS must be 1 or more, got {raw_threads!r}")
        argv = embedded_runtime.server_command(
            model_path,
            alias=model.alias,
            port=plan.runtime_port,
            threads=int(raw_threads),
            python=python,
            transcript_chat=model.transcript_chat,
        )
        group.spawn("runtime", argv, embedded_runtime.server_env(env), wave=1)
    group.say("starting the web server (gunicorn) and the worker (django-q2)")
    bind = f"{plan.host}:{plan.port}"
    group.spawn("web", [python, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "-b", bind], env)
    group.spawn("worker", [python, "manage.py", "qcluster"], env)


def ready_lines(plan: Plan, model: str, runtime_url: str, var_dir: Path) -> str:
    """The lines after the curl lines: how to hear more, then the ``ready:`` line."""
    runtime = "embedded" if plan.embedded else "at"
    quiet = ""
    if plan.quiet:
        where = (
            f"; the model runtime's in {var_dir / 'log' / 'runtime.log'}" if plan.embedded else ""
        )
        quiet = (
            "Quiet from here: warnings and errors only (LOG_LEVEL=INFO make run shows every "
            f"line{where}).\n"
        )
    return quiet + (
        f"ready: web {plan.base_url}, runtime {runtime} {runtime_url} ({model}), "
        "worker django-q2. Ctrl-C stops all.\n"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    group = supervisor.Group()
    applied = load_dotenv(args.env_file)
    if applied:
        group.say(f"read {args.env_file}: {', '.join(applied)}")
    plan = make_plan(group.say)
    if plan is None:
        return 2
    setup_django()
    key, key_path = prepare(group.say)
    from django.conf import settings

    var_dir = Path(settings.VAR_DIR)
    banner = curl_lines(plan.base_url, key, key_path, settings.AGENT_MODEL) + ready_lines(
        plan, settings.AGENT_MODEL, settings.MODEL_RUNTIME_URL, var_dir
    )
    group.install_signal_handlers()
    problem = "run crashed"
    try:
        start_children(group, plan, var_dir)
        checks = {"runtime": runtime_probe_url(plan), "web": f"{plan.base_url}/healthz"}
        divert = {"runtime": var_dir / "log" / "runtime.log"} if plan.quiet else {}
        problem = supervisor.supervise(
            group, checks, banner=banner, ready_timeout=args.ready_timeout, divert=divert
        )
    finally:
        # Also on an unexpected error here: no child may outlive this process.
        if problem is None:
            group.say(f"stopping ({signal.Signals(group.stop_signal).name})")
        else:
            group.say(f"{problem}; stopping the others")
        group.stop(args.grace)
    if problem is not None:
        return 1
    group.say("stopped")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C during the setup, before any child started
        sys.exit(130)
