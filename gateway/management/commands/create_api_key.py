from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from gateway import services


def _csv(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


class Command(BaseCommand):
    help = "Creates an API key and prints the plain key alone on the last line (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--owner", help="Username of the owner (default: a user named NAME).")
        parser.add_argument("--scopes", default="model,agent", help="model, agent or both.")
        parser.add_argument("--models", default="", help="Allowed models (default: all).")
        parser.add_argument(
            "--rate-limit", type=int, default=None, help="Requests per minute (0 = unlimited)."
        )
        parser.add_argument(
            "--agent-starts-per-minute",
            type=int,
            default=None,
            help="POSTs to /agent/... per minute (0 = unlimited).",
        )
        parser.add_argument(
            "--agent-reads-per-minute",
            type=int,
            default=None,
            help="GETs of /agent/... per minute (0 = unlimited).",
        )
        parser.add_argument(
            "--max-active-jobs",
            type=int,
            default=None,
            help="Jobs queued or running at once (0 = unlimited).",
        )
        parser.add_argument(
            "--token-budget",
            type=int,
            default=None,
            help="Prompt plus completion tokens per budget period (default: unlimited).",
        )
        parser.add_argument(
            "--budget-period", choices=("day", "month"), default="month", help="UTC."
        )
        parser.add_argument("--expires-in-days", type=int, default=None)

    def handle(self, *args, **opts):
        owner = None
        if opts["owner"]:
            owner, _ = get_user_model().objects.get_or_create(username=opts["owner"])
        expires_at = None
        if opts["expires_in_days"] is not None:
            expires_at = timezone.now() + timedelta(days=opts["expires_in_days"])
        if opts["token_budget"] is not None and opts["token_budget"] < 0:
            raise CommandError("--token-budget must be 0 or more.")
        try:
            api_key, plain = services.api_key_create(
                name=opts["name"],
                owner=owner,
                scopes=_csv(opts["scopes"]),
                allowed_models=_csv(opts["models"]),
                rate_limit_per_minute=opts["rate_limit"],
                agent_starts_per_minute=opts["agent_starts_per_minute"],
                agent_reads_per_minute=opts["agent_reads_per_minute"],
                max_active_jobs=opts["max_active_jobs"],
                token_budget=opts["token_budget"],
                budget_period=opts["budget_period"],
                expires_at=expires_at,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"Created key {api_key.name!r} (prefix {api_key.prefix}) for {api_key.owner}, "
            f"scopes {','.join(api_key.scopes)}. It is shown once; store it now:"
        )
        self.stdout.write(plain)
