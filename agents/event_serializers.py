"""The shape of a job's server-sent events, for the schema (the events themselves are
written by ``agents.events`` from the serializers GET /agent/job/{id} answers with; their
data, by type, is described in the operation and in docs/events.md)."""

from rest_framework import serializers

from agents.models import JobStatus
from agents.serializers import FinalResultField, StepSerializer


class StatusEventSerializer(serializers.Serializer):
    job_id = serializers.CharField()
    status = serializers.ChoiceField(choices=JobStatus.choices)
    final_result = FinalResultField(required=False, help_text="In the `finished` event.")
    error = serializers.CharField(required=False, help_text="In the `failed` event.")


class StepEventSerializer(StepSerializer):
    attempt = serializers.IntegerField(
        required=False,
        help_text="Only on a step of a run whose worker died, ended by the recovery: the "
        "number of that attempt (the job runs again; its later steps follow).",
    )


class TokenEventSerializer(serializers.Serializer):
    step = serializers.IntegerField(help_text="The index of the model_call step.")
    text = serializers.CharField(help_text="The next piece of the text (several chunks).")


class JobStreamEventSerializer(serializers.Serializer):
    """One server-sent event, its fields as an SSE client reads them (text): ``id``,
    ``event``, and ``data``, one line of JSON."""

    id = serializers.RegexField(r"^[1-9][0-9]*$", help_text="Strictly increasing within the job.")
    event = serializers.ChoiceField(choices=["status", "step", "token"])
    data = serializers.CharField(
        help_text="JSON. `status`: {job_id, status, final_result?, error?}; `step`: the step "
        "as GET /agent/job/{id} shows it (attempt?; a model call whose text is not kept is "
        "sent again with `output.discarded`); `token`: {step, text}."
    )
