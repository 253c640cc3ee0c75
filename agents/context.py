"""The runner's side of a running job: it carries out what the agent asks (``agents.actions``)
and records each request as a step: model and tool calls, notes, the agent's own work. It
checks for a cancel before each model and tool call and while the model generates, and
keeps the job's lease alive."""

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

from agents import events, services, worker
from agents.actions import Action, Discard, ModelCall, Note, Say, StepOutput, ToolCall, Work
from agents.models import Job, JobStatus, Step, StepKind, StepStatus
from agents.reply_stream import ReplyStream
from agents.tools import REGISTRY, Tool, ToolError
from core.db import release_pooled_connections
from core.http import storable
from gateway import runtime
from gateway import services as gateway
from gateway.models import UsageRecord

logger = logging.getLogger(__name__)


class JobCancelled(Exception):
    """The job's cancel was requested; the worker stops and marks it cancelled."""


class JobInterrupted(Exception):
    """The worker process is stopping: the job goes back to the queue for another one."""


class AgentFailure(Exception):
    """The agent cannot complete the job; the message becomes the job's error."""


def _stopped() -> Exception:
    """Why a job stops now: its worker is stopping, or a cancel was asked for."""
    return JobInterrupted() if worker.stopping.is_set() else JobCancelled()


class JobContext:
    def __init__(self, job: Job, token: str) -> None:
        self.job = job
        self.token = token
        self.profile = job.profile
        self._last_beat = time.monotonic()
        self.model_step: Step | None = None  # the last model call's (what Discard marks)

    # --- Cancellation and liveness ---------------------------------------------------------

    def should_stop(self) -> bool:
        """True once a cancel was requested. Also keeps the lease alive.

        Raises LeaseLost when the job is no longer this worker's. True as well once the
        worker process is stopping (:meth:`check` then raises :class:`JobInterrupted`).
        """
        if worker.stopping.is_set():
            return True
        now = time.monotonic()
        if now - self._last_beat >= settings.JOB_HEARTBEAT_SECONDS:
            status = services.job_heartbeat(self.job, token=self.token)
            self._last_beat = now
        else:
            status = services.job_status(self.job, token=self.token)
        return status == JobStatus.CANCELLING

    def _should_stop_waiting(self) -> bool:
        """:meth:`should_stop` while the model generates: the connection it took goes back
        to the pool until the next check."""
        try:
            return self.should_stop()
        finally:
            release_pooled_connections()

    def check(self) -> None:
        if self.should_stop():
            raise _stopped()

    # --- Steps -----------------------------------------------------------------------------

    @contextmanager
    def step(
        self, kind: str, name: str, input: dict[str, Any] | None = None
    ) -> Iterator[StepOutput]:
        step = services.step_start(self.job, token=self.token, kind=kind, name=name, input=input)
        if kind == StepKind.MODEL_CALL:
            self.model_step = step
        output = StepOutput()
        output.index = step.index
        try:
            yield output
        except JobCancelled:
            services.step_finish(step, status=StepStatus.CANCELLED, output=dict(output))
            raise
        except services.LeaseLost:
            raise
        except Exception as exc:
            output.setdefault("error", f"{type(exc).__name__}: {exc}")
            services.step_finish(step, status=StepStatus.FAILED, output=dict(output))
            raise
        services.step_finish(
            step,
            status=StepStatus.FAILED if output.failed else StepStatus.FINISHED,
            output=dict(output),
        )

    def note(self, name: str, data: dict[str, Any]) -> None:
        services.step_start(
            self.job, token=self.token, kind=StepKind.NOTE, name=name, input=data, finished=True
        )

    def say(self, name: str, text: str, data: dict[str, Any]) -> str:
        """A note step whose ``token`` events carry ``text`` (the agent's own reply)."""
        with self.step(StepKind.NOTE, name, data) as out:
            tokens = events.TokenEvents(self.job, out.index)
            tokens(text)
            tokens.flush()
            out["text"] = text
        return text

    # --- What the agent asks -----------------------------------------------------------------

    def perform(self, action: Action) -> Any:
        """Carries out one request of the agent and returns its answer."""
        if isinstance(action, ModelCall):
            return self.call_model(
                action.prompt,
                name=action.name,
                options=action.options,
                messages=action.messages,
                cleaned=action.cleaned,
                rewrite=action.rewrite,
            )
        if isinstance(action, ToolCall):
            return self.call_tool(action.name, action.arguments, enabled=list(action.enabled))
        if isinstance(action, Note):
            return self.note(action.name, action.data)
        if isinstance(action, Discard):
            if self.model_step is not None:
                services.step_mark_discarded(self.model_step, reason=action.reason)
            return None
        if isinstance(action, Say):
            return self.say(action.name, action.text, action.data)
        if isinstance(action, Work):
            with self.step(action.kind, action.name, action.input) as out:
                return action.run(out)
        raise TypeError(f"An agent asked for {action!r}, which the runner does not know.")

    # --- Model and tools -------------------------------------------------------------------

    def call_model(
        self,
        prompt: str,
        *,
        name: str = "generate",
        options: dict[str, Any] | None = None,
        messages: list[dict[str, str]] | None = None,
        cleaned: bool = False,
        rewrite: Callable[[str], str] | None = None,
    ) -> str:
        """One stateless model call through the gateway, recorded as a model_call step.

        With ``messages`` (chat messages) those are sent instead of ``prompt``. The step
        keeps the model's raw text; what the agent stores may be cleaned. The text is
        streamed as the job's ``token`` events while it is generated; with ``cleaned`` (a
        reply the agent stores cleaned by ``agents.replies.clean_reply``) those carry the
        cleaned reply as it becomes certain, so that they put together equal what is kept
        (``rewrite``, when given, rewrites its sentences: ``agents.reply_stream``).
        """
        self.check()
        options = {**self.profile.options, **(options or {})}
        model = self.profile.model
        sent = {"prompt": prompt} if messages is None else {"messages": messages}
        step_input = {"model": model, **sent, "options": options}
        with self.step(StepKind.MODEL_CALL, name, step_input) as out:
            gateway.api_key_check_live(self.job.api_key)
            tokens = events.TokenEvents(self.job, out.index)
            transcript = self.profile.is_transcript
            reply = ReplyStream(transcript=transcript, rewrite=rewrite) if cleaned else None
            try:
                result = gateway.model_call(
                    api_key=self.job.api_key,
                    model=model,
                    prompt=prompt,
                    options=options,
                    origin=UsageRecord.Origin.AGENT,
                    job_id=self.job.pk,
                    should_stop=self._should_stop_waiting,
                    messages=messages,
                    on_delta=tokens if reply is None else self._cleaned(reply, tokens),
                )
            except runtime.GenerationCancelled:
                raise _stopped() from None
            if reply is not None:
                tokens(reply.finish()[0])
            tokens.flush()
            text = storable(result.response)
            out.update(
                text=text,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                elapsed=result.elapsed,
            )
            if result.tokens_estimated:
                out["tokens_estimated"] = True
            return text

    @staticmethod
    def _cleaned(reply: ReplyStream, tokens: events.TokenEvents) -> Callable[[str], None]:
        """The deltas of a reply cleaned as it flows: the cleaning (which reads the whole
        text so far) runs when the tokens may be written, at most once per their interval,
        not once per delta."""
        last = [-tokens.interval]

        def take(delta: str) -> None:
            reply.add(delta)
            now = time.monotonic()
            if now - last[0] >= tokens.interval:
                last[0] = now
                tokens(reply.take())
                tokens.flush()  # at most once per interval, as the takes

        return take

    def call_tool(
        self, name: str, arguments: dict[str, Any], *, enabled: list[str]
    ) -> dict[str, Any]:
        """Runs a tool as a tool_call step; the answer (result or error) is for the model.

        Only a tool of ``enabled`` runs, with its limits (:meth:`_run_tool`); whatever it
        fails with is a tool error the agent can report, never the job's end."""
        self.check()
        with self.step(StepKind.TOOL_CALL, name, {"arguments": arguments}) as out:
            tool = REGISTRY.get(name) if name in enabled else None
            if tool is None:
                out.failed = True
                out["error"] = f"Unknown tool {name!r}. Available: {', '.join(enabled) or 'none'}."
                return {"error": out["error"]}
            try:
                result = self._run_tool(tool, arguments)
            except ToolError as exc:
                out.failed = True
                out["error"] = str(exc)
                return {"error": str(exc)}
            out["result"] = result
            return {"result": result}

    def _run_tool(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        """``tool`` with its limits: a pure tool runs in a thread of its own, is abandoned
        after ``TOOL_TIMEOUT_SECONDS`` and stops waiting when the job is cancelled; any
        tool's result is refused past ``TOOL_MAX_OUTPUT_CHARS`` characters of JSON."""
        # A tool that is not pure reads the database in this job's own connection.
        result = self._run_in_thread(tool, arguments) if tool.pure else tool.run(self, arguments)
        size = len(json.dumps(result, default=str))
        if size > settings.TOOL_MAX_OUTPUT_CHARS:
            raise ToolError(
                f"The result of {tool.name} is too large ({size:,} characters; at most "
                f"{settings.TOOL_MAX_OUTPUT_CHARS:,})."
            )
        return result

    def _run_in_thread(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                outcome["result"] = tool.run(None, arguments)
            except BaseException as exc:  # handed to the job's thread, which raises it
                outcome["error"] = exc
            finally:
                done.set()

        # A daemon thread: one that overran is abandoned and never holds up the process.
        threading.Thread(target=run, name=f"tool-{tool.name}", daemon=True).start()
        deadline = time.monotonic() + settings.TOOL_TIMEOUT_SECONDS
        while not done.wait(min(settings.JOB_CANCEL_POLL_SECONDS, deadline - time.monotonic())):
            self.check()
            if time.monotonic() >= deadline:
                raise ToolError(
                    f"{tool.name} took longer than {settings.TOOL_TIMEOUT_SECONDS:g} s and was "
                    "stopped."
                )
        if "error" in outcome:
            raise outcome["error"]
        return outcome["result"]
