"""Fair claiming across owners: which queued job a worker's wake-up takes.

The queue's wake-up messages arrive first in, first out, one per job: under one owner's
backlog of a thousand jobs, another owner's chat would wait for the whole backlog. So a
wake-up does not claim the job it names: it claims the fairest queued job that can run now
(``agents.services.job_claim_next``). Fairness is start-time fair queueing over the Job
rows: each job gets a ``fair_key`` when it is created, and a wake-up claims the queued job
with the smallest key (then the oldest).

Keys count in slots of two. The queue's head (the smallest key still queued) is the
system's present. An owner with nothing queued or running gets the head's slot, on its
even key: ahead of the head's job, whose keys are odd when its owner had a backlog, and
behind other newcomers of that slot (oldest first). An owner with jobs in the system gets
the slot after its last one's (odd key), never before the head's: two owners with backlogs
alternate, and a newcomer waits for at most the job that frees the next worker.

Nothing else changes: the Job row stays the truth, the broker only wakes workers, every
job keeps its wake-up (a wake-up that took another job leaves its own job queued for the
next wake-up), and a chat still waits for the earlier chats of its conversation.
"""

from django.db.models import Max, Min

from agents.models import ACTIVE, Job, JobKind, JobStatus

#: How many queued jobs, in fair order, a wake-up looks at. A claimable job further back
#: (behind a longer run of chats that wait for their conversation) is claimed by its own
#: wake-up, first in, first out.
WINDOW = 32


def fair_key(owner_id: int) -> int:
    """The key of a job the owner creates now (two or three indexed reads)."""
    head = Job.objects.filter(status=JobStatus.QUEUED).aggregate(key=Min("fair_key"))["key"]
    if head is None:
        head = Job.objects.filter(status__in=ACTIVE).aggregate(key=Max("fair_key"))["key"] or 0
    present = head // 2
    last = Job.objects.filter(owner_id=owner_id, status__in=(JobStatus.QUEUED, *ACTIVE)).aggregate(
        key=Max("fair_key")
    )["key"]
    if last is None:
        return 2 * present
    return 2 * max(present, last // 2 + 1) + 1


def candidates() -> list[str]:
    """Ids of the queued jobs that can run now, fairest first, from the first
    :data:`WINDOW` in fair order: a chat is left out when an earlier chat of its
    conversation is in the window or one is running (two reads)."""
    window = list(
        Job.objects.filter(status=JobStatus.QUEUED)
        .order_by("fair_key", "created_at", "pk")
        .values_list("pk", "kind", "conversation_id")[:WINDOW]
    )
    conversations = {conv for _, kind, conv in window if kind == JobKind.CHAT}
    busy = set(
        Job.objects.filter(
            kind=JobKind.CHAT, status__in=ACTIVE, conversation_id__in=conversations
        ).values_list("conversation_id", flat=True)
    )
    found = []
    for pk, kind, conversation_id in window:
        if kind == JobKind.CHAT:
            if conversation_id in busy:
                continue
            busy.add(conversation_id)  # later chats of it wait for this one
        found.append(pk)
    return found
