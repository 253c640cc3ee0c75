from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every app uses: the error envelope, body parsing, shared serializer fields,
    the admin base and its display helpers, identifiers. No models."""

    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from core import db, tracing

        db.watch_pools()
        tracing.configure()  # off unless OTEL_EXPORTER_OTLP_ENDPOINT is set
