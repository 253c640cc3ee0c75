from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from core import errors
from core.views import IndexView, metrics_view
from gateway.openai_views import not_found as openai_not_found
from gateway.views import HealthView, ModelCallView, ReadyView

urlpatterns = [
    path("api.php", ModelCallView.as_view(), name="model-call"),
    path("v1/", include("conversations.openai_urls")),
    # Anything else under /v1/ answers OpenAI's 404.
    re_path(r"^v1/", openai_not_found),
    path("agent/", include("agents.urls")),
    path("agent/", include("conversations.urls")),
    # Anything else under /agent/ answers the envelope's 404, even with DEBUG on.
    re_path(r"^agent/", errors.handler404),
    path("healthz", HealthView.as_view(), name="healthz"),
    path("readyz", ReadyView.as_view(), name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("", IndexView.as_view(), name="index"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/schema", SpectacularAPIView.as_view()),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/docs", SpectacularSwaggerView.as_view(url_name="schema")),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
    path("api/redoc", SpectacularRedocView.as_view(url_name="schema")),
    path("admin/", admin.site.urls),
    # Every other path answers the envelope's 404 too, even with DEBUG on (Django would
    # render its HTML debug page); the admin keeps its own.
    re_path(r"^(?!admin(/|$)|static/)", errors.handler404),
]

handler400 = errors.handler400
handler403 = errors.handler403
handler404 = errors.handler404
handler500 = errors.handler500
