"""The ASGI application (the web server runs it: ``deploy/gunicorn.conf.py``): Django's own,
with a short route in front of it for the stateless model endpoints and the event streams
(``config.short_route`` says why)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_asgi_application()

from config.short_route import in_front_of  # noqa: E402 (it reads the settings on import)

application = in_front_of(django_application)
