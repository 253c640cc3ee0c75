from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every app uses: the error envelope, body parsing, shared serializer fields,
    the admin base, identifiers and the base view of the agent API. No models."""

    name = "core"
    verbose_name = "Core"
