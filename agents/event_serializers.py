"""The shape of a job's server-sent events, for the schema (the events themselves are
written by ``agents.events`` from the serializers GET /agent/job/{id} answers with; their
data, by type, is described in the operation and in docs/events.md)."""

from rest_framework import serializers


class JobStreamEventSerializer(serializers.Serializer):
    """One server-sent event, its fields as an SSE client reads them (text): ``id``,
    ``event``, and ``data``, one line of JSON."""

    id = serializers.RegexField(r"^[1-9][0-9]*$", help_text="Strictly increasing within the job.")
    event = serializers.ChoiceField(choices=["status", "step", "token"])
    data = serializers.CharField(
        help_text="JSON. `status`: {job_id, status, final_result?, error?}; `step`: the step "
        "as GET /agent/job/{id} shows it (attempt?); `token`: {step, text}."
    )
