"""LangGraph / LangChain: a tool-call middleware for `create_agent` that goes through idem.

    agent = create_agent(model, tools=[refund], middleware=[IdemMiddleware(idem)])
    with idem.run("run-42"):
        agent.invoke({"messages": [("user", "refund order 1234")]})

A replayed call is not executed: the model reads the replay note and the stored content. The
middleware never raises a graph interrupt (the tool node would run again on resume): a call
idem holds for approval answers the model that it waits for a person, with the dashboard link,
and the harness runs the graph again once the person decided; a rejection answers with who
and why.

For LangGraph's functional API, `idem_task` is `@task` with the task's side effect guarded:

    @idem_task(idem)
    def refund(order_id: str, cents: int) -> dict: ...

    @entrypoint(checkpointer=InMemorySaver())
    def workflow(order_id: str) -> dict:
        return refund(order_id, 500).result()

A workflow run again on its thread (a retry, a resume from an older checkpoint) finds the same
operation for the same task and arguments, whatever order its tasks ran in.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Mapping, Optional, Union

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage

from . import errors
from .client import AsyncIdem, Idem
from .canonical import fingerprint
from .guard import GuardResult, GuardSpec, async_call_guarded, call_guarded

__all__ = ["IdemMiddleware", "idem_task"]


def _content(value: Any) -> Any:
    if isinstance(value, ToolMessage):
        return value.content
    if isinstance(value, Mapping):
        return value.get("content", value)
    return value


class IdemMiddleware(AgentMiddleware):
    """Puts every tool call of a `create_agent` agent through idem (`wrap_tool_call`)."""

    def __init__(
        self,
        client: Union[Idem, AsyncIdem],
        *,
        tool_names: Optional[Mapping[str, str]] = None,
        keys: Optional[Mapping[str, Callable[..., str]]] = None,
    ) -> None:
        super().__init__()
        self.client = client
        self.tool_names = dict(tool_names or {})
        self.keys = dict(keys or {})

    def _spec(self, request: Any) -> tuple[GuardSpec, dict[str, Any], dict[str, Any]]:
        call = request.tool_call
        spec = GuardSpec(self.tool_names.get(call["name"], call["name"]), key=self.keys.get(call["name"]))
        return spec, dict(call.get("args") or {}), call

    @staticmethod
    def _answer(call: Mapping[str, Any], outcome: GuardResult) -> Any:
        if not outcome.replayed:
            return outcome.value
        content = f"{outcome.note}. Stored result: {_content(outcome.value)}"
        return ToolMessage(content=content, tool_call_id=call["id"], name=call["name"])

    @staticmethod
    def _held(call: Mapping[str, Any], error: errors.IdemError) -> ToolMessage:
        if isinstance(error, errors.Rejected):
            who = error.decided_by or "a person"
            text = f"not done: {who} rejected this call in idem: {error.reason or error.message}"
        else:
            url = getattr(error, "dashboard_url", None)
            text = f"not done yet: waiting for a person's approval in idem ({url})"
        return ToolMessage(content=text, tool_call_id=call["id"], name=call["name"], status="error")

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if not isinstance(self.client, Idem):
            raise TypeError("a synchronous agent needs the synchronous Idem client")
        spec, named, call = self._spec(request)
        try:
            outcome = call_guarded(self.client, spec, named, lambda: handler(request))
        except (errors.AwaitingApproval, errors.Rejected) as held:
            return self._held(call, held)
        return self._answer(call, outcome)

    async def awrap_tool_call(
        self, request: Any, handler: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        spec, named, call = self._spec(request)
        try:
            outcome = await async_call_guarded(
                self.client._twin(), spec, named, lambda: handler(request)
            )
        except (errors.AwaitingApproval, errors.Rejected) as held:
            return self._held(call, held)
        return self._answer(call, outcome)


def idem_task(
    client: Union[Idem, AsyncIdem],
    tool: Optional[str] = None,
    *,
    key: Optional[Callable[..., str]] = None,
    **guard_options: Any,
) -> Callable[[Callable[..., Any]], Any]:
    """`@task` (LangGraph's functional API) whose call goes through idem as the tool `tool`
    (default: the function's name); `guard_options` are those of `idem.guard`.

    The key: `key(**arguments)` if given (a business identity), else the workflow's thread
    (`thread_id`), the tool and the arguments' fingerprint, so no `idem.run` is needed and
    parallel tasks cannot swap keys. Two calls of one task with the same arguments on one
    thread are then one action.
    """
    from langgraph.func import task

    def decorate(fn: Callable[..., Any]) -> Any:
        name = tool or fn.__name__
        guarded = client.guard(name, key=key or _thread_key(name), **guard_options)(fn)
        return task(guarded)

    return decorate


def _thread_key(tool: str) -> Callable[..., str]:
    def key(**arguments: Any) -> str:
        from langgraph.config import get_config

        thread = str(get_config().get("configurable", {}).get("thread_id") or "")
        if not thread:
            raise ValueError("an idem task needs the workflow's thread_id in its config")
        digest = fingerprint(tool, arguments)
        # A key is at most 255 printable characters: a long or unprintable thread id is hashed.
        if len(thread) > 100 or not thread.isascii() or not thread.isprintable():
            thread = fingerprint("thread", thread)[:32]
        return f"task:{thread}:{tool}:{digest}"

    return key
