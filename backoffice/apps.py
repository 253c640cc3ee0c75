from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class BackofficeConfig(AppConfig):
    default = True
    """The staff pages around the admin: dashboard, playground, their static files."""

    name = "backoffice"
    default_auto_field = "django.db.models.BigAutoField"


class BackofficeAdminConfig(admin_apps.AdminConfig):
    default = False
    """``django.contrib.admin`` with the back office's site as ``admin.site``."""

    default_site = "backoffice.site.BackofficeSite"
