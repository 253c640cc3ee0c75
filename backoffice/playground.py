"""The playground: a staff member sends a prompt with one of their own keys, or as
themselves.

The call goes through ``gateway.services.model_call``, the service of ``/api.php``, after
the same field validation (its serializer), so it passes the same scope, model and rate
checks and leaves the same usage record. The key is picked from the member's own live keys
instead of typed, and is checked live again right before the call; without one picked, the
call runs under a short-lived key of the member's own (``playground``, the ``model`` scope,
``SHORT_LIVED_MINUTES``), made on first use. Errors are shown as sentences.
"""

import json
import time
from typing import Any

from django import forms
from django.contrib.admin import site
from django.db.models import Q
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone

from core.errors import to_answer
from core.exceptions import DomainError
from gateway import runtime, services
from gateway.models import ApiKey
from gateway.serializers import LLMRequestSerializer


def runtime_models() -> tuple[list[str], list[str]]:
    """Models the configured runtimes say they serve, and the runtimes that did not answer."""
    models: set[str] = set()
    silent: list[str] = []
    for endpoint, routed in runtime.iter_endpoints():
        try:
            served = runtime.list_models(endpoint)
        except DomainError as err:
            silent.append(f"{endpoint.name}: {to_answer(err).error}")
            served = []
        models.update(routed or served)
    return sorted(models), silent


SHORT_LIVED_NAME = "playground"
SHORT_LIVED_MINUTES = 60


def own_live_keys(user) -> Any:
    now = timezone.now()
    return ApiKey.objects.filter(owner=user, revoked_at__isnull=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )


class PlaygroundForm(forms.Form):
    api_key = forms.ModelChoiceField(
        queryset=ApiKey.objects.none(),
        label="Key",
        required=False,
        empty_label="Run as me (a short-lived key of my own)",
        help_text="One of your live keys, or none: a key of yours that lasts an hour is made "
        "for the playground (its plain text is never shown).",
    )
    model = forms.ChoiceField(choices=())
    prompt = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}))
    options = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='A JSON object, Ollama names: {"temperature": 0.2, "num_predict": 32}.',
    )

    def __init__(self, *args: Any, user, models: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["api_key"].queryset = own_live_keys(user)
        self.fields["model"].choices = [(m, m) for m in models]

    def clean_options(self) -> dict[str, Any] | None:
        raw = (self.cleaned_data.get("options") or "").strip()
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("Options must be a JSON object.")
        return value


def sentences(details: Any, path: str = "") -> list[str]:
    """An error's details as sentences: ``options.temperature: Must be at least 0.``."""
    if isinstance(details, dict):
        lines = []
        for name, value in details.items():
            where = name if name not in ("fields", "non_field_errors") else ""
            lines += sentences(value, f"{path}.{where}".strip(".") if where else path)
        return lines
    if isinstance(details, list):
        return [line for item in details for line in sentences(item, path)]
    text = str(details)
    return [f"{path}: {text}" if path else text]


def _call(api_key: ApiKey, fields: dict[str, Any], started: float) -> dict[str, Any]:
    """The /api.php checks after the key, then the call; the answer or the error."""
    data = {"model": fields["model"], "prompt": fields["prompt"]}
    if fields["options"] is not None:
        data["options"] = fields["options"]
    serializer = LLMRequestSerializer(data=data)
    del serializer.fields["api_key"]  # picked from the member's own keys, checked below
    try:
        if not serializer.is_valid():
            return {
                "error": "validation_error",
                "message": "Invalid input.",
                "problems": sentences(serializer.errors),
            }
        services.api_key_check_live(api_key)
        valid = serializer.validated_data
        result = services.model_call(
            api_key=api_key,
            model=valid["model"],
            prompt=valid["prompt"],
            options=valid.get("options"),
            started=started,
        )
    except DomainError as err:
        answer = to_answer(err)
        return {
            "error": answer.error,
            "message": answer.message,
            "problems": sentences(answer.details),
        }
    return {"result": result}


def playground_view(request: HttpRequest) -> TemplateResponse:
    started = time.perf_counter()
    models, silent = runtime_models()
    outcome: dict[str, Any] = {}
    if request.method == "POST":
        form = PlaygroundForm(request.POST, user=request.user, models=models)
        if form.is_valid():
            api_key = form.cleaned_data["api_key"] or services.api_key_short_lived(
                owner=request.user, name=SHORT_LIVED_NAME, minutes=SHORT_LIVED_MINUTES
            )
            outcome = {"used_key": api_key, **_call(api_key, form.cleaned_data, started)}
    else:
        form = PlaygroundForm(user=request.user, models=models)
    context = {
        **site.each_context(request),
        "title": "Playground",
        "form": form,
        "silent_runtimes": silent,
        **outcome,
    }
    return TemplateResponse(request, "admin/playground.html", context)
