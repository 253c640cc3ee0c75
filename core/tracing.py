"""OpenTelemetry traces, when the ``otel`` extra is installed and
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (the exporter reads its other ``OTEL_*`` variables
itself). Off, every hook here is a check of one module global: nothing is imported,
nothing is made.

Spans: the request (``core.observe``), its database statements, each call to a model
runtime (model, endpoint, tokens, time to first token) and the job run in the worker. The
job stores its request's ``traceparent`` (``Job.trace_context``), so the worker's span of
the job is a child of the request that started it, across the queue.
"""

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import connections

logger = logging.getLogger(__name__)

_tracer: Any = None  # an opentelemetry Tracer when traces are on


def enabled() -> bool:
    return _tracer is not None


def configure(exporter: Any = None) -> bool:
    """Turns traces on: with ``exporter`` (tests: the SDK's in-memory one), or the OTLP
    exporter when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set. False when they stay off."""
    global _tracer
    if exporter is None and not settings.OTEL_EXPORTER_OTLP_ENDPOINT:
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError:
        logger.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but the otel extra is not installed")
        return False
    provider = TracerProvider(resource=Resource.create({"service.name": "llmgw"}))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    _tracer = provider.get_tracer("llmgw")
    return True


def disable() -> None:
    global _tracer
    _tracer = None


def start_request_span(request: Any) -> Any:
    from opentelemetry.propagate import extract
    from opentelemetry.trace import SpanKind

    headers = {"traceparent": request.META.get("HTTP_TRACEPARENT", "")}
    span = _tracer.start_span(
        f"{request.method}",
        context=extract(headers) if headers["traceparent"] else None,
        kind=SpanKind.SERVER,
        attributes={"http.request.method": request.method, "url.path": request.path_info},
    )
    return span


def end_request_span(span: Any, route: str, status: int) -> None:
    span.update_name(f"{span.name} {route}")
    span.set_attribute("http.route", route)
    span.set_attribute("http.response.status_code", status)
    span.end()


@contextlib.contextmanager
def activated(span: Any, *, database: bool = True) -> Iterator[None]:
    """Makes ``span`` current for the block; with ``database``, the statements of this
    thread become its children (an async request's run in threads: ``database_spans``)."""
    if span is None:
        yield
        return
    from opentelemetry import trace

    with trace.use_span(span, end_on_exit=False):
        if not database:
            yield
            return
        with database_spans():
            yield


@contextlib.contextmanager
def span(name: str, *, parent: str = "", **attributes: Any) -> Iterator[Any]:
    """A span for the block, child of the current one or of the ``parent`` traceparent;
    yields it (None when traces are off) so the block can add attributes."""
    if _tracer is None:
        yield None
        return
    context = None
    if parent:
        from opentelemetry.propagate import extract

        context = extract({"traceparent": parent})
    with (
        _tracer.start_as_current_span(name, context=context, attributes=attributes) as current,
        database_spans(),
    ):
        yield current


def traceparent() -> str:
    """The current span as a W3C ``traceparent`` ("" when traces are off)."""
    if _tracer is None:
        return ""
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get("traceparent", "")


def current_span() -> Any:
    """The current span (None when traces are off)."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    return trace.get_current_span()


def set_attributes(current: Any, **attributes: Any) -> None:
    if current is not None:
        current.set_attributes({k: v for k, v in attributes.items() if v is not None})


@contextlib.contextmanager
def database_spans() -> Iterator[None]:
    """A span per statement of this thread's default connection, through Django's
    ``execute_wrapper`` (nothing when traces are off)."""
    if _tracer is None:
        yield
        return
    with connections["default"].execute_wrapper(_statement_span):
        yield


def _statement_span(execute, sql, params, many, context):
    if _tracer is None:
        return execute(sql, params, many, context)
    vendor = context["connection"].vendor
    operation = sql.split(None, 1)[0].upper() if sql else ""
    with _tracer.start_as_current_span(
        f"db {operation}", attributes={"db.system": vendor, "db.operation": operation}
    ):
        return execute(sql, params, many, context)
