from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from agents import services


class Command(BaseCommand):
    help = (
        "Deletes ended jobs with their steps, and usage records, older than DAYS, and "
        "expired Idempotency-Keys."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than", type=int, required=True, metavar="DAYS")
        parser.add_argument("--dry-run", action="store_true", help="Only count.")

    def handle(self, *args, **opts):
        if opts["older_than"] < 0:
            raise CommandError("--older-than must be 0 or more days.")
        cutoff = timezone.now() - timedelta(days=opts["older_than"])
        counts = services.job_prune(older_than=cutoff, dry_run=opts["dry_run"])
        verb = "Would delete" if opts["dry_run"] else "Deleted"
        self.stdout.write(f"{verb}: " + ", ".join(f"{n} {name}" for name, n in counts.items()))
