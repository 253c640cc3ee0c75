from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self) -> None:
        # Registers search_history and read_history in agents.tools.REGISTRY, and the
        # agent of chat jobs in agents.kinds.AGENTS.
        # A chat job's tokens go to its conversation's event stream too.
        from django.db.models.signals import post_save

        from agents.models import JobEvent
        from conversations import chat_agent, events, tools  # noqa: F401

        post_save.connect(events.copy_chat_token, sender=JobEvent, dispatch_uid="chat-tokens")
