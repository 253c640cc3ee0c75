"""The site's front page."""

from typing import Any

from django.conf import settings
from django.views.generic import TemplateView


class IndexView(TemplateView):
    """``GET /``: a page linking the API docs, the admin and the health endpoints (also
    where the admin's "View site" lands)."""

    template_name = "index.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {
            **super().get_context_data(**kwargs),
            "title": settings.SPECTACULAR_SETTINGS["TITLE"],
            "version": settings.SPECTACULAR_SETTINGS["VERSION"],
        }
