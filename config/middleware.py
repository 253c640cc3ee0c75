"""Middleware that also runs natively on the async request path.

Under ASGI, Django runs a middleware that is only synchronous in a thread, and the rest of
the chain (the async view of ``/api.php`` included) then waits in that thread too: one
thread per request in flight, for as long as the request lasts.
"""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from csp import middleware as csp_middleware
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.http import HttpRequest, HttpResponseBase
from django.middleware import common, security
from django.utils.deprecation import MiddlewareMixin
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise, whose check of the path is a dictionary look-up that needs no thread."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response) -> None:
        super().__init__(get_response)
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest):
        if self.async_mode:
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        if self.autorefresh:
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve)(static_file, request)
        return await self.get_response(request)


class InlineHooks:
    """For Django's own middleware whose hooks do no I/O: under ASGI, they run on the event
    loop, where Django's ``MiddlewareMixin`` would send each hook to the request's thread
    and back (two thread switches per hook, per request). A hook that may do I/O (messages
    to store in the session) still goes to the thread: ``response_in_thread`` says when.
    Under WSGI nothing changes."""

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = None
        if hasattr(self, "process_request"):
            response = self.process_request(request)
        response = response or await self.get_response(request)  # type: ignore[attr-defined]
        if hasattr(self, "process_response"):
            if self.response_in_thread(request):
                response = await sync_to_async(self.process_response)(request, response)
            else:
                response = self.process_response(request, response)
        return response

    def response_in_thread(self, request: HttpRequest) -> bool:
        return False


class ContentLengthMiddleware(InlineHooks, MiddlewareMixin):
    """The outermost middleware: every answer that is not streamed carries a Content-Length,
    also an error answer made inside the chain (a host outside ALLOWED_HOSTS is refused by
    CommonMiddleware before its own hook could add one): an HTTP/1.0 client cannot read a
    chunked answer."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase):
        if not response.streaming and not response.has_header("Content-Length"):
            response.headers["Content-Length"] = str(len(response.content))
        return response


class CommonMiddleware(InlineHooks, common.CommonMiddleware):
    pass


class SecurityMiddleware(InlineHooks, security.SecurityMiddleware):
    pass  # a redirect to HTTPS and headers, from settings (for the stateless chain)


class AuthenticationMiddleware(InlineHooks, auth.AuthenticationMiddleware):
    pass  # the user is read lazily, in the view's thread


class MessageMiddleware(InlineHooks, messages.MessageMiddleware):
    def response_in_thread(self, request: HttpRequest) -> bool:
        storage = getattr(request, "_messages", None)
        return bool(storage is not None and (storage.used or storage.added_new))


class CSPMiddleware(InlineHooks, csp_middleware.CSPMiddleware):
    pass  # builds a header from settings
