"""The guard: claim → act → complete around a function, and `run(run_id)` that numbers the steps."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import logging
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, Optional, TypeVar

import httpx

from . import errors
from .models import Claim, Operation

if TYPE_CHECKING:
    from .client import AsyncIdem, Idem

log = logging.getLogger("idem")

F = TypeVar("F", bound=Callable[..., Any])

#: Exceptions after which nobody can tell whether the side effect happened: timeouts and
#: transport errors (the request may have reached the provider, its answer did not come
#: back). `asyncio.TimeoutError` is `TimeoutError` from Python 3.11 on, not in 3.10.
DEFAULT_UNKNOWN_ON: tuple[type[BaseException], ...] = (
    TimeoutError, ConnectionError, asyncio.TimeoutError, httpx.TransportError,
)

#: The transport errors of HTTP libraries that are not idem's dependencies, by module and
#: class name, looked up only when the module is already loaded (a tool that raised one of
#: them has loaded it).
_LIBRARY_TRANSPORT_ERRORS = (
    ("requests.exceptions", ("ConnectionError", "Timeout", "ChunkedEncodingError")),
    ("aiohttp", ("ClientConnectionError", "ClientPayloadError")),
)

#: How long, in seconds, the guard keeps trying to record an outcome once the tool acted,
#: while idem is unreachable or rate-limits the key (nothing of it is stored until then).
RECORD_PATIENCE = 15.0


class Run:
    """A run of an agent: guarded calls inside it get the steps `step`, `step + 1`, …

    A resumed run that repeats its calls in the same order reproduces the same keys.
    `last` is the outcome of the latest guarded call (with its replay note, if any).
    """

    def __init__(self, run_id: str, step: int = 0) -> None:
        self.run_id = run_id
        self.step = step
        self.last: Optional[GuardResult] = None

    def take_step(self) -> int:
        step = self.step
        self.step += 1
        return step


@dataclass(frozen=True)
class GuardResult:
    """A guarded call's outcome: the value, and whether (with which note) it was a replay."""

    value: Any
    replayed: bool
    note: Optional[str]
    operation: Optional[Operation]


_run: contextvars.ContextVar[Optional[Run]] = contextvars.ContextVar("idem_run", default=None)
_operation: contextvars.ContextVar[Optional[Operation]] = contextvars.ContextVar(
    "idem_operation", default=None
)


def current_run() -> Optional[Run]:
    """The run the caller is in (`with idem.run(...)`), if any."""
    return _run.get()


def current_operation() -> Optional[Operation]:
    """Inside a guarded function: the operation it executes (its key, attempt, `provider_key`)."""
    return _operation.get()


def provider_key() -> Optional[str]:
    """Inside a guarded function: the key to give the provider as its idempotency key.

    The operation's `provider_key` when the server sends one, else the operation's own key.
    """
    operation = _operation.get()
    if operation is None:
        return None
    return operation.provider_key or operation.key


@contextlib.contextmanager
def run(run_id: str, *, step: int = 0) -> Iterator[Run]:
    """Guarded calls inside get the next step number of run `run_id`, starting at `step`."""
    state = Run(run_id, step)
    token = _run.set(state)
    try:
        yield state
    finally:
        _run.reset(token)


