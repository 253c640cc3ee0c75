from django.urls import path

from conversations.views import ChatView, ConversationDetailView

urlpatterns = [
    path("chat", ChatView.as_view(), name="chat"),
    path(
        "conversation/<str:conversation_id>",
        ConversationDetailView.as_view(),
        name="conversation-detail",
    ),
]
