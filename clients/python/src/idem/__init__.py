"""idem: the idempotency ledger for tool-calling AI agents, from Python.

    idem = Idem("http://127.0.0.1:3000", api_key=KEY)

    @idem.guard("send_email")
    def send_email(to: str, body: str) -> dict: ...

    with idem.run("run-42"):
        send_email(to="a@example.com", body="hi")   # step 0: claimed, executed, completed
"""

from .canonical import canonical_json, derived_key, fingerprint
from .client import AsyncIdem, Idem
from .errors import (
    AlreadyFinal,
    AwaitingApproval,
    BadRequest,
    IdemError,
    IdemUnavailable,
    InProgress,
    KeyReused,
    LeaseLost,
    NotFound,
    OutcomeUnknown,
    PermanentFailure,
    RateLimited,
    Rejected,
    Unauthorized,
)
from .guard import GuardResult, Run, current_operation, current_run, provider_key, run
from .models import Approval, Claim, Lease, Operation

__all__ = [
    "AlreadyFinal", "Approval", "AsyncIdem", "AwaitingApproval", "BadRequest", "Claim",
    "GuardResult", "Idem", "IdemError", "IdemUnavailable", "InProgress", "KeyReused", "Lease",
    "LeaseLost", "NotFound", "Operation", "OutcomeUnknown", "PermanentFailure", "RateLimited",
    "Rejected", "Run", "Unauthorized", "canonical_json", "current_operation", "current_run",
    "derived_key", "fingerprint", "provider_key", "run",
]