def to_json(value: Any) -> Any:
    """Pydantic models and dataclasses as their JSON form; everything else as it is."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


@dataclass(frozen=True)
class GuardSpec:
    """How one function is guarded (see `GuardMixin.guard`)."""

    tool: str
    key: Optional[Callable[..., str]] = None
    permanent: tuple[type[BaseException], ...] = ()
    #: None: the default (`DEFAULT_UNKNOWN_ON` and the loaded HTTP libraries' transport errors).
    unknown_on: Optional[tuple[type[BaseException], ...]] = None
    with_note: bool = False
    wait: Optional[float] = None
    in_progress_wait: Optional[float] = None
    on_unavailable: Optional[str] = None
    exclude: tuple[str, ...] = ()

    def call_args(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by name, as JSON: what idem fingerprints."""
        bound = inspect.signature(fn).bind(*args, **kwargs)
        bound.apply_defaults()
        named: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            if name in ("self", "cls") or name in self.exclude:
                continue
            kind = inspect.signature(fn).parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                named.update({k: to_json(v) for k, v in value.items()})
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                named[name] = [to_json(v) for v in value]
            else:
                named[name] = to_json(value)
        return named

    def claim_kwargs(self, named: dict[str, Any]) -> dict[str, Any]:
        run_state = _run.get()
        kw: dict[str, Any] = {}
        if self.key is not None:
            kw["business_key"] = self.key(**named)
        if run_state is not None:
            kw["run_id"] = run_state.run_id
            kw["step"] = run_state.take_step()
        return kw

    def failure_of(self, error: BaseException) -> Optional[tuple[str, str]]:
        """(code, message) when `error` is permanent, else None."""
        if isinstance(error, errors.PermanentFailure):
            return error.code, error.message
        if self.permanent and isinstance(error, self.permanent):
            return type(error).__name__, str(error)
        return None

    def leaves_unknown(self, error: BaseException) -> bool:
        """Whether the side effect may or may not have happened after `error`."""
        if self.unknown_on is not None:
            return isinstance(error, self.unknown_on)
        return isinstance(error, DEFAULT_UNKNOWN_ON) or isinstance(error, _library_transport_errors())

    def replayed_error(self, operation: Operation) -> BaseException:
        error = operation.error or {}
        code, message = str(error.get("code", "failed")), str(error.get("message", ""))
        for cls in self.permanent:
            if cls.__name__ == code:
                try:
                    return cls(message)
                except Exception:  # a class whose constructor wants more: the generic one
                    break
        return errors.PermanentFailure(code, message)

    def settle(self, claim: Claim) -> GuardResult:
        """The outcome of a claim that found the operation settled (a replay)."""
        operation = claim.operation
        if operation.status == "succeeded":
            return GuardResult(operation.result, True, claim.note, operation)
        if operation.status == "rejected":
            raise errors.Rejected(
                claim.note or "rejected", code="rejected", status_code=claim.status_code,
                operation=operation,
            )
        if operation.status == "failed":
            raise self.replayed_error(operation)
        raise errors.IdemError(
            f"unexpected operation status {operation.status!r}", operation=operation
        )

    def answer(self, outcome: GuardResult) -> Any:
        run_state = _run.get()
        if run_state is not None:
            run_state.last = outcome
        return outcome if self.with_note else outcome.value


def _deadline(seconds: Optional[float]) -> float:
    return time.monotonic() + (seconds or 0)


def _left(deadline: float) -> float:
    return deadline - time.monotonic()


class GuardMixin:
    """`guard` and `run` for both clients."""

    on_unavailable: str
    in_progress_wait: float

    def run(self, run_id: str, *, step: int = 0) -> contextlib.AbstractContextManager[Run]:
        """`with idem.run("run-42"):` numbers the guarded calls inside as steps of that run."""
        return run(run_id, step=step)

    def guard(
        self,
        tool: str,
        *,
        key: Optional[Callable[..., str]] = None,
        permanent: tuple[type[BaseException], ...] = (),
        unknown_on: Optional[tuple[type[BaseException], ...]] = None,
        with_note: bool = False,
        wait: Optional[float] = None,
        in_progress_wait: Optional[float] = None,
        on_unavailable: Optional[str] = None,
        exclude: tuple[str, ...] = (),
    ) -> Callable[[F], F]:
        """Guards a function (sync or async) as the tool `tool` of idem's registry.

        - `key`: a business identity from the arguments (`lambda order_id, **_: ...`);
          otherwise the key is derived from the run and step (`with idem.run(...)`).
        - `permanent`: exception classes that are stored as permanent failures and replayed
          (raise `idem.PermanentFailure(code, message)` for the same without a class).
        - `unknown_on`: exceptions after which the effect may or may not have happened:
          reported `unknown`, raised as `OutcomeUnknown`. Default: timeouts and transport
          errors (`TimeoutError`, `ConnectionError`, httpx's `TransportError`, requests'
          and aiohttp's connection and timeout errors); a tuple replaces the default. Other
          exceptions are stored as retryable failures and re-raised.
        - `with_note`: return a `GuardResult` (value, replayed, note) instead of the value.
        - `wait`: seconds to block for a person's approval instead of raising `AwaitingApproval`.
        - `in_progress_wait`: seconds to wait for another caller's attempt before `InProgress`.
        - `on_unavailable`: `"fail_closed"` (raise) or `"fail_open"` (act unrecorded, log).
        - `exclude`: parameters left out of the arguments idem sees.
        """
        spec = GuardSpec(
            tool, key, tuple(permanent), None if unknown_on is None else tuple(unknown_on), with_note, wait,
            in_progress_wait, on_unavailable, tuple(exclude),
        )

        def decorate(fn: F) -> F:
            if inspect.iscoroutinefunction(fn):
                return _async_guarded(self._twin(), spec, fn)  # type: ignore[attr-defined]
            return _sync_guarded(self, spec, fn)  # type: ignore[arg-type]

        return decorate


