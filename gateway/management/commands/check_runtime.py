"""``manage.py check_runtime [--generate] [--timeout S]``.

Lists every configured model runtime (the enabled ``RuntimeEndpoint`` rows that a
``ModelRoute`` uses, and the default ``MODEL_RUNTIME_URL``), the models routed to each and
the models each says it serves, and whether it answers. Exits 1 when one does not answer
(or, with ``--generate``, when a generation fails), so it can gate a deploy.
"""

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.test.utils import override_settings

from core.errors import error_id
from core.exceptions import DomainError
from gateway import runtime
from gateway.routing import Endpoint

# A question the embedded base model answers in a few tokens (raw completion, a stop).
PROBE_PROMPT = "Q: What is the capital of France?\nA:"
PROBE_OPTIONS = {"temperature": 0, "num_predict": 16, "stop": ["\n"]}


def _served(name: str, listed: list[str]) -> bool:
    """Whether ``name`` is among the runtime's models (Ollama adds ``:latest`` to bare names)."""
    return name in listed or (":" not in name and f"{name}:latest" in listed)


class Command(BaseCommand):
    help = "Lists the configured model runtimes and their models; says whether each answers."

    def add_arguments(self, parser):
        parser.add_argument(
            "--generate",
            action="store_true",
            help="Also time a tiny generation of every model on every runtime.",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=30.0,
            help="Seconds to wait for each answer (default 30). A llama.cpp server answers "
            "its model list only after the generation it is busy with.",
        )

    def handle(self, *args, **opts):
        endpoints = list(runtime.iter_endpoints())
        # The runtime client reads its time-out from settings on every call.
        with override_settings(RUNTIME_READ_TIMEOUT=opts["timeout"]):
            failures = sum(
                self._check(endpoint, routed, generate=opts["generate"])
                for endpoint, routed in endpoints
            )
        if failures:
            raise CommandError(f"{failures} of the checks above failed.", returncode=1)
        self.stdout.write(self.style.SUCCESS(f"All {len(endpoints)} runtime(s) answer."))

    def _check(self, endpoint: Endpoint, routed: list[str], *, generate: bool) -> int:
        """Prints one endpoint's state; returns the number of failed checks."""
        is_default = endpoint.name == "default"
        title = "default (MODEL_RUNTIME_URL)" if is_default else endpoint.name
        self.stdout.write(f"{title}: {endpoint.base_url} [{endpoint.api}]")
        models = list(routed)
        if is_default:
            self.stdout.write("  routed: every model without a route")
            if settings.AGENT_MODEL not in models:
                models.append(settings.AGENT_MODEL)
        else:
            self.stdout.write(f"  routed: {', '.join(routed)}")
        started = time.perf_counter()
        try:
            listed = runtime.list_models(endpoint)
        except DomainError as err:
            self.stdout.write(
                self.style.ERROR(f"  DOES NOT ANSWER: {error_id(err)}: {err.message}")
            )
            return 1
        except (ValueError, KeyError, TypeError) as err:  # answered, not the expected JSON
            self.stdout.write(self.style.ERROR(f"  ANSWERS GARBAGE: {err}"))
            return 1
        elapsed_ms = (time.perf_counter() - started) * 1000
        self.stdout.write(self.style.SUCCESS(f"  answers in {elapsed_ms:.0f} ms"))
        self.stdout.write(f"  serves: {', '.join(listed) or '(no models)'}")
        for model in models:
            name = endpoint.model_name(model)
            if not _served(name, listed):
                label = "AGENT_MODEL " if model == settings.AGENT_MODEL else ""
                self.stdout.write(self.style.WARNING(f"  {label}{name} is not listed there"))
        if not generate:
            return 0
        return sum(self._generate(endpoint, model) for model in models)

    def _generate(self, endpoint: Endpoint, model: str) -> int:
        try:
            result, elapsed = _timed_generation(endpoint, model)
        except DomainError as err:
            self.stdout.write(self.style.ERROR(f"  {model}: generation failed: {error_id(err)}"))
            return 1
        tokens = result.completion_tokens
        rate = f", {tokens / elapsed:.1f} tokens/s" if tokens and elapsed else ""
        self.stdout.write(
            f"  {model}: {elapsed:.2f} s for {tokens if tokens is not None else '?'} "
            f"tokens{rate}: {result.text.strip()[:60]!r}"
        )
        return 0


def _timed_generation(endpoint: Endpoint, model: str) -> tuple[Any, float]:
    """One tiny generation on exactly this endpoint, with no usage record (not a call of a
    key), through the runtime client's single-endpoint call."""
    started = time.perf_counter()
    result = runtime.generate_at(endpoint, model, PROBE_PROMPT, dict(PROBE_OPTIONS))
    return result, time.perf_counter() - started
