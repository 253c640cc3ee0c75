"""Schemathesis against the running service (pytest-django's live server: real HTTP on
loopback, the loopback runtime behind it): every operation with generated requests, then
stateful scenarios that follow the schema's links (a started job's id feeds its status and
cancel calls). Every answer must be no server error and match the schema.

Bounded in time: a fixed number of examples per operation and of scenarios.
"""

import uuid

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from gateway.openai_serializers import (
    ChatCompletionRequestSerializer,
    CompletionRequestSerializer,
    EmbeddingRequestSerializer,
)
from gateway.options import RULES
from tests.factories import default_profile
from tests.runtime_server import Reply

OPENAI_BODIES = {
    "/v1/chat/completions": ChatCompletionRequestSerializer,
    "/v1/completions": CompletionRequestSerializer,
    "/v1/embeddings": EmbeddingRequestSerializer,
}
EXAMPLES_PER_OPERATION = 15
API_PHP_FIELDS = {"api_key", "model", "prompt", "options"}
SCENARIOS = 15

pytestmark = pytest.mark.django_db(transaction=True)

BOUNDED = hypothesis_settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture
def service(live_server, runtime, make_key, settings):
    """The live service's schema, and the headers and body fix-up of a live key."""
    runtime.script = lambda prompt, body: Reply(text="fine", prompt_tokens=3, completion_tokens=1)
    settings.RUNTIME_READ_TIMEOUT = 2.0
    default_profile()
    _, plain = make_key(name="schemathesis")
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/schema/?format=json")
    return schema, plain


def with_key(case, plain: str) -> dict:
    """Call arguments: the key in the header (agent API) or in the body (/api.php). Names
    the schema cannot list (a model the runtime serves, a profile that exists) are set to
    ones that exist, so that valid generated requests reach past those look-ups."""
    # An invalid request stays as generated: fixing a field might make it valid.
    negative = case.meta is not None and case.meta.generation.mode == GenerationMode.NEGATIVE
    if isinstance(case.body, dict) and not negative:
        if case.path == "/api.php":
            case.body["api_key"] = plain
            if isinstance(case.body.get("model"), str):
                case.body["model"] = "test-model"
            # Free-form parts (unknown fields and options) may not hold a NUL or an unpaired
            # surrogate at any depth: a rule OpenAPI 3.0 cannot state (keys included).
            for name in set(case.body) - API_PHP_FIELDS:
                del case.body[name]
            options = case.body.get("options")
            if isinstance(options, dict):
                for name in set(options) - set(RULES):
                    del options[name]
        if case.path.startswith("/v1/"):
            fix_openai_body(case)
        if isinstance(case.body.get("profile"), str):
            case.body["profile"] = "default"
        # A webhook's host must resolve to a public address, and this machine has no DNS:
        # an address literal that is public (nothing is sent: no worker runs here).
        if isinstance(case.body.get("webhook"), str):
            case.body["webhook"] = "https://93.184.215.14/hook"
        # The conversation may be busy with a chat of an earlier case (no worker runs them):
        # `reject` would then be refused as it should, which the schema cannot foresee.
        if case.body.get("on_busy") == "reject":
            case.body["on_busy"] = "enqueue"
    if not negative and case.headers and "Idempotency-Key" in case.headers:
        # A key names one request: two generated requests with one key and two bodies are
        # refused (422) as they should, which the schema cannot foresee either.
        case.headers["Idempotency-Key"] = uuid.uuid4().hex
    return {"headers": {"Authorization": f"Bearer {plain}"}}


def fix_openai_body(case) -> None:
    """A model that exists (one the runtime serves, or the in-process embedder), and no
    free-form part (fields OpenAI's clients may add) holding a NUL at any depth."""
    body = case.body
    if isinstance(body.get("model"), str):
        body["model"] = "all-minilm-l6-v2" if case.path == "/v1/embeddings" else "test-model"
    # A vector's length is the model's: the schema cannot say which.
    body.pop("dimensions", None)
    for name in set(body) - set(OPENAI_BODIES[case.path]().fields):
        del body[name]
    for name, keep in (("response_format", {"type"}), ("stream_options", {"include_usage"})):
        part = body.get(name)
        for key in set(part) - keep if isinstance(part, dict) else ():
            del part[key]
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            for name in set(message) - {"role", "content"}:
                del message[name]
            parts = message.get("content")
            for part in parts if isinstance(parts, list) else []:
                for name in set(part) - {"type", "text"} if isinstance(part, dict) else ():
                    del part[name]


class Tally:
    """What ran, printed for the record (``pytest -s``)."""

    operations: set[str] = set()
    cases = 0
    modes: dict[str, int] = {}
    steps: dict[str, int] = {}

    @classmethod
    def count(cls, case) -> None:
        cls.operations.add(case.operation.label)
        cls.cases += 1
        mode = str(getattr(getattr(case.meta, "generation", None), "mode", "?"))
        cls.modes[mode] = cls.modes.get(mode, 0) + 1


def test_every_operation_answers_valid_and_invalid_requests_without_error_as_documented(
    service,
):
    schema, plain = service
    operations = list(schema.get_all_operations())
    assert len(operations) == 16
    for result in operations:
        for mode in GenerationMode:
            strategy = result.ok().as_strategy(generation_mode=mode)

            @BOUNDED
            @given(case=strategy)
            def run(case):
                kwargs = with_key(case, plain)
                case.call_and_validate(**kwargs)
                Tally.count(case)

            try:
                run()
            except Unsatisfiable:
                # No invalid request exists for an operation without inputs (/healthz).
                assert mode == GenerationMode.NEGATIVE
    print(
        f"schemathesis: {len(Tally.operations)} operations, {Tally.cases} cases "
        f"({Tally.modes}), 0 failures"
    )


def test_stateful_scenarios_follow_the_links_without_error_and_as_documented(service):
    schema, plain = service
    machine = schema.as_state_machine()

    class Scenario(machine):
        def get_call_kwargs(self, case):
            return with_key(case, plain)

        def after_call(self, response, case):
            super().after_call(response, case)
            label = f"{case.operation.label} -> {response.status_code}"
            Tally.steps[label] = Tally.steps.get(label, 0) + 1

    Scenario.run(
        settings=hypothesis_settings(
            max_examples=SCENARIOS,
            stateful_step_count=6,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
    )
    print(
        f"schemathesis stateful: {sum(Tally.steps.values())} calls: {sorted(Tally.steps.items())}"
    )
    followed = {
        label
        for label in Tally.steps
        if label.startswith(("GET /agent/job/{", "POST /agent/job/{"))
    }
    assert any(label.endswith("-> 200") for label in followed), Tally.steps