def _policy(client: Any, spec: GuardSpec) -> tuple[str, float]:
    return (
        spec.on_unavailable or client.on_unavailable,
        client.in_progress_wait if spec.in_progress_wait is None else spec.in_progress_wait,
    )


def _sync_guarded(client: "Idem", spec: GuardSpec, fn: F) -> F:
    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        named = spec.call_args(fn, args, kwargs)
        return spec.answer(call_guarded(client, spec, named, lambda: fn(*args, **kwargs)))

    return guarded  # type: ignore[return-value]


def call_guarded(
    client: "Idem", spec: GuardSpec, named: dict[str, Any], act: Callable[[], Any]
) -> GuardResult:
    """Claim → `act()` → complete, for the call of `spec.tool` with the arguments `named`."""
    claim_kw = spec.claim_kwargs(named)
    on_unavailable, in_progress_wait = _policy(client, spec)
    try:
        claim = _sync_claim(client, spec, named, claim_kw, in_progress_wait)
    except errors.IdemUnavailable:
        if on_unavailable != "fail_open":
            raise
        log.error("idem is unavailable: running %s UNRECORDED (fail_open)", spec.tool)
        return GuardResult(act(), False, None, None)
    if not claim.must_execute:
        return spec.settle(claim)
    assert claim.lease is not None
    op, token = claim.operation, claim.lease.token
    reset = _operation.set(op)
    try:
        value = act()
    except BaseException as error:
        _sync_report(client, spec, op, token, error)
        raise _reported(spec, error) from error
    finally:
        _operation.reset(reset)
    final = _sync_record(
        lambda: client.complete(op.id, token, to_json(value)), _completion_lost(on_unavailable, op)
    )
    return GuardResult(value, False, None, final or op)


def _async_guarded(client: "AsyncIdem", spec: GuardSpec, fn: F) -> F:
    @functools.wraps(fn)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        named = spec.call_args(fn, args, kwargs)
        return spec.answer(
            await async_call_guarded(client, spec, named, lambda: fn(*args, **kwargs))
        )

    return guarded  # type: ignore[return-value]


async def async_call_guarded(
    client: "AsyncIdem",
    spec: GuardSpec,
    named: dict[str, Any],
    act: Callable[[], Awaitable[Any]],
    claimed: Optional[Claim] = None,
) -> GuardResult:
    """Claim → `await act()` → complete, for the call of `spec.tool` with the arguments `named`.

    `claimed`: a claim already made for this call (its step taken), used instead of a new one.
    """
    on_unavailable, in_progress_wait = _policy(client, spec)
    try:
        claim = claimed or await _async_claim(
            client, spec, named, spec.claim_kwargs(named), in_progress_wait
        )
    except errors.IdemUnavailable:
        if on_unavailable != "fail_open":
            raise
        log.error("idem is unavailable: running %s UNRECORDED (fail_open)", spec.tool)
        return GuardResult(await act(), False, None, None)
    if not claim.must_execute:
        return spec.settle(claim)
    assert claim.lease is not None
    op, token = claim.operation, claim.lease.token
    reset = _operation.set(op)
    try:
        value = await act()
    except BaseException as error:
        await _async_report(client, spec, op, token, error)
        raise _reported(spec, error) from error
    finally:
        _operation.reset(reset)
    final = await _async_record(
        lambda: client.complete(op.id, token, to_json(value)), _completion_lost(on_unavailable, op)
    )
    return GuardResult(value, False, None, final or op)


