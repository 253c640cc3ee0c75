"""The ASGI application (the web server runs it: ``deploy/gunicorn.conf.py``): Django's own,
with a short route in front of it for the stateless model endpoints and the event streams
(``config.short_route`` says why)."""

import os
import warnings

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# WhiteNoise answers a static file with a synchronous file iterator, which Django's ASGI
# handler reads through a thread and warns about on every such answer (the admin's pages
# would print it after `make run`'s "ready:"). That is the expected way it serves them;
# the project's own streams are asynchronous iterators (agents.event_views.sse_lines).
warnings.filterwarnings(
    "ignore", message="StreamingHttpResponse must consume synchronous iterators"
)

django_application = get_asgi_application()

from config.short_route import in_front_of  # noqa: E402 (it reads the settings on import)

application = in_front_of(django_application)
