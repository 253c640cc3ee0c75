"""Agents register themselves by job kind, as tools do; the runner asks the registry."""

import pytest

from agents.kinds import AGENTS, agent, agent_for
from agents.models import JobKind
from agents.task_agent import run_task
from conversations.chat_agent import run_chat


def test_every_job_kind_has_its_agent_once_the_apps_loaded():
    assert agent_for(JobKind.TASK) is run_task
    assert agent_for(JobKind.CHAT) is run_chat
    assert set(AGENTS) == set(JobKind.values)


def test_an_unknown_kind_has_no_agent():
    with pytest.raises(LookupError):
        agent_for("nonsense")


def test_a_new_agent_registers_itself(monkeypatch):
    monkeypatch.setattr("agents.kinds.AGENTS", dict(AGENTS))

    @agent("echo")
    def run_echo(ctx):
        return {"text": "echo"}

    assert agent_for("echo") is run_echo
