"""Typed views of the contract's answers (docs/api.md "Op", the claim's answer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional


@dataclass(frozen=True)
class Approval:
    """A person's decision on an operation that waited for approval."""

    decided_by: Optional[str]
    decided_at: Optional[str]
    decision: Optional[str]
    reason: Optional[str]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Approval":
        return cls(
            decided_by=data.get("decided_by"),
            decided_at=data.get("decided_at"),
            decision=data.get("decision"),
            reason=data.get("reason"),
        )


@dataclass(frozen=True)
class Operation:
    """One operation of the ledger (the contract's `Op`); `raw` keeps every field the server sent."""

    id: str
    key: str
    tool: str
    status: str
    namespace: Optional[str] = None
    key_source: Optional[str] = None
    effect: Optional[str] = None
    fingerprint: Optional[str] = None
    args: Any = None
    run_id: Optional[str] = None
    step: Optional[int] = None
    attempt: int = 1
    result: Any = None
    error: Optional[dict[str, Any]] = None
    retryable: bool = False
    provider_ref: Optional[str] = None
    #: The value to pass to the tool's provider as *its* idempotency key (newer servers).
    provider_key: Optional[str] = None
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    completed_at: Optional[str] = None
    expires_at: Optional[str] = None
    approval: Optional[Approval] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Operation":
        approval = data.get("approval")
        return cls(
            id=data["id"],
            key=data["key"],
            tool=data["tool"],
            status=data["status"],
            namespace=data.get("namespace"),
            key_source=data.get("key_source"),
            effect=data.get("effect"),
            fingerprint=data.get("fingerprint"),
            args=data.get("args"),
            run_id=data.get("run_id"),
            step=data.get("step"),
            attempt=data.get("attempt", 1),
            result=data.get("result"),
            error=data.get("error"),
            retryable=bool(data.get("retryable", False)),
            provider_ref=data.get("provider_ref"),
            provider_key=data.get("provider_key"),
            created_at=data.get("created_at"),
            updated_at=data.get("updated_at"),
            completed_at=data.get("completed_at"),
            expires_at=data.get("expires_at"),
            approval=Approval.from_json(approval) if isinstance(approval, Mapping) else None,
            raw=dict(data),
        )

    @property
    def is_final(self) -> bool:
        """Settled for good: `succeeded`, `failed` (not retryable) or `rejected`."""
        return self.status in ("succeeded", "rejected") or (
            self.status == "failed" and not self.retryable
        )


@dataclass(frozen=True)
class Lease:
    """The right to execute the tool once, until `expires_at`; `token` completes it."""

    token: str
    expires_at: str


@dataclass(frozen=True)
class Claim:
    """The answer to a claim (`POST /v1/operations`) or an invoke.

    `lease` is set when the caller must now execute the tool (`201`); `replayed` and `note`
    when the outcome was already stored (`200`).
    """

    operation: Operation
    lease: Optional[Lease] = None
    replayed: bool = False
    note: Optional[str] = None
    status_code: int = 201

    @property
    def must_execute(self) -> bool:
        """The caller holds the lease and must run the tool, then complete."""
        return self.lease is not None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], status_code: int) -> "Claim":
        lease = data.get("lease")
        return cls(
            operation=Operation.from_json(data["operation"]),
            lease=Lease(lease["token"], lease["expires_at"]) if isinstance(lease, Mapping) else None,
            replayed=bool(data.get("replayed", False)),
            note=data.get("note"),
            status_code=status_code,
        )


def operation_of(data: Mapping[str, Any]) -> Operation:
    """The Op of an answer about one operation: under `operation`, or (older servers) top level."""
    inner = data.get("operation")
    return Operation.from_json(inner if isinstance(inner, Mapping) else data)
