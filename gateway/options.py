"""The rules of the known Ollama option names, checked before anything reaches a runtime.

A runtime told ``temperature: "hot"`` answers its own validation error (llama-cpp-python
with a server file path in it); checked here, the client gets 400 ``validation_error``
naming the option. Names not listed pass through unchanged: runtimes grow new options
faster than this table.
"""

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    """One option's type (``number``, ``integer``, ``boolean`` or ``stop``) and range."""

    kind: str
    minimum: float | None = None
    maximum: float | None = None

    def problem(self, value: Any) -> str | None:
        if self.kind == "boolean":
            return None if isinstance(value, bool) else "Must be true or false."
        if self.kind == "stop":
            if isinstance(value, str) or (
                isinstance(value, list) and all(isinstance(item, str) for item in value)
            ):
                return None
            return "Must be a string or a list of strings."
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"Must be {'an integer' if self.kind == 'integer' else 'a number'}."
        if self.kind == "integer" and not isinstance(value, int):
            return "Must be an integer."
        if isinstance(value, int) and value.bit_length() > 64:  # before any float conversion
            return "Must be at most 20 digits long."
        if not math.isfinite(value):
            return "Must be a finite number."
        if self.minimum is not None and value < self.minimum:
            return f"Must be at least {self.minimum:g}."
        if self.maximum is not None and value > self.maximum:
            return f"Must be at most {self.maximum:g}."
        return None

    def schema(self) -> dict[str, Any]:
        if self.kind == "stop":
            return {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
        schema: dict[str, Any] = {"type": self.kind}
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema


def number(*, minimum: float | None = None, maximum: float | None = None) -> Rule:
    return Rule("number", minimum, maximum)


def integer(*, minimum: int | None = None, maximum: int | None = None) -> Rule:
    return Rule("integer", minimum, maximum)


boolean = Rule("boolean")
stop_sequences = Rule("stop")


# 64-bit seeds: what the runtimes take (llama.cpp's is a uint32, larger ones wrap).
_SEED_RANGE = 2**63

RULES: dict[str, Rule] = {
    # Sampling
    "temperature": number(minimum=0),
    "top_p": number(minimum=0, maximum=1),
    "min_p": number(minimum=0, maximum=1),
    "typical_p": number(minimum=0, maximum=1),
    "top_k": integer(minimum=0),
    "tfs_z": number(minimum=0),
    "seed": integer(minimum=-_SEED_RANGE, maximum=_SEED_RANGE - 1),
    "num_predict": integer(minimum=-2),
    "stop": stop_sequences,
    # Penalties
    "repeat_penalty": number(minimum=0),
    "repeat_last_n": integer(minimum=-1),
    "presence_penalty": number(),
    "frequency_penalty": number(),
    "penalize_newline": boolean,
    "mirostat": integer(minimum=0, maximum=2),
    "mirostat_tau": number(minimum=0),
    "mirostat_eta": number(minimum=0),
    # Loading the model (Ollama only; dropped for OpenAI-compatible runtimes)
    "num_ctx": integer(minimum=1),
    "num_batch": integer(minimum=1),
    "num_keep": integer(minimum=-1),
    "num_gpu": integer(minimum=-1),
    "main_gpu": integer(minimum=0),
    "num_thread": integer(minimum=0),
    "numa": boolean,
    "low_vram": boolean,
    "f16_kv": boolean,
    "logits_all": boolean,
    "vocab_only": boolean,
    "use_mmap": boolean,
    "use_mlock": boolean,
}


def option_errors(options: dict[str, Any]) -> dict[str, list[str]]:
    """``{name: [message]}`` for every known option whose value breaks its rule."""
    errors: dict[str, list[str]] = {}
    for name, value in options.items():
        rule = RULES.get(name)
        problem = rule.problem(value) if rule is not None else None
        if problem is not None:
            errors[name] = [problem]
    return errors


# Options that choose how the runtime loads the model: a client who sets them can force
# reloads or exhaust a shared runtime's memory. Refused unless the endpoint allows them.
LOAD_OPTIONS = ("num_gpu", "num_thread", "main_gpu", "use_mmap", "use_mlock", "numa", "low_vram")


@dataclass(frozen=True)
class OptionLimits:
    """What an operator lets clients set on one runtime endpoint."""

    max_context: int
    max_predict: int
    allowed_load_options: frozenset[str] = frozenset()

    def errors(self, options: dict[str, Any]) -> dict[str, list[str]]:
        """``{name: [message]}`` for each option outside these limits (its type already
        checked by :func:`option_errors`)."""
        errors: dict[str, list[str]] = {}
        for name in options:
            if name in LOAD_OPTIONS and name not in self.allowed_load_options:
                errors[name] = ["Not allowed: the runtime's operator sets how the model loads."]
        ranges = {"num_ctx": (1, self.max_context), "num_predict": (0, self.max_predict)}
        for name, (low, high) in ranges.items():
            value = options.get(name)
            if isinstance(value, int) and not low <= value <= high:
                errors[name] = [f"Must be between {low} and {high} on this runtime."]
        return errors


def options_schema() -> dict[str, Any]:
    """The OpenAPI schema of ``options``: the known names with their rules, bounded by the
    default runtime's limits (the settings; a routed endpoint has its own); others pass."""
    from django.conf import settings

    properties = {name: rule.schema() for name, rule in RULES.items()}
    properties["num_ctx"]["maximum"] = settings.RUNTIME_MAX_CONTEXT
    properties["num_predict"].update(minimum=0, maximum=settings.RUNTIME_MAX_PREDICT)
    for name in sorted(set(LOAD_OPTIONS) - set(settings.RUNTIME_ALLOWED_LOAD_OPTIONS)):
        properties[name] = {"not": {}, "description": "Refused unless the runtime allows it."}
    return {
        "type": "object",
        "properties": properties,
        "additionalProperties": True,
        "description": (
            "Ollama option names, checked by type and range (a bad one is 400 "
            "validation_error with details.fields['options.<name>']). Unknown names are "
            "passed to the runtime unchanged. Each runtime endpoint bounds num_ctx and "
            "num_predict (-1 and -2 included) and refuses the options that choose how the "
            "model loads (num_gpu, num_thread, main_gpu, use_mmap, use_mlock, numa, "
            "low_vram) unless its operator allows them: 400 validation_error naming the "
            "option and its range. For OpenAI-compatible runtimes num_predict becomes "
            "max_tokens and options about loading the model are dropped."
        ),
    }
