"""The project's own middleware of the whole chain (``settings.MIDDLEWARE``), written with
Django's public middleware API: synchronous and asynchronous, so that under ASGI it runs on
the event loop and adds no thread to the request."""

from django.http import HttpRequest, HttpResponseBase

from core.http import HybridMiddleware


class ContentLengthMiddleware(HybridMiddleware):
    """The outermost middleware but the observer: every answer that is not streamed carries
    a Content-Length, also an error answer made inside the chain (a host outside
    ALLOWED_HOSTS is refused by CommonMiddleware before its own hook could add one): an
    HTTP/1.0 client cannot read a chunked answer."""

    def handle(self, request: HttpRequest) -> HttpResponseBase:
        return with_length(self.get_response(request))

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        return with_length(await self.get_response(request))


def with_length(response: HttpResponseBase) -> HttpResponseBase:
    if not response.streaming and not response.has_header("Content-Length"):
        response.headers["Content-Length"] = str(len(response.content))
    return response
