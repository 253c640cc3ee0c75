from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self) -> None:
        # Registers search_history and read_history in agents.tools.REGISTRY, and the
        # agent of chat jobs in agents.kinds.AGENTS.
        from conversations import chat_agent, tools  # noqa: F401
