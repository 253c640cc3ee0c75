"""``/v1/``: the OpenAI-compatible face (``gateway.openai_views``), with agents as models."""

from django.urls import path

from conversations import openai_views
from gateway.openai_views import CompletionsView, EmbeddingsView

urlpatterns = [
    path("models", openai_views.ModelsView.as_view(), name="openai-models"),
    path("chat/completions", openai_views.ChatCompletionsView.as_view(), name="openai-chat"),
    path("completions", CompletionsView.as_view(), name="openai-completions"),
    path("embeddings", EmbeddingsView.as_view(), name="openai-embeddings"),
]
