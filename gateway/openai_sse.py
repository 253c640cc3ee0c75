"""Server-sent events of the OpenAI-compatible face: a stream of the model call service
(``gateway.services.model_call_stream``: text pieces, then the result) written as OpenAI's
chunks, ``data: {chunk}`` per event and ``data: [DONE]`` last."""

from collections.abc import AsyncIterator, Callable
from typing import Any

from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, StreamingHttpResponse

from core.errors import openai_answer
from core.exceptions import DomainError
from gateway import openai_wire, services

Pieces = AsyncIterator[str | services.ModelCallResult]


async def event_stream(request: HttpRequest, events: AsyncIterator[bytes]) -> StreamingHttpResponse:
    """The events as they come, under an ASGI server (production). A WSGI server (Django's
    test server, ``config.wsgi``) iterates a response outside the event loop the stream
    belongs to: there the events are gathered first and sent as one answer."""
    if isinstance(request, WSGIRequest):
        gathered = [event async for event in events]
        response = StreamingHttpResponse(gathered, content_type="text/event-stream")
    else:
        response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response


async def first_of(pieces: Pieces) -> str | services.ModelCallResult:
    """The first item of a stream: before it, a failure still answers its own status."""
    try:
        return await anext(pieces)
    except BaseException:
        await pieces.aclose()
        raise


async def events(
    first: str | services.ModelCallResult,
    pieces: Pieces,
    *,
    chunk: Callable[[str], dict[str, Any]],
    end: Callable[[services.ModelCallResult], list[dict[str, Any]]],
    opening: dict[str, Any] | None = None,
) -> AsyncIterator[bytes]:
    """The server-sent events of a stream: ``opening``, one ``chunk`` per piece, the
    ``end`` chunks, ``[DONE]``. A failure after the first piece is an error event."""
    try:
        if opening is not None:
            yield openai_wire.event(opening)
        item = first
        while not isinstance(item, services.ModelCallResult):
            yield openai_wire.event(chunk(item))
            try:
                item = await anext(pieces)
            except DomainError as err:
                yield openai_wire.event(openai_answer(err)[1])
                return
        for data in end(item):
            yield openai_wire.event(data)
        yield openai_wire.DONE
    finally:
        await pieces.aclose()


def ending(
    last: Callable[[str | None], dict[str, Any]], *, usage_of: dict[str, Any] | None
) -> Callable[[services.ModelCallResult], list[dict[str, Any]]]:
    """The ``end`` of a stream: its ``last`` chunk with the finish reason, then, when the
    client asked for it, the usage chunk (``usage_of``: its id, created, model, object)."""

    def end(result: services.ModelCallResult) -> list[dict[str, Any]]:
        chunks = [last(result.finish_reason)]
        if usage_of is not None:
            chunks.append(
                openai_wire.usage_chunk(
                    **usage_of,
                    prompt_tokens=result.prompt_tokens,
                    completion_tokens=result.completion_tokens,
                )
            )
        return chunks

    return end


def chat_events(
    first: str | services.ModelCallResult,
    pieces: Pieces,
    *,
    id: str,
    created: int,
    model: str,
    with_usage: bool,
    extra: dict[str, Any] | None = None,
) -> AsyncIterator[bytes]:
    """The chunks of a streamed chat completion (``extra``: fields of the service's own,
    on every chunk)."""
    common = {"id": id, "created": created, "model": model}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return openai_wire.chat_chunk(
            **common, delta=delta, finish_reason=finish_reason, extra=extra
        )

    return events(
        first,
        pieces,
        opening=chunk({"role": "assistant", "content": ""}),
        chunk=lambda piece: chunk({"content": piece}),
        end=ending(
            lambda reason: chunk({}, reason),
            usage_of={**common, "object": "chat.completion.chunk"} if with_usage else None,
        ),
    )


def completion_events(
    first: str | services.ModelCallResult,
    pieces: Pieces,
    *,
    id: str,
    created: int,
    model: str,
    with_usage: bool,
) -> AsyncIterator[bytes]:
    """The chunks of a streamed (text) completion."""
    common = {"id": id, "created": created, "model": model}

    def chunk(text: str, finish_reason: str | None = None) -> dict[str, Any]:
        return openai_wire.text_completion(
            **common, text=text, finish_reason=finish_reason, with_usage=False
        )

    return events(
        first,
        pieces,
        chunk=chunk,
        end=ending(
            lambda reason: chunk("", reason),
            usage_of={**common, "object": "text_completion"} if with_usage else None,
        ),
    )
