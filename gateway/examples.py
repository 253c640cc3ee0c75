"""Examples of the gateway's requests and answers for the API docs (the demo key's model),
checked against the schema by tests/test_schema.py."""

from core.schema import example

MODEL_CALL = example(
    "A question",
    request={
        "api_key": "<the demo key: var/demo_key>",
        "model": "gemma3:270m",
        "prompt": "Q: What is the capital of France?\nA:",
        "options": {"temperature": 0, "num_predict": 16, "stop": ["\n"]},
    },
    answer={
        "ok": True,
        "model": "gemma3:270m",
        "response": " Paris",
        "elapsed": 0.412,
        "usage": {"prompt_tokens": 12, "completion_tokens": 2},
    },
)
HEALTH = example("Alive", answer={"ok": True, "data": {"status": "alive"}})
READY = example(
    "Ready",
    answer={
        "ok": True,
        "data": {"status": "ready", "checks": {"database": "ok", "runtime:default": "ok"}},
    },
)
