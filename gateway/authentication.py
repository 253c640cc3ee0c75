"""Key authentication of the /agent/... endpoints: ``Authorization: Bearer <key>`` or
``X-API-Key: <key>``, the same keys as ``/api.php``, with the ``agent`` scope."""

from django.utils.functional import SimpleLazyObject
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from gateway import services
from gateway.models import Scope


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if header:
            scheme, _, plain = header.partition(" ")
            plain = plain.strip() if scheme.lower() == "bearer" else ""
        else:
            plain = request.META.get("HTTP_X_API_KEY", "")
        api_key = services.api_key_authenticate(plain)  # raises InvalidApiKey
        # The owner row is read only if a view asks for request.user (views use owner_id).
        return (SimpleLazyObject(lambda: api_key.owner), api_key)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="agent"'


class HasAgentScope(BasePermission):
    def has_permission(self, request: Request, view) -> bool:
        services.api_key_require_scope(request.auth, Scope.AGENT)  # raises Forbidden
        return True


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """Documents :class:`ApiKeyAuthentication` in the OpenAPI schema (found by subclassing)."""

    target_class = ApiKeyAuthentication
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key with the `agent` scope; `X-API-Key: <key>` also works.",
        }
