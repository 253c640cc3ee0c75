from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self) -> None:
        # Registers search_history and read_history in agents.tools.REGISTRY, and the
        # agent of chat jobs in agents.kinds.AGENTS.
        # And the conversation stream's reads (for SQLite's poll).
        from conversations import chat_agent, events, tools  # noqa: F401
