"""Every state change of a job or a step. Each is a conditional update.

A write carries the state it expects (``WHERE status IN (...)``) and, from a worker, the
lease it holds (``WHERE lease_owner = token``), and checks the row count. So two processes
can never both win, a terminal status never changes, and a worker that lost its lease
changes nothing.

Transitions: queued -> running -> finished | failed; queued -> cancelled;
running -> cancelling -> cancelled (or finished | failed when the work ended first);
running | cancelling -> queued (the reaper, after the worker's lease expired).

By concern: starting and waking (:mod:`.starts`), a worker's hold on a job (:mod:`.leases`),
its steps (:mod:`.steps`), its end (:mod:`.ending`) and the pruning of what aged out
(:mod:`.prune`); named here for the views, the worker, the conversations and the admin.
"""

from agents.services.ending import (
    job_after_run,
    job_cancel,
    job_fail,
    job_finish,
    job_mark_cancelled,
)
from agents.services.leases import (
    LeaseLost,
    job_claim,
    job_claim_next,
    job_heartbeat,
    job_renew_lease,
    job_renew_leases,
    job_status,
)
from agents.services.prune import job_prune
from agents.services.starts import job_committed, job_create, job_enqueue, task_start
from agents.services.steps import step_finish, step_mark_discarded, step_start

__all__ = [
    "LeaseLost",
    "job_after_run",
    "job_cancel",
    "job_claim",
    "job_claim_next",
    "job_committed",
    "job_create",
    "job_enqueue",
    "job_fail",
    "job_finish",
    "job_heartbeat",
    "job_mark_cancelled",
    "job_prune",
    "job_renew_lease",
    "job_renew_leases",
    "job_status",
    "step_finish",
    "step_mark_discarded",
    "step_start",
    "task_start",
]
