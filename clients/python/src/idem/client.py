"""`Idem` and `AsyncIdem`: one method per endpoint an agent uses, typed answers, typed errors."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

import httpx

from . import _http
from ._http import Request, claim_request, error_body, read_claim, read_json, transport_error
from .guard import GuardMixin
from .models import Claim, Operation, operation_of

Json = Any

DEFAULT_TIMEOUT = 10.0


class _Base(GuardMixin):
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        on_unavailable: str = "fail_closed",
        in_progress_wait: float = 30.0,
    ) -> None:
        if on_unavailable not in ("fail_closed", "fail_open"):
            raise ValueError("on_unavailable is 'fail_closed' or 'fail_open'")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.on_unavailable = on_unavailable
        self.in_progress_wait = in_progress_wait

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def _claim(self, path: str, tool: Optional[str], args: Mapping[str, Any], **kw: Any) -> Request:
        return claim_request(path, tool, args, timeout=self.timeout, **kw)


def _completion(
    lease_token: str,
    outcome: str,
    *,
    result: Json = None,
    error: Optional[Mapping[str, Any]] = None,
    retryable: bool = False,
    provider_ref: Optional[str] = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"lease_token": lease_token, "outcome": outcome, "retryable": retryable}
    if outcome == "succeeded":
        body["result"] = result
    if error is not None:
        body["error"] = dict(error)
    if provider_ref is not None:
        body["provider_ref"] = provider_ref
    return body


class Idem(_Base):
    """The synchronous client. `Idem(base_url, api_key=KEY)`; close it, or use it as a context manager."""

    def __init__(self, base_url: str, api_key: str, **kw: Any) -> None:
        super().__init__(base_url, api_key, **kw)
        self._client = httpx.Client(base_url=self.base_url, headers=self._headers())
        self._async_twin: Optional[AsyncIdem] = None

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "Idem":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, request: Request) -> httpx.Response:
        try:
            return self._client.request(
                request.method,
                request.path,
                json=request.body,
                headers=dict(request.headers),
                timeout=request.timeout or self.timeout,
            )
        except httpx.HTTPError as error:
            raise transport_error(error) from error

    def _twin(self) -> "AsyncIdem":
        # A guarded async function on the sync client talks to idem asynchronously.
        if self._async_twin is None:
            self._async_twin = AsyncIdem(
                self.base_url,
                self.api_key,
                timeout=self.timeout,
                on_unavailable=self.on_unavailable,
                in_progress_wait=self.in_progress_wait,
            )
        return self._async_twin

    def claim(
        self,
        tool: str,
        args: Mapping[str, Any],
        *,
        key: Optional[str] = None,
        business_key: Optional[str] = None,
        run_id: Optional[str] = None,
        step: Optional[int] = None,
        wait: Optional[float] = None,
    ) -> Claim:
        """Begins an operation: a Claim (execute if `must_execute`), or the contract's error."""
        request = self._claim(
            "/v1/operations", tool, args, key=key, business_key=business_key,
            run_id=run_id, step=step, wait=wait,
        )
        return read_claim(self._send(request), self.base_url)

    def wait(self, tool: str, args: Mapping[str, Any], *, seconds: float = 30, **kw: Any) -> Claim:
        """A claim that waits (`Prefer: wait`) up to `seconds` while the operation is pending or awaiting approval."""
        return self.claim(tool, args, wait=seconds, **kw)

    def invoke(
        self,
        tool: str,
        args: Mapping[str, Any],
        *,
        key: Optional[str] = None,
        business_key: Optional[str] = None,
        run_id: Optional[str] = None,
        step: Optional[int] = None,
        wait: Optional[float] = None,
    ) -> Claim:
        """idem calls the tool's executor itself (`POST /v1/tools/{name}/invoke`)."""
        request = self._claim(
            f"/v1/tools/{tool}/invoke", None, args, key=key, business_key=business_key,
            run_id=run_id, step=step, wait=wait,
        )
        return read_claim(self._send(request), self.base_url)

    def complete(
        self, operation_id: str, lease_token: str, result: Json = None, *,
        provider_ref: Optional[str] = None,
    ) -> Operation:
        """Records success with `result`; returns the final Op."""
        body = _completion(lease_token, "succeeded", result=result, provider_ref=provider_ref)
        return self._post_operation(operation_id, "complete", body)

    def fail(
        self, operation_id: str, lease_token: str, code: str, message: str, *,
        retryable: bool = False,
    ) -> Operation:
        """Records a failure: permanent (replayed to later callers) unless `retryable`."""
        body = _completion(
            lease_token, "failed", error=error_body(code, message), retryable=retryable
        )
        return self._post_operation(operation_id, "complete", body)

    def unknown(self, operation_id: str, lease_token: str, code: str, message: str) -> Operation:
        """Reports that the caller cannot tell what happened; reconciliation decides."""
        body = {"lease_token": lease_token, "error": error_body(code, message)}
        return self._post_operation(operation_id, "unknown", body)

    def get(self, operation_id: str) -> Operation:
        """`GET /v1/operations/{id}`."""
        response = self._send(Request("GET", f"/v1/operations/{operation_id}"))
        return operation_of(read_json(response, self.base_url))

    def get_tool(self, name: str) -> Any:
        """A tool's policy (`GET /v1/tools/{name}`), its default one if never registered."""
        return read_json(self._send(Request("GET", f"/v1/tools/{name}")), self.base_url)

    def put_tool(self, name: str, policy: Mapping[str, Any]) -> Any:
        """Registers a tool's policy (`PUT /v1/tools/{name}`; an admin's credentials)."""
        return read_json(self._send(Request("PUT", f"/v1/tools/{name}", dict(policy))), self.base_url)

    def _post_operation(self, operation_id: str, action: str, body: Any) -> Operation:
        response = self._send(Request("POST", f"/v1/operations/{operation_id}/{action}", body))
        return operation_of(read_json(response, self.base_url))


