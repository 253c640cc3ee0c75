from django.urls import path

from conversations.event_views import ConversationEventsView
from conversations.views import ChatView, ConversationDetailView

urlpatterns = [
    path("chat", ChatView.as_view(), name="chat"),
    path(
        "conversation/<str:conversation_id>",
        ConversationDetailView.as_view(),
        name="conversation-detail",
    ),
    path(
        "conversation/<str:conversation_id>/events",
        ConversationEventsView.as_view(),
        name="conversation-events",
    ),
]
