"""Writes of the gateway: its keys (:mod:`.api_keys`) and its model calls
(:mod:`.model_calls`), named here for the views, the agents and the back office."""

from gateway.services.api_keys import (
    LAST_USED_RESOLUTION,
    api_key_authenticate,
    api_key_check_live,
    api_key_create,
    api_key_require_scope,
    api_key_revoke,
    api_key_short_lived,
    usage_prune,
)
from gateway.services.model_calls import (
    CLIENT_ORIGINS,
    AdmittedCall,
    ModelCallResult,
    counted,
    embedding_call_async,
    model_call,
    model_call_admit,
    model_call_async,
    model_call_stream,
)

__all__ = [
    "CLIENT_ORIGINS",
    "LAST_USED_RESOLUTION",
    "AdmittedCall",
    "ModelCallResult",
    "api_key_authenticate",
    "api_key_check_live",
    "api_key_create",
    "api_key_require_scope",
    "api_key_revoke",
    "api_key_short_lived",
    "counted",
    "embedding_call_async",
    "model_call",
    "model_call_admit",
    "model_call_async",
    "model_call_stream",
    "usage_prune",
]
