"""``scripts/run.py`` (``make run``): its setup steps, and the supervised group run for real
with a loopback runtime in place of the embedded model."""

import json
import os
import runpy
import shlex
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway import services
from gateway.models import ApiKey
from scripts import embedded_runtime, run, supervisor
from tests.factories import wait_for
from tests.processes import (
    alive,
    descendants,
    group_members,
    post_json,
    start_run,
    wait_for_line,
)

# --- .env and the plan --------------------------------------------------------------------


def test_dotenv_sets_only_what_the_environment_lacks(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMGW_T_SET", "from-env")
    for name in ("LLMGW_T_NEW", "LLMGW_T_QUOTED", "LLMGW_T_EXPORTED", "LLMGW_T_EMPTY"):
        monkeypatch.delenv(name, raising=False)
    env_file = tmp_path / ".env"
    env_file.write_text(
        "# a comment\n\n"
        "LLMGW_T_SET=from-file\n"
        "LLMGW_T_NEW=new\n"
        "LLMGW_T_QUOTED='a b=c'\n"
        "export LLMGW_T_EXPORTED=yes\n"
        "LLMGW_T_EMPTY=\n"
    )
    applied = run.load_dotenv(env_file)
    assert applied == ["LLMGW_T_NEW", "LLMGW_T_QUOTED", "LLMGW_T_EXPORTED"]
    assert os.environ["LLMGW_T_SET"] == "from-env"
    assert os.environ["LLMGW_T_QUOTED"] == "a b=c"
    assert "LLMGW_T_EMPTY" not in os.environ  # empty means "the default"


def test_dotenv_refuses_a_malformed_line(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text("NOT A SETTING\n")
    with pytest.raises(SystemExit, match=r"\.env:1"):
        run.load_dotenv(env_file)


def test_a_missing_dotenv_is_fine(tmp_path):
    assert run.load_dotenv(tmp_path / ".env") == []


@pytest.mark.parametrize(
    ("url", "embedded"),
    [
        (None, True),
        ("", True),
        ("http://127.0.0.1:8089", True),
        ("http://127.0.0.1:8089/", True),
        ("http://127.0.0.1:11434", False),
        ("http://gpu-1:8000", False),
    ],
)
def test_the_embedded_runtime_runs_unless_the_runtime_url_points_elsewhere(
    monkeypatch, url, embedded
):
    if url is None:
        monkeypatch.delenv("MODEL_RUNTIME_URL", raising=False)
    else:
        monkeypatch.setenv("MODEL_RUNTIME_URL", url)
    assert run.wants_embedded_runtime() is embedded


def test_the_printed_curl_lines_are_valid_shell_and_json(tmp_path):
    text = run.curl_lines("http://127.0.0.1:8000", "llmgw_k_s", tmp_path / "demo_key", "m:1")
    api_line = next(line for line in text.splitlines() if line.startswith('  -d \'{"api_key"'))
    body = json.loads(shlex.split(api_line)[1])
    assert body["api_key"] == "llmgw_k_s"
    assert body["model"] == "m:1"
    assert body["prompt"] == "Q: What is the capital of France?\nA:"
    assert "/agent/chat -H 'Authorization: Bearer llmgw_k_s'" in text
    assert "/agent/job/$JOB" in text
    assert "curl -s -X POST http://127.0.0.1:8000/agent/job/$JOB/cancel" in text


# --- The demo key -------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_demo_key_is_made_once_and_kept_private(tmp_path):
    path = tmp_path / "demo_key"
    plain, created = run.ensure_demo_key(path)
    assert created
    assert path.read_text().strip() == plain
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    api_key = services.api_key_authenticate(plain)
    assert set(api_key.scopes) == {"model", "agent"}

    again, created_again = run.ensure_demo_key(path)
    assert (again, created_again) == (plain, False)
    assert ApiKey.objects.count() == 1


@pytest.mark.django_db
def test_a_revoked_demo_key_is_replaced_for_the_same_owner(tmp_path):
    path = tmp_path / "demo_key"
    old, _ = run.ensure_demo_key(path)
    old_key = services.api_key_authenticate(old)
    services.api_key_revoke(api_key=old_key)

    new, created = run.ensure_demo_key(path)
    assert created and new != old
    assert path.read_text().strip() == new
    assert services.api_key_authenticate(new).owner == old_key.owner


@pytest.mark.django_db
def test_a_demo_key_file_from_another_database_is_replaced(tmp_path):
    path = tmp_path / "demo_key"
    path.write_text("llmgw_aaaaaaaaaaaa_" + "b" * 40 + "\n")
    _, created = run.ensure_demo_key(path)
    assert created


# --- The supervised group -----------------------------------------------------------------

# A child that starts a grandchild and both ignore SIGTERM: only SIGKILL to the group works.
_STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"])
print("started", flush=True)
time.sleep(60)
"""


def test_stop_kills_children_and_grandchildren_that_ignore_sigterm(tmp_path):
    out = (tmp_path / "out.log").open("w")
    group = supervisor.Group(out=out)
    child = group.spawn("stubborn", [sys.executable, "-c", _STUBBORN], dict(os.environ))
    deadline = time.monotonic() + 10
    while len(group_members(child.process.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(group_members(child.process.pid)) == 2

    started = time.monotonic()
    group.stop(grace=0.5)
    assert time.monotonic() - started < 5
    # SIGKILL is delivered at once but a busy machine may take a moment to end the
    # grandchild, which no one waits for (its parent is gone).
    deadline = time.monotonic() + 5
    while group_members(child.process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(child.process.pid) == []
    out.close()
    log = (tmp_path / "out.log").read_text()
    assert "stubborn | started" in log
    assert "killing stubborn" in log


_ON_SIGTERM = """
import signal, sys, time
from pathlib import Path
def stop(signum, frame):
    exec(sys.argv[1])
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("up", flush=True)
time.sleep(60)
"""


def test_the_runtime_wave_is_stopped_after_the_others_have_ended(tmp_path):
    first, last = tmp_path / "first-ended", tmp_path / "last-saw"
    group = supervisor.Group(out=(tmp_path / "out.log").open("w"))
    env = dict(os.environ)
    group.spawn(
        "runtime",
        [
            sys.executable,
            "-c",
            _ON_SIGTERM,
            f"Path({str(last)!r}).write_text(str(Path({str(first)!r}).exists()))",
        ],
        env,
        wave=1,
    )
    group.spawn(
        "worker",
        [
            sys.executable,
            "-c",
            _ON_SIGTERM,
            f"time.sleep(0.5); Path({str(first)!r}).write_text('')",
        ],
        env,
    )
    deadline = time.monotonic() + 10
    while (tmp_path / "out.log").read_text().count("| up") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    group.stop(grace=5)
    assert last.read_text() == "True"


# A child that writes a line, then another once told to (a file appears), then fails.
_TWO_LINES = """
import sys, time
from pathlib import Path
print("before ready", flush=True)
while not Path(sys.argv[1]).exists():
    time.sleep(0.05)
print("after ready: an error", flush=True)
sys.exit(3)
"""


def test_a_diverted_child_writes_to_its_log_and_its_last_lines_show_when_it_exits(tmp_path):
    go, runtime_log = tmp_path / "go", tmp_path / "log" / "runtime.log"
    out = tmp_path / "out.log"
    group = supervisor.Group(out=out.open("w"))
    child = group.spawn("runtime", [sys.executable, "-c", _TWO_LINES, str(go)], dict(os.environ))
    wait_for(lambda: "runtime | before ready" in out.read_text(), what="the first line")
    group.divert(child, runtime_log)
    go.write_text("")
    assert child.process.wait(timeout=60) == 3
    assert group.exited() is child
    shown = out.read_text()
    assert "after ready" not in shown  # diverted: not on the terminal
    group.tail(child)
    group.stop(grace=5)
    assert runtime_log.read_text() == "after ready: an error\n"
    shown = out.read_text()
    assert f"run     | the last lines of {runtime_log}:" in shown
    assert "runtime | after ready: an error" in shown


@pytest.mark.parametrize(
    ("level", "loglevel", "accesslog"),
    [
        (None, "info", "-"),
        ("INFO", "info", "-"),
        ("DEBUG", "debug", "-"),
        ("WARNING", "warning", None),
    ],
)
def test_gunicorn_follows_log_level_and_its_access_lines_are_info(
    monkeypatch, level, loglevel, accesslog
):
    monkeypatch.delenv("LOG_FORMAT", raising=False)
    if level is None:
        monkeypatch.delenv("LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("LOG_LEVEL", level)
    conf = runpy.run_path(str(Path(run.BASE_DIR) / "deploy" / "gunicorn.conf.py"))
    assert (conf["loglevel"], conf["accesslog"]) == (loglevel, accesslog)


_LOG_EVERY_WAY = """
import logging, logging.config, sys
from core.logs import logging_config
logging.config.dictConfig(logging_config(json_format=sys.argv[1] == "json", level="WARNING"))
for name in ("django-q", "agents.runner", "gunicorn.access", "uvicorn.error"):
    logging.getLogger(name).info("info from %s", name)
    logging.getLogger(name).warning("warning from %s", name)
"""


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_at_warning_info_lines_are_dropped_and_warnings_still_show(log_format):
    result = subprocess.run(
        [sys.executable, "-c", _LOG_EVERY_WAY, log_format],
        cwd=run.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "info from" not in result.stderr
    assert "warning from django-q" in result.stderr  # the worker's schedule lines are INFO
    assert "warning from agents.runner" in result.stderr
    if log_format == "json":  # in text, gunicorn's own loggers are gunicorn's (above)
        assert "warning from gunicorn.access" in result.stderr


def test_a_child_that_exits_is_noticed(tmp_path):
    group = supervisor.Group(out=(tmp_path / "out.log").open("w"))
    group.spawn("short", [sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ))
    group.spawn("long", [sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ))
    group.sleep(10)
    child = group.exited()
    assert child is not None and child.name == "short" and child.process.returncode == 3
    group.stop(grace=5)
    assert all(c.process.returncode is not None for c in group.children)


# --- The whole of `make run`, with a loopback runtime -------------------------------------


@pytest.mark.slow
def test_run_serves_prints_ready_and_stops_every_child_on_ctrl_c(tmp_path, runtime_server):
    runtime_server.reset()
    runtime_server.script = lambda prompt, body: " Paris."
    process, log = start_run(
        tmp_path, MODEL_RUNTIME_URL=runtime_server.url, MODEL_RUNTIME_API="ollama"
    )
    try:
        wait_for_line(process, log, "ready: ", timeout=120)
        text = log.read_text()
        key = (tmp_path / "var" / "demo_key").read_text().strip()
        assert f"Demo key (kept in {tmp_path / 'var' / 'demo_key'}): {key}" in text
        base_url = text.split("ready: web ", 1)[1].split(",", 1)[0]
        answer = post_json(
            f"{base_url}/api.php",
            {"api_key": key, "model": "test-model", "prompt": "Q: Capital of France?"},
        )
        assert answer["ok"] is True and answer["response"] == " Paris."
        family = descendants(process.pid)
        assert len(family) >= 3  # gunicorn (+ workers), qcluster (+ its processes)
        # Quiet once ready (no LOG_LEVEL): no access line, none of django-q2's INFO lines
        # (its schedule lines every 30 s among them); the call's answer is all there is.
        text = log.read_text()
        assert "Quiet from here: warnings and errors only" in text
        assert "/api.php" not in text.split("ready: ", 1)[1]
        assert "Q Cluster" not in text
    finally:
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        returncode = process.wait(timeout=60)
    assert returncode == 0, log.read_text()[-3000:]
    assert not [pid for pid in family if alive(pid)]
    assert "run     | stopped" in log.read_text()


@pytest.mark.slow
def test_run_stops_everything_and_fails_when_a_child_dies(tmp_path, runtime_server):
    runtime_server.reset()
    process, log = start_run(
        tmp_path,
        MODEL_RUNTIME_URL=runtime_server.url,
        MODEL_RUNTIME_API="ollama",
        LOG_LEVEL="INFO",  # asked for: every line
    )
    try:
        wait_for_line(process, log, "ready: ", timeout=120)
        wait_for(lambda: "Q Cluster" in log.read_text(), what="django-q2's INFO lines")
        assert "Quiet from here" not in log.read_text()
        family = descendants(process.pid)
        web = next(
            pid
            for pid in family
            if "gunicorn" in Path(f"/proc/{pid}/cmdline").read_text()
            and int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            == process.pid
        )
        os.kill(web, signal.SIGKILL)
        returncode = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert returncode == 1
    assert "web exited with status -9; stopping the others" in log.read_text()
    assert not [pid for pid in family if alive(pid)]


def test_a_port_is_busy_while_listened_on_and_free_in_time_wait():
    import socket

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    assert not embedded_runtime.port_is_free(port)

    client = socket.create_connection(("127.0.0.1", port))
    server_side, _ = listener.accept()
    server_side.close()  # the server closes first: its end of the port goes to TIME_WAIT
    listener.close()
    client.close()
    assert embedded_runtime.port_is_free(port)


def test_the_embedded_runtime_does_not_inherit_what_would_reconfigure_it():
    env = run.embedded_runtime.server_env(
        {
            "PATH": "/usr/bin",
            "HOME": "/root",
            "PORT": "8000",  # the web's: llama_cpp.server would listen there
            "HOST": "0.0.0.0",
            "API_KEY": "x",  # would make the runtime demand a key
            "DATABASE_URL": "postgres://secret@db/x",
            "GGML_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
        }
    )
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "GGML_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
    }


def test_static_files_are_collected_again_only_when_a_source_changed(tmp_path, settings):
    from scripts import static_files

    source = tmp_path / "src"
    source.mkdir()
    (source / "app.css").write_text("body {}")
    settings.STATICFILES_DIRS = [source]
    settings.STATIC_ROOT = tmp_path / "static"
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    said: list[str] = []
    static_files.collect(said.append)
    assert said == ["collecting static files"]
    assert (tmp_path / "static" / "app.css").read_text() == "body {}"
    static_files.collect(said.append)
    assert said == ["collecting static files"]  # nothing changed: not collected again
    (source / "app.css").write_text("body { color: teal }")
    later = time.time() + 5  # collectstatic copies a file newer by a whole second
    os.utime(source / "app.css", (later, later))
    static_files.collect(said.append)
    assert said == ["collecting static files"] * 2
    assert (tmp_path / "static" / "app.css").read_text() == "body { color: teal }"
