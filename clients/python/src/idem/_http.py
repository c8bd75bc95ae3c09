"""What the sync and async clients share: building requests and reading answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import httpx

from . import errors
from .models import Claim, Operation

#: The longest `Prefer: wait` the contract allows, in seconds.
MAX_WAIT_SECONDS = 60

_ERRORS_BY_CODE: dict[str, type[errors.IdemError]] = {
    "operation_in_progress": errors.InProgress,
    "operation_outcome_unknown": errors.OutcomeUnknown,
    "idempotency_key_reused": errors.KeyReused,
    "too_many_requests": errors.RateLimited,
    "lease_lost": errors.LeaseLost,
    "operation_already_final": errors.AlreadyFinal,
}


@dataclass(frozen=True)
class Request:
    """One HTTP request to idem."""

    method: str
    path: str
    body: Optional[Any] = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: Optional[float] = None


def claim_request(
    path: str,
    tool: Optional[str],
    args: Mapping[str, Any],
    *,
    key: Optional[str],
    business_key: Optional[str],
    run_id: Optional[str],
    step: Optional[int],
    wait: Optional[float],
    timeout: float,
) -> Request:
    body: dict[str, Any] = {"args": dict(args)}
    if tool is not None:
        body["tool"] = tool
    for name, value in (("key", key), ("business_key", business_key), ("run_id", run_id)):
        if value is not None:
            body[name] = value
    if step is not None:
        body["step"] = step
    headers: dict[str, str] = {}
    request_timeout = timeout
    if wait:
        seconds = max(1, min(MAX_WAIT_SECONDS, int(wait)))
        headers["Prefer"] = f"wait={seconds}"
        request_timeout = timeout + seconds
    return Request("POST", path, body, headers, request_timeout)


def transport_error(error: httpx.HTTPError) -> errors.IdemUnavailable:
    return errors.IdemUnavailable(f"idem is unreachable: {error!r}", code="unavailable")


def _retry_after(response: httpx.Response) -> Optional[float]:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def error_for(response: httpx.Response, base_url: str) -> errors.IdemError:
    """The exception for an answer that is not a success."""
    try:
        payload = response.json()
        error = payload["error"]
        code, message = error["code"], error.get("message", "")
        details = error.get("details") or {}
    except (ValueError, KeyError, TypeError):
        code, message, details = "http_" + str(response.status_code), response.text[:500], {}
    op_json = details.get("operation") if isinstance(details, Mapping) else None
    operation = Operation.from_json(op_json) if isinstance(op_json, Mapping) else None
    common: dict[str, Any] = dict(
        code=code, status_code=response.status_code, details=details, operation=operation
    )
    status = response.status_code
    cls = _ERRORS_BY_CODE.get(code)
    if cls in (errors.InProgress, errors.RateLimited):
        return cls(message, retry_after=_retry_after(response), **common)
    if cls is not None:
        return cls(message, **common)
    if status >= 500:
        return errors.IdemUnavailable(
            message or "idem answered a server error", retry_after=_retry_after(response), **common
        )
    if status in (401, 403):
        return errors.Unauthorized(message, **common)
    if status == 404:
        return errors.NotFound(message, **common)
    return errors.BadRequest(message, **common)


def dashboard_url(base_url: str, operation: Operation) -> str:
    return f"{base_url.rstrip('/')}/operations/{operation.id}"


def read_claim(response: httpx.Response, base_url: str) -> Claim:
    """A claim's answer: a Claim for 200/201; AwaitingApproval for 202; the error otherwise."""
    if response.status_code == 202:
        operation = Operation.from_json(response.json()["operation"])
        raise errors.AwaitingApproval(
            f"operation {operation.id} ({operation.tool}) waits for a person's approval",
            code="awaiting_approval",
            status_code=202,
            operation=operation,
            dashboard_url=dashboard_url(base_url, operation),
        )
    if response.is_success:
        return Claim.from_json(response.json(), response.status_code)
    raise error_for(response, base_url)


def read_json(response: httpx.Response, base_url: str) -> Any:
    if response.is_success:
        return response.json() if response.content else None
    raise error_for(response, base_url)


def error_body(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}