def _completion_lost(on_unavailable: str, op: Operation) -> Callable[[errors.IdemError], None]:
    """What to do when the completion of `op`, which acted, cannot be recorded."""

    def give_up(cause: errors.IdemError) -> None:
        if not isinstance(cause, (errors.IdemUnavailable, errors.RateLimited)):
            raise cause  # e.g. LeaseLost: idem answered, and refused
        # Nothing is stored: the operation becomes `unknown` when its lease runs out.
        if on_unavailable != "fail_open":
            raise errors.IdemUnavailable(
                f"operation {op.id} ran but its outcome could not be recorded ({cause}); it "
                "will become unknown and be reconciled", code="unavailable", operation=op,
            ) from cause
        log.error("operation %s ran but idem could not record its outcome (fail_open): %s",
                  op.id, cause)

    return give_up


class _Persistence:
    """When to try again to record an outcome after the tool acted (nothing is stored yet).

    A rate-limited key waits the `Retry-After` idem sent; an unreachable idem (or a 5xx)
    is asked again with a growing pause, or after its `Retry-After`. Either gives up once
    `RECORD_PATIENCE` would be exceeded. Any other error (e.g. `LeaseLost`) is final.
    """

    def __init__(self) -> None:
        self.deadline = _deadline(RECORD_PATIENCE)
        self.pause = 0.2

    def delay(self, error: errors.IdemError) -> Optional[float]:
        """Seconds to wait before the next attempt, or None to give up."""
        if isinstance(error, errors.RateLimited):
            wait = error.retry_after or 1.0
        elif isinstance(error, errors.IdemUnavailable):
            wait = error.retry_after or self.pause
            self.pause = min(self.pause * 2, 5.0)
        else:
            return None
        return wait if wait <= _left(self.deadline) else None


def _sync_record(
    record: Callable[[], Operation], give_up: Callable[[errors.IdemError], None]
) -> Optional[Operation]:
    """`record()` (a completion or a failure report), tried again while idem is unreachable
    or rate-limits; `give_up(error)` when it will not be recorded."""
    persistence = _Persistence()
    while True:
        try:
            return record()
        except errors.IdemError as error:
            wait = persistence.delay(error)
            if wait is None:
                give_up(error)
                return None
            log.warning("recording an outcome: %s; again in %.1f s", error, wait)
            time.sleep(wait)


async def _async_record(
    record: Callable[[], Awaitable[Operation]], give_up: Callable[[errors.IdemError], None]
) -> Optional[Operation]:
    """`await record()`, tried again like `_sync_record`."""
    persistence = _Persistence()
    while True:
        try:
            return await record()
        except errors.IdemError as error:
            wait = persistence.delay(error)
            if wait is None:
                give_up(error)
                return None
            log.warning("recording an outcome: %s; again in %.1f s", error, wait)
            await asyncio.sleep(wait)


