from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents.api import AgentAPIView
from agents.idempotency import Done, respond
from conversations import selectors, services
from conversations.examples import CHAT_START, CONVERSATION
from conversations.serializers import (
    ChatRequestSerializer,
    ChatStartResponseSerializer,
    ConversationQuerySerializer,
    ConversationResponseSerializer,
)
from core.schema import (
    AGENT_KEY,
    ANY_ENDPOINT,
    IDEMPOTENCY_KEY,
    JOB_START_ERRORS,
    error_responses,
)


class ChatView(AgentAPIView):
    http_method_names = ["post"]

    @extend_schema(
        operation_id="chat_start",
        request=ChatRequestSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={
            200: ChatStartResponseSerializer,
            **error_responses("Chat", JOB_START_ERRORS, {409: ("conversation_busy",)}),
        },
        description=(
            "Starts a chat job on the conversation of (key owner, source, scope_type, "
            "scope_id), created on first use. The user's message is stored with the job; "
            "the reply is the job's `final_result.message` and is stored in the "
            "conversation. Chats of one conversation run one at a time, in arrival order. "
            "A prompt too long for the profile's context window is 400 validation_error. "
            "`on_busy` says what happens when the conversation has a chat queued or running."
        ),
        examples=CHAT_START,
    )
    def post(self, request: Request) -> HttpResponse:
        return respond(request, lambda: self.start(request))

    def start(self, request: Request) -> Done:
        serializer = ChatRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = serializer.validated_data
        _, job = services.chat_request(
            api_key=request.auth,
            prompt=fields["prompt"],
            on_busy=fields["on_busy"],
            **serializer.start_arguments(),
        )
        return Done(Response(ChatStartResponseSerializer(job).data), job_id=job.pk)


class ConversationDetailView(AgentAPIView):
    http_method_names = ["get"]

    @extend_schema(
        operation_id="conversation_get",
        parameters=[ConversationQuerySerializer],
        responses={
            200: ConversationResponseSerializer,
            **error_responses(
                "ConversationDetail",
                ANY_ENDPOINT,
                AGENT_KEY,
                {400: ("validation_error",), 404: ("conversation_not_found",)},
            ),
        },
        description=(
            "The stored messages of one of the key owner's conversations, in order. Without "
            "`limit`, all of them; with it, the newest page, and `has_more` tells whether "
            "to ask for the next one with `before` = the first message's `seq`."
        ),
        examples=CONVERSATION,
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = selectors.conversation_get_for_owner(
            conversation_id=conversation_id, owner_id=request.auth.owner_id
        )
        query = ConversationQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = selectors.conversation_view(conversation, **query.validated_data)
        return Response(ConversationResponseSerializer(data).data)
