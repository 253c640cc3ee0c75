"""The agent of each job kind. An agent registers itself, as tools do:

    @agent(JobKind.CHAT)
    def run_chat(ctx: JobContext) -> dict: ...

Each app imports its agent module when it loads (``AppConfig.ready``), so the runner knows
every kind without naming the modules that implement them.
"""

from collections.abc import Callable
from typing import Any

Agent = Callable[[Any], dict[str, Any]]  # run(ctx: JobContext) -> final_result

AGENTS: dict[str, Agent] = {}


def agent(kind: str) -> Callable[[Agent], Agent]:
    """Registers the decorated ``run(ctx) -> final_result`` as the agent of ``kind`` jobs."""

    def register(func: Agent) -> Agent:
        AGENTS[kind] = func
        return func

    return register


def agent_for(kind: str) -> Agent:
    try:
        return AGENTS[kind]
    except KeyError:
        raise LookupError(f"No agent is registered for jobs of kind {kind!r}.") from None