def _library_transport_errors() -> tuple[type[BaseException], ...]:
    """The transport error classes of the HTTP libraries loaded so far (requests, aiohttp)."""
    found: list[type[BaseException]] = []
    for module_name, class_names in _LIBRARY_TRANSPORT_ERRORS:
        module = sys.modules.get(module_name)
        for class_name in class_names if module is not None else ():
            cls = getattr(module, class_name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found.append(cls)
    return tuple(found)


def _classify(spec: GuardSpec, error: BaseException) -> tuple[str, str, str]:
    """('failed'|'retryable'|'unknown', code, message) for an exception of the guarded function."""
    failure = spec.failure_of(error)
    if failure is not None:
        return ("failed", *failure)
    if spec.leaves_unknown(error) or not isinstance(error, Exception):
        # A timeout, a dropped connection, or a cancellation mid-call: it may have acted.
        return "unknown", type(error).__name__, str(error) or type(error).__name__
    return "retryable", type(error).__name__, str(error) or type(error).__name__


def _reported(spec: GuardSpec, error: BaseException) -> BaseException:
    kind, _, message = _classify(spec, error)
    if kind == "unknown" and isinstance(error, Exception):
        return errors.OutcomeUnknown(
            f"{spec.tool}: the outcome is unknown ({type(error).__name__}: {message}); "
            "it will not be retried, reconciliation decides",
            code="operation_outcome_unknown", operation=_operation.get(),
        )
    return error


def _report(spec: GuardSpec, error: BaseException) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """The client method (`unknown` or `fail`) and its arguments that record `error`."""
    kind, code, message = _classify(spec, error)
    if kind == "unknown":
        return "unknown", (code, message), {}
    return "fail", (code, message), {"retryable": kind == "retryable"}


def _report_lost(method: str, op: Operation) -> Callable[[errors.IdemError], None]:
    def give_up(cause: errors.IdemError) -> None:
        # The lease runs out instead: the operation turns `unknown`, never runs twice.
        log.error("could not record the %s of operation %s: %s", method, op.id, cause)

    return give_up


def _sync_report(client: "Idem", spec: GuardSpec, op: Operation, token: str, error: BaseException) -> None:
    method, args, kwargs = _report(spec, error)
    report = getattr(client, method)
    _sync_record(lambda: report(op.id, token, *args, **kwargs), _report_lost(method, op))


async def _async_report(
    client: "AsyncIdem", spec: GuardSpec, op: Operation, token: str, error: BaseException
) -> None:
    method, args, kwargs = _report(spec, error)
    report = getattr(client, method)
    await _async_record(lambda: report(op.id, token, *args, **kwargs), _report_lost(method, op))


class _Patience:
    """How long a claim may still wait (`Prefer: wait`) for approval or another caller's attempt."""

    def __init__(self, spec: GuardSpec, in_progress_wait: float) -> None:
        self.approval_deadline = _deadline(spec.wait)
        self.progress_deadline = _deadline(in_progress_wait)

    def next_wait(self, refusal: errors.IdemError) -> float:
        """Seconds to wait in the next claim; re-raises `refusal` when patience is over."""
        deadline = (
            self.approval_deadline
            if isinstance(refusal, errors.AwaitingApproval)
            else self.progress_deadline
        )
        wait = _left(deadline)
        if wait < 1:
            raise refusal
        return wait


def _sync_claim(
    client: "Idem", spec: GuardSpec, named: dict[str, Any], claim_kw: dict[str, Any], in_progress_wait: float
) -> Claim:
    """Claims; waits (`Prefer: wait`) for another caller's attempt, or for approval if asked to."""
    patience, wait = _Patience(spec, in_progress_wait), None
    while True:
        try:
            return client.claim(spec.tool, named, wait=wait, **claim_kw)
        except (errors.AwaitingApproval, errors.InProgress) as refusal:
            wait = patience.next_wait(refusal)


async def _async_claim(
    client: "AsyncIdem", spec: GuardSpec, named: dict[str, Any], claim_kw: dict[str, Any], in_progress_wait: float
) -> Claim:
    """Claims; waits (`Prefer: wait`) for another caller's attempt, or for approval if asked to."""
    patience, wait = _Patience(spec, in_progress_wait), None
    while True:
        try:
            return await client.claim(spec.tool, named, wait=wait, **claim_kw)
        except (errors.AwaitingApproval, errors.InProgress) as refusal:
            wait = patience.next_wait(refusal)
