"""The shapes of a job's server-sent events, for the schema (the events are written by
``agents.events`` from the same serializers GET /agent/job/{id} answers with)."""

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
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


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="JobEventData",
        serializers=[StatusEventSerializer, StepEventSerializer, TokenEventSerializer],
        resource_type_field_name=None,
    )
)
class JobEventDataField(serializers.DictField):
    """The JSON of an event's ``data:`` line, by its type."""


class JobStreamEventSerializer(serializers.Serializer):
    """One server-sent event (its lines ``id:``, ``event:``, ``data:``)."""

    id = serializers.IntegerField(min_value=1, help_text="Strictly increasing within the job.")
    event = serializers.ChoiceField(choices=["status", "step", "token"])
    data = JobEventDataField()
