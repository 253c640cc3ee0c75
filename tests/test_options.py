"""`options` of /api.php: the known Ollama names are checked by type and range at the
gateway (400 validation_error, nothing sent to the runtime); unknown names pass."""

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.options import RULES, option_errors
from tests.envelope import assert_error


def call(client, api_key, options):
    body = {"api_key": api_key, "model": "test-model", "prompt": "hi", "options": options}
    return client.post("/api.php", data=json.dumps(body), content_type="application/json")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"temperature": "hot"}, "options.temperature"),
        ({"temperature": -0.1}, "options.temperature"),
        ({"temperature": True}, "options.temperature"),
        ({"top_p": 1.5}, "options.top_p"),
        ({"top_k": 2.5}, "options.top_k"),
        ({"num_predict": -5}, "options.num_predict"),
        ({"num_ctx": 0}, "options.num_ctx"),
        ({"seed": "42"}, "options.seed"),
        ({"seed": 1.0}, "options.seed"),
        ({"stop": 3}, "options.stop"),
        ({"stop": ["\n", 3]}, "options.stop"),
        ({"repeat_penalty": None}, "options.repeat_penalty"),
        ({"mirostat": 3}, "options.mirostat"),
        ({"use_mmap": "yes"}, "options.use_mmap"),
    ],
)
def test_a_bad_known_option_is_a_validation_error_and_reaches_no_runtime(
    api_client, api_key, runtime, options, field
):
    body = assert_error(call(api_client, api_key, options), 400, "validation_error")
    assert list(body["details"]["fields"]) == [field]
    assert runtime.generate_requests() == []


@pytest.mark.django_db
def test_every_bad_option_is_named_at_once(api_client, api_key, runtime):
    response = call(api_client, api_key, {"temperature": "hot", "num_predict": -5, "top_k": 1})
    body = assert_error(response, 400, "validation_error")
    assert set(body["details"]["fields"]) == {"options.temperature", "options.num_predict"}


@pytest.mark.django_db
def test_good_and_unknown_options_pass_through_unchanged(api_client, api_key, runtime):
    options = {
        "temperature": 0,
        "top_p": 1,
        "num_predict": 64,
        "num_ctx": 4096,
        "seed": -1,
        "stop": "\n",
        "repeat_penalty": 1.1,
        "mystery_knob": {"anything": [1, "two"]},
    }
    assert call(api_client, api_key, options).status_code == 200
    [sent] = runtime.generate_requests()
    assert sent.body["options"] == options


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_number_is_refused(value):
    assert option_errors({"temperature": value}) == {"temperature": ["Must be a finite number."]}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=6,
)


@given(name=st.sampled_from(sorted(RULES)), value=json_values)
def test_any_value_of_a_known_option_is_accepted_or_named_never_raises(name, value):
    errors = option_errors({name: value})
    assert errors == {} or (
        list(errors) == [name] and all(isinstance(m, str) for m in errors[name])
    )
    if isinstance(value, bool) and RULES[name].kind in ("number", "integer"):
        assert errors


@given(name=st.text(max_size=10).filter(lambda n: n not in RULES), value=json_values)
def test_an_unknown_option_is_never_refused(name, value):
    assert option_errors({name: value}) == {}


NINES = int("9" * 400)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name", ["temperature", "seed", "num_predict", "top_k", "num_ctx", "mirostat", "top_p"]
)
def test_an_integer_too_large_for_a_float_is_a_validation_error_not_a_crash(
    api_client, api_key, runtime, name
):
    body = assert_error(call(api_client, api_key, {name: NINES}), 400, "validation_error")
    assert list(body["details"]["fields"]) == [f"options.{name}"]
    assert runtime.generate_requests() == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_ctx": 10_000_000}, "Must be between 1 and 8192 on this runtime."),
        ({"num_predict": -1}, "Must be between 0 and 4096 on this runtime."),
        ({"num_predict": -2}, "Must be between 0 and 4096 on this runtime."),
        ({"num_predict": 100_000}, "Must be between 0 and 4096 on this runtime."),
        ({"num_gpu": 999}, "Not allowed: the runtime's operator sets how the model loads."),
        ({"num_thread": 512}, "Not allowed: the runtime's operator sets how the model loads."),
        ({"main_gpu": 0}, "Not allowed: the runtime's operator sets how the model loads."),
        ({"use_mlock": True}, "Not allowed: the runtime's operator sets how the model loads."),
        ({"low_vram": True}, "Not allowed: the runtime's operator sets how the model loads."),
    ],
)
def test_options_past_the_runtimes_limits_are_refused_with_the_allowed_range(
    api_client, api_key, runtime, options, message
):
    body = assert_error(call(api_client, api_key, options), 400, "validation_error")
    [(field, messages)] = body["details"]["fields"].items()
    assert field == f"options.{next(iter(options))}"
    assert messages == [message]
    assert runtime.generate_requests() == []


@pytest.mark.django_db
def test_the_probes_options_are_all_named_at_once(api_client, api_key, runtime):
    options = {"num_ctx": 10000000, "num_gpu": 999, "num_thread": 512, "num_predict": -1}
    body = assert_error(call(api_client, api_key, options), 400, "validation_error")
    assert set(body["details"]["fields"]) == {f"options.{name}" for name in options}


@pytest.mark.django_db
def test_the_settings_set_the_default_runtimes_limits(api_client, api_key, runtime, settings):
    settings.RUNTIME_MAX_CONTEXT = 32768
    settings.RUNTIME_ALLOWED_LOAD_OPTIONS = ["num_thread"]
    options = {"num_ctx": 32768, "num_thread": 4}
    assert call(api_client, api_key, options).status_code == 200
    [sent] = runtime.generate_requests()
    assert sent.body["options"] == options


@pytest.mark.django_db
def test_a_routed_endpoints_limits_come_from_the_admin(api_client, api_key, runtime):
    from gateway import routing
    from gateway.models import ModelRoute, RuntimeEndpoint

    endpoint = RuntimeEndpoint.objects.create(
        name="small-box",
        base_url=runtime.url,
        api="ollama",
        max_context=2048,
        max_predict=128,
        allowed_load_options=["num_gpu"],
    )
    ModelRoute.objects.create(model="test-model", endpoint=endpoint)
    routing.clear_cache()
    refused = call(api_client, api_key, {"num_ctx": 4096, "num_predict": 129})
    body = assert_error(refused, 400, "validation_error")
    assert body["details"]["fields"] == {
        "options.num_ctx": ["Must be between 1 and 2048 on this runtime."],
        "options.num_predict": ["Must be between 0 and 128 on this runtime."],
    }
    assert call(api_client, api_key, {"num_ctx": 2048, "num_gpu": 1}).status_code == 200
