from django.core.management.base import BaseCommand, CommandError

from gateway import keys, services
from gateway.models import ApiKey


class Command(BaseCommand):
    help = "Revokes an API key for good, given its plain key, its prefix or its name."

    def add_arguments(self, parser):
        parser.add_argument("key", help="The plain key, its prefix, or the key's name.")

    def handle(self, *args, **opts):
        ident = opts["key"]
        prefix = keys.prefix_of(ident) or ident
        matches = list(ApiKey.objects.filter(prefix=prefix)) or list(
            ApiKey.objects.filter(name=ident, revoked_at__isnull=True)
        )
        if not matches:
            raise CommandError(f"No key matches {ident!r}.")
        if len(matches) > 1:
            raise CommandError(f"{len(matches)} live keys are named {ident!r}; give a prefix.")
        api_key = matches[0]
        if services.api_key_revoke(api_key=api_key):
            self.stdout.write(f"Revoked key {api_key.name!r} (prefix {api_key.prefix}).")
        else:
            self.stdout.write(
                f"Key {api_key.name!r} (prefix {api_key.prefix}) was revoked already."
            )
