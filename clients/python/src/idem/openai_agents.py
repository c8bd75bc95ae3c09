"""OpenAI Agents SDK: function tools whose every call goes through idem.

    refund_tool = idem_function_tool(idem, refund)          # instead of function_tool(refund)
    agent = Agent(name="support", tools=[refund_tool], model=...)
    with idem.run("run-42"):
        result = await Runner.run(agent, "refund order 1234")

A replayed call is not executed: the model reads the replay note and the stored result. For a
tool that idem holds for approval (effect `irreversible`, or `approval: "always"`), the tool's
`needs_approval` asks idem: the run pauses with an interruption while a person decides in
idem's dashboard, and resumes through `RunState` (`state.approve(item)`, `Runner.run(agent,
state)`) once they have; a rejection reaches the model with who rejected it and why.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Optional, Union

from agents import FunctionTool, function_tool

from . import errors
from .client import AsyncIdem, Idem
from .guard import GuardResult, GuardSpec, _async_claim, async_call_guarded, log
from .models import Claim

__all__ = ["idem_function_tool"]


def _model_text(outcome: GuardResult) -> Any:
    if outcome.replayed:
        return f"{outcome.note}. Stored result: {json.dumps(outcome.value, default=str)}"
    return outcome.value


def _rejection_text(error: errors.Rejected) -> str:
    who = error.decided_by or "a person"
    return f"not done: {who} rejected this call in idem: {error.reason or error.message}"


def idem_function_tool(
    client: Union[Idem, AsyncIdem],
    fn: Callable[..., Any],
    *,
    tool: Optional[str] = None,
    key: Optional[Callable[..., str]] = None,
    **function_tool_kwargs: Any,
) -> FunctionTool:
    """`function_tool(fn)`, guarded by idem as the tool `tool` (default: the function's name).

    Run the agent inside `idem.run(run_id)`; `key` gives a business key from the arguments.
    """
    async_client = client._twin()
    base = function_tool(fn, failure_error_function=None, **function_tool_kwargs)
    spec = GuardSpec(tool or base.name, key=key)
    claims: dict[str, Claim] = {}
    policy: dict[str, bool] = {}

    def fails_open(unavailable: errors.IdemUnavailable) -> bool:
        """Under `fail_open`, idem being down lets the call go on (the guard then runs it
        unrecorded and logs it); under `fail_closed`, the error stands."""
        if async_client.on_unavailable != "fail_open":
            raise unavailable
        log.error("idem is unavailable: cannot ask whether %s needs approval (fail_open)", spec.tool)
        return False

    async def asks_a_person() -> bool:
        if "asks" not in policy:
            try:
                found = await async_client.get_tool(spec.tool)
            except errors.IdemUnavailable as unavailable:
                return fails_open(unavailable)
            policy["asks"] = found.get("effect") == "irreversible" or found.get("approval") == "always"
        return policy["asks"]

    async def needs_approval(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
        if not await asks_a_person():
            return False
        try:
            claims[call_id] = await _async_claim(
                async_client, spec, params, spec.claim_kwargs(params), 0
            )
        except errors.AwaitingApproval:
            return True
        except errors.IdemUnavailable as unavailable:
            return fails_open(unavailable)
        return False

    async def on_invoke_tool(ctx: Any, input_json: str) -> Any:
        named = json.loads(input_json) if input_json else {}
        claimed = claims.pop(getattr(ctx, "tool_call_id", ""), None)
        try:
            outcome = await async_call_guarded(
                async_client, spec, named, lambda: base.on_invoke_tool(ctx, input_json), claimed
            )
        except errors.Rejected as rejected:
            return _rejection_text(rejected)
        except errors.AwaitingApproval as waiting:
            return f"not done yet: waiting for a person's approval in idem ({waiting.dashboard_url})"
        return _model_text(outcome)

    return dataclasses.replace(base, on_invoke_tool=on_invoke_tool, needs_approval=needs_approval)
