"""Admin building blocks shared by the apps."""

from django.contrib import admin


class HistoryAdmin(admin.ModelAdmin):
    """A history table: staff read it; rows are written by the service only."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
