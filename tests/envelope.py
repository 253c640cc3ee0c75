"""The one check that an answer is the service's error envelope."""


def assert_error(response, status: int, error: str) -> dict:
    """The response is ``{"ok": false, "error", "message", "details"}`` with this status and
    error id, as JSON; returns the body."""
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["ok"] is False
    assert body["error"] == error
    assert isinstance(body["message"], str) and body["message"]
    assert isinstance(body["details"], dict)
    return body
