"""One exception class per error of the contract, and `IdemUnavailable` for transport errors."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from .models import Operation


class IdemError(Exception):
    """An error answer of the idem server: `{"error": {"code", "message", "details"}}`."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "idem_error",
        status_code: Optional[int] = None,
        details: Optional[Mapping[str, Any]] = None,
        operation: Optional[Operation] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status_code = status_code
        self.details: Mapping[str, Any] = details or {}
        self.operation = operation


class IdemUnavailable(IdemError):
    """idem could not be reached (connection refused, timeout, a 5xx): nothing is known.

    `retry_after`: the seconds a 5xx answer's `Retry-After` asked for (e.g. `503
    database_unavailable`), else None.
    """

    def __init__(self, message: str, *, retry_after: Optional[float] = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class InProgress(IdemError):
    """`409 operation_in_progress`: another caller holds the lease; ask again later."""

    def __init__(self, message: str, *, retry_after: Optional[float] = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class OutcomeUnknown(IdemError):
    """`409 operation_outcome_unknown`, or the tool timed out: never retry; reconciliation decides."""


class KeyReused(IdemError):
    """`422 idempotency_key_reused`: the same key with other arguments."""


class AwaitingApproval(IdemError):
    """`202`: the operation waits for a person; `dashboard_url` is where they decide."""

    def __init__(self, message: str, *, dashboard_url: Optional[str] = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.dashboard_url = dashboard_url

    @property
    def operation_id(self) -> Optional[str]:
        return self.operation.id if self.operation else None


class Rejected(IdemError):
    """A person rejected the operation (or its approval expired); carries who and why."""

    @property
    def decided_by(self) -> Optional[str]:
        approval = self.operation.approval if self.operation else None
        return approval.decided_by if approval else None

    @property
    def reason(self) -> Optional[str]:
        approval = self.operation.approval if self.operation else None
        return approval.reason if approval else None


class RateLimited(IdemError):
    """`429 too_many_requests`; `retry_after` in seconds."""

    def __init__(self, message: str, *, retry_after: Optional[float] = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class LeaseLost(IdemError):
    """`409 lease_lost`: the lease expired or was taken over before the completion."""


class AlreadyFinal(IdemError):
    """`409 operation_already_final`: a different completion was already stored."""


class BadRequest(IdemError):
    """A `400`/`413`/`415` answer: nothing was stored."""


class Unauthorized(IdemError):
    """`401`/`403`: missing or bad credentials, or a role that lacks the permission."""


class NotFound(IdemError):
    """`404`."""


class PermanentFailure(Exception):
    """Raise it from a guarded function for a failure that retrying cannot change.

    It is stored (`failed`, not retryable) and raised again, with the same code and message,
    to every later caller with the same key, who never runs the function.
    """

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(message or code)
        self.code = code
        self.message = message or code
