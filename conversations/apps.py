from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self) -> None:
        # Registers search_history and read_history in agents.tools.REGISTRY.
        from conversations import tools  # noqa: F401