class AsyncIdem(_Base):
    """The asynchronous client, the same methods as `Idem`, awaited."""

    def __init__(self, base_url: str, api_key: str, **kw: Any) -> None:
        super().__init__(base_url, api_key, **kw)
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=self._headers())

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> "AsyncIdem":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _twin(self) -> "AsyncIdem":
        return self

    async def _send(self, request: Request) -> httpx.Response:
        try:
            return await self._client.request(
                request.method,
                request.path,
                json=request.body,
                headers=dict(request.headers),
                timeout=request.timeout or self.timeout,
            )
        except httpx.HTTPError as error:
            raise transport_error(error) from error

    async def claim(
        self,
        tool: str,
        args: Mapping[str, Any],
        *,
        key: Optional[str] = None,
        business_key: Optional[str] = None,
        run_id: Optional[str] = None,
        step: Optional[int] = None,
        wait: Optional[float] = None,
    ) -> Claim:
        """Begins an operation: a Claim (execute if `must_execute`), or the contract's error."""
        request = self._claim(
            "/v1/operations", tool, args, key=key, business_key=business_key,
            run_id=run_id, step=step, wait=wait,
        )
        return read_claim(await self._send(request), self.base_url)

    async def wait(
        self, tool: str, args: Mapping[str, Any], *, seconds: float = 30, **kw: Any
    ) -> Claim:
        """A claim that waits (`Prefer: wait`) while the operation is pending or awaiting approval."""
        return await self.claim(tool, args, wait=seconds, **kw)

    async def invoke(
        self,
        tool: str,
        args: Mapping[str, Any],
        *,
        key: Optional[str] = None,
        business_key: Optional[str] = None,
        run_id: Optional[str] = None,
        step: Optional[int] = None,
        wait: Optional[float] = None,
    ) -> Claim:
        """idem calls the tool's executor itself (`POST /v1/tools/{name}/invoke`)."""
        request = self._claim(
            f"/v1/tools/{tool}/invoke", None, args, key=key, business_key=business_key,
            run_id=run_id, step=step, wait=wait,
        )
        return read_claim(await self._send(request), self.base_url)

    async def complete(
        self, operation_id: str, lease_token: str, result: Json = None, *,
        provider_ref: Optional[str] = None,
    ) -> Operation:
        """Records success with `result`; returns the final Op."""
        body = _completion(lease_token, "succeeded", result=result, provider_ref=provider_ref)
        return await self._post_operation(operation_id, "complete", body)

    async def fail(
        self, operation_id: str, lease_token: str, code: str, message: str, *,
        retryable: bool = False,
    ) -> Operation:
        """Records a failure: permanent (replayed to later callers) unless `retryable`."""
        body = _completion(
            lease_token, "failed", error=error_body(code, message), retryable=retryable
        )
        return await self._post_operation(operation_id, "complete", body)

    async def unknown(
        self, operation_id: str, lease_token: str, code: str, message: str
    ) -> Operation:
        """Reports that the caller cannot tell what happened; reconciliation decides."""
        body = {"lease_token": lease_token, "error": error_body(code, message)}
        return await self._post_operation(operation_id, "unknown", body)

    async def get(self, operation_id: str) -> Operation:
        """`GET /v1/operations/{id}`."""
        response = await self._send(Request("GET", f"/v1/operations/{operation_id}"))
        return operation_of(read_json(response, self.base_url))

    async def get_tool(self, name: str) -> Any:
        """A tool's policy (`GET /v1/tools/{name}`), its default one if never registered."""
        return read_json(await self._send(Request("GET", f"/v1/tools/{name}")), self.base_url)

    async def put_tool(self, name: str, policy: Mapping[str, Any]) -> Any:
        """Registers a tool's policy (`PUT /v1/tools/{name}`; an admin's credentials)."""
        response = await self._send(Request("PUT", f"/v1/tools/{name}", dict(policy)))
        return read_json(response, self.base_url)

    async def _post_operation(self, operation_id: str, action: str, body: Any) -> Operation:
        response = await self._send(
            Request("POST", f"/v1/operations/{operation_id}/{action}", body)
        )
        return operation_of(read_json(response, self.base_url))


AnyIdem = Union[Idem, AsyncIdem]
