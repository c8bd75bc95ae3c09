"""Pydantic AI: a hooks capability that puts every tool call through idem.

    agent = Agent(model, tools=[refund], capabilities=[idem_capability(idem)])
    with idem.run("run-42"):
        result = await agent.run("refund order 1234", output_type=[str, DeferredToolRequests])

A replayed call is not executed: the model gets `{"note": ..., "result": ...}` with the stored
result. A call idem holds for approval is deferred (`ApprovalRequired`, the run ends with
`DeferredToolRequests`); a person decides in idem's dashboard, and the resumed run (any
`DeferredToolResults` answer) asks idem again. A rejection reaches the model as the tool's
answer, with who rejected it and why.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence, Union

from pydantic_ai.capabilities import Hooks
from pydantic_ai.exceptions import ApprovalRequired

from . import errors
from .client import AsyncIdem, Idem
from .guard import GuardSpec, async_call_guarded, to_json

__all__ = ["idem_capability"]


def rejection_text(error: errors.Rejected) -> str:
    """What the model reads when a person rejected the call."""
    who = error.decided_by or "a person"
    return f"not done: {who} rejected this call in idem: {error.reason or error.message}"


def idem_capability(
    client: Union[Idem, AsyncIdem],
    *,
    tools: Optional[Sequence[str]] = None,
    tool_names: Optional[Mapping[str, str]] = None,
    keys: Optional[Mapping[str, Callable[..., str]]] = None,
) -> Hooks:
    """A `Hooks` capability guarding the agent's tools (`tools`: only these; default all).

    `tool_names` maps an agent's tool name to its name in idem's registry (default: the same);
    `keys` gives a business key function per tool. Run the agent inside `idem.run(run_id)`.
    """
    async_client = client._twin()
    names = dict(tool_names or {})
    key_functions = dict(keys or {})
    hooks = Hooks()

    @hooks.on.tool_execute(tools=tools)
    async def through_idem(ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        spec = GuardSpec(names.get(call.tool_name, call.tool_name), key=key_functions.get(call.tool_name))
        named = to_json(args) if isinstance(args, Mapping) else {"args": to_json(args)}
        try:
            outcome = await async_call_guarded(async_client, spec, dict(named), lambda: handler(args))
        except errors.AwaitingApproval as waiting:
            raise ApprovalRequired(
                metadata={"idem_operation_id": waiting.operation_id,
                          "dashboard_url": waiting.dashboard_url}
            ) from waiting
        except errors.Rejected as rejected:
            return rejection_text(rejected)
        if outcome.replayed:
            return {"note": outcome.note, "result": outcome.value}
        return outcome.value

    return hooks
