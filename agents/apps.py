from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from agents import task_agent, worker  # noqa: F401  (task_agent registers its kind)

        # Each django-q2 worker process runs the lease heartbeat and the reaper.
        post_spawn.connect(worker.start, dispatch_uid="agents.worker.start")
