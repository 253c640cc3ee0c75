from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents import selectors as agent_selectors
from agents.views import AgentAPIView, error_responses
from conversations import selectors, services, tokens
from conversations.context import message_limit
from conversations.serializers import (
    ChatRequestSerializer,
    ChatStartResponseSerializer,
    ConversationQuerySerializer,
    ConversationResponseSerializer,
)
from gateway.errors import validation_error


class ChatView(AgentAPIView):
    http_method_names = ["post"]

    @extend_schema(
        request=ChatRequestSerializer,
        responses={
            200: ChatStartResponseSerializer,
            **error_responses(400, 401, 403, 405, 413, 415),
        },
        description=(
            "Starts a chat job on the conversation of (key owner, source, scope_type, "
            "scope_id), created on first use. The user's message is stored with the job; "
            "the reply is the job's `final_result.message` and is stored in the "
            "conversation. Chats of one conversation run one at a time, in arrival order. "
            "A prompt too long for the profile's context window is 400 validation_error."
        ),
    )
    def post(self, request: Request) -> Response:
        serializer = ChatRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = serializer.validated_data
        profile = agent_selectors.profile_get(fields.get("profile"))
        prompt = fields["prompt"]
        # The heuristic, not the runtime's tokenizer: a single-slot runtime (llama.cpp)
        # would make this request wait behind a generation. It over-counts; the worker
        # recounts the message with the tokenizer before it builds the context.
        prompt_tokens = tokens.estimate(prompt)
        limit = message_limit(profile)
        if prompt_tokens > limit:
            raise validation_error(
                {
                    "prompt": [
                        f"Too long for the profile's context window: {prompt_tokens} tokens, "
                        f"at most {limit}."
                    ]
                }
            )
        conversation, job, _ = services.chat_start(
            api_key=request.auth,
            source=fields["source"],
            scope_type=fields["scope_type"],
            scope_id=fields["scope_id"],
            prompt=prompt,
            prompt_tokens=prompt_tokens,
            profile=profile,
        )
        data = {"job_id": job.pk, "status": job.status, "conversation_id": conversation.pk}
        return Response({"ok": True, "data": data})


class ConversationDetailView(AgentAPIView):
    http_method_names = ["get"]

    @extend_schema(
        parameters=[
            OpenApiParameter("limit", int, description="Only the last N messages (1-1000)."),
            OpenApiParameter("before", int, description="Only messages with a smaller seq."),
        ],
        responses={200: ConversationResponseSerializer, **error_responses(400, 401, 403, 404, 405)},
        description=(
            "The stored messages of one of the key owner's conversations, in order. Without "
            "`limit`, all of them; with it, the newest page, and `has_more` tells whether "
            "to ask for the next one with `before` = the first message's `seq`."
        ),
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = selectors.conversation_get_for_owner(
            conversation_id=conversation_id, owner_id=request.auth.owner_id
        )
        query = ConversationQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = selectors.conversation_view(conversation, **query.validated_data)
        return Response({"ok": True, "data": data})
