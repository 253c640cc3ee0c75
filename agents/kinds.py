"""The agent of each job kind. An agent registers itself, as tools do:

    @agent(JobKind.CHAT)
    def run_chat(job: Job, token: str) -> Steps: ...

It is a generator of the requests in ``agents.actions``, which the runner carries out and
records; it returns the job's ``final_result``. ``token`` is the job's lease, for the
services that store what the job made.

Each app imports its agent module when it loads (``AppConfig.ready``), so the runner knows
every kind without naming the modules that implement them.
"""

from collections.abc import Callable
from typing import Any

from agents.actions import Steps

Agent = Callable[[Any, str], Steps]  # run(job, token) -> the steps, returning final_result

AGENTS: dict[str, Agent] = {}


def agent(kind: str) -> Callable[[Agent], Agent]:
    """Registers the decorated ``run(job, token)`` as the agent of ``kind`` jobs."""

    def register(func: Agent) -> Agent:
        AGENTS[kind] = func
        return func

    return register


def agent_for(kind: str) -> Agent:
    try:
        return AGENTS[kind]
    except KeyError:
        raise LookupError(f"No agent is registered for jobs of kind {kind!r}.") from None
