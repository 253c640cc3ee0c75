from django.core.management.base import BaseCommand, CommandError

from conversations import vectors
from gateway import embeddings


class Command(BaseCommand):
    help = (
        "Embeds the messages that have no vector of the current embedding model: those "
        "stored while the embedder was down, and all of them after a change of model."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--conversation", help="Only this conversation (its id).")
        parser.add_argument("--batch", type=int, default=256, help="Messages per embedder call.")

    def handle(self, *args, conversation: str | None, batch: int, **options) -> None:
        model = embeddings.model_id()
        if model is None:
            raise CommandError("EMBEDDING_BACKEND is none: there is nothing to embed with.")
        try:
            done = vectors.embed_pending(conversation_id=conversation, batch=max(1, batch))
        except embeddings.EmbeddingUnavailable as exc:
            raise CommandError(f"The embedder failed: {exc}") from exc
        self.stdout.write(f"{done} messages embedded with {model}.")
