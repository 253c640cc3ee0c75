from django.core.management.base import BaseCommand

from agents import recovery


class Command(BaseCommand):
    help = (
        "Recovers jobs whose worker died (lease expired) and re-wakes queued jobs whose "
        "queue message was lost. Also scheduled through django-q2 every minute."
    )

    def handle(self, *args, **opts):
        counts = recovery.job_reap()
        self.stdout.write(", ".join(f"{name}: {n}" for name, n in counts.items()))
