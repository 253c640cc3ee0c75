from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        # task_agent registers its kind, checks its system checks.
        from agents import checks, task_agent, worker  # noqa: F401

        # Each django-q2 worker process runs the lease heartbeat and the reaper.
        post_spawn.connect(worker.start, dispatch_uid="agents.worker.start")

        from agents.selectors import JobGauge
        from core import metrics

        metrics.scrape_collectors.append(JobGauge())
