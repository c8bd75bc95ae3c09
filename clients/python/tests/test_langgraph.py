"""LangChain's create_agent (a LangGraph graph), a scripted chat model, a real idem."""

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool as lc_tool

import idem
from idem import AsyncIdem, Idem
from idem.langgraph import IdemMiddleware



class ScriptedChatModel(BaseChatModel):
    """Calls `tool` once with `args`, then answers with the tool's output (no network)."""

    tool: str
    args: dict
    seen: Any  # the test's own list (a list field would be copied)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        returns = [m for m in messages if isinstance(m, ToolMessage)]
        if returns:
            self.seen.append(returns[-1].content)
            message = AIMessage(content=str(returns[-1].content))
        else:
            message = AIMessage(content="", tool_calls=[
                {"name": self.tool, "args": self.args, "id": "call-1", "type": "tool_call"}])
        return ChatResult(generations=[ChatGeneration(message=message)])


def refund_agent(client, server, name, args, seen, calls, **middleware):
    @lc_tool(name)
    def refund(order_id: str, amount_cents: int) -> str:
        """Refund an order."""
        calls.append(order_id)
        assert idem.provider_key() is not None  # the operation reaches the tool
        return str(server.act(name, {"order_id": order_id, "cents": amount_cents}))

    model = ScriptedChatModel(tool=name, args=args, seen=seen)
    return create_agent(model, tools=[refund], middleware=[IdemMiddleware(client, **middleware)])


ARGS = {"order_id": "o-1", "amount_cents": 500}
ASK = {"messages": [("user", "refund order o-1")]}


def test_a_rerun_executes_once_and_the_model_reads_the_note(server, api_key, tool_name):
    seen, calls = [], []
    with Idem(server.base_url, api_key) as client:
        agent = refund_agent(client, server, tool_name, ARGS, seen, calls)
        for _ in range(2):
            with client.run("lg-run-1"):
                agent.invoke(ASK)
    assert calls == ["o-1"] and server.effects(tool_name) == 1
    assert "no new action taken" in seen[1]


async def test_the_async_middleware_replays_alike(server, api_key, tool_name):
    seen, calls = [], []
    async with AsyncIdem(server.base_url, api_key) as client:
        agent = refund_agent(client, server, tool_name, ARGS, seen, calls)
        for _ in range(2):
            with client.run("lg-async"):
                await agent.ainvoke(ASK)
    assert calls == ["o-1"] and "no new action taken" in seen[1]


def test_a_reused_key_with_other_arguments_is_refused(server, api_key, tool_name):
    seen, calls = [], []
    keys = {tool_name: lambda order_id, **_: f"refund:{order_id}"}
    with Idem(server.base_url, api_key) as client:
        with client.run("lg-a"):
            refund_agent(client, server, tool_name, ARGS, seen, calls, keys=keys).invoke(ASK)
        other = refund_agent(client, server, tool_name, {"order_id": "o-1", "amount_cents": 9},
                             seen, calls, keys=keys)
        with client.run("lg-b"), pytest.raises(idem.KeyReused):
            other.invoke(ASK)
    assert calls == ["o-1"]


def test_an_irreversible_tool_waits_for_a_person_without_an_interrupt(server, api_key, tool_name):
    server.put_tool(tool_name, effect="irreversible")
    seen, calls = [], []
    with Idem(server.base_url, api_key) as client:
        agent = refund_agent(client, server, tool_name, ARGS, seen, calls)
        with client.run("lg-approve"):
            agent.invoke(ASK)
        assert calls == [] and "waiting for a person's approval" in seen[-1]
        server.approve(server.waiting_for_approval(tool_name)[0])
        for _ in range(2):
            with client.run("lg-approve"):
                agent.invoke(ASK)
    assert calls == ["o-1"] and server.effects(tool_name) == 1


def test_a_rejection_reaches_the_model_with_the_reason(server, api_key, tool_name):
    server.put_tool(tool_name, effect="irreversible")
    seen, calls = [], []
    with Idem(server.base_url, api_key) as client:
        agent = refund_agent(client, server, tool_name, ARGS, seen, calls)
        with client.run("lg-reject"):
            agent.invoke(ASK)
        server.reject(server.waiting_for_approval(tool_name)[0], "over the refund limit")
        with client.run("lg-reject"):
            agent.invoke(ASK)
    assert calls == [] and "over the refund limit" in seen[-1] and "local-admin" in seen[-1]


def test_a_task_rerun_after_a_crash_replays_its_guarded_side_effect(server, api_key, tool_name):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.func import entrypoint, task

    calls, crashes = [], []
    with Idem(server.base_url, api_key) as client:

        @client.guard(tool_name)
        def refund(order_id: str) -> dict:
            calls.append(order_id)
            return server.act(tool_name, {"order_id": order_id})

        @task
        def refund_step(order_id: str) -> dict:
            done = refund(order_id)
            if not crashes:  # the worker dies after the refund, before the task finishes
                crashes.append(1)
                raise RuntimeError("worker died")
            return done

        @entrypoint(checkpointer=InMemorySaver())
        def workflow(order_id: str) -> dict:
            return refund_step(order_id).result()

        config = {"configurable": {"thread_id": tool_name}}
        with client.run("lg-task"), pytest.raises(RuntimeError):
            workflow.invoke("o-1", config)
        with client.run("lg-task"):
            resumed = workflow.invoke(None, config)
    assert calls == ["o-1"] and server.effects(tool_name) == 1
    assert resumed["id"].startswith("eff_")


def test_a_task_run_again_on_its_thread_acts_once(server, api_key, tool_name):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.func import entrypoint, task

    from idem.langgraph import idem_task

    calls = []
    with Idem(server.base_url, api_key) as client:
        @idem_task(client, tool_name)
        def refund(order_id: str, cents: int) -> dict:
            calls.append(order_id)
            return server.act(tool_name, {"order_id": order_id, "cents": cents})

        @task
        def unguarded(order_id: str) -> str:
            calls.append("unguarded " + order_id)
            return order_id

        @entrypoint(checkpointer=InMemorySaver())
        def workflow(order_id: str) -> dict:
            unguarded(order_id).result()
            return refund(order_id, 500).result()

        config = {"configurable": {"thread_id": "thread-" + tool_name}}
        first = workflow.invoke("o-1", config)
        again = workflow.invoke("o-1", config)  # a retry of the whole workflow on its thread
    # LangGraph runs both tasks again; only the guarded one's side effect is kept to once.
    assert calls == ["unguarded o-1", "o-1", "unguarded o-1"], calls
    assert server.effects(tool_name) == 1
    assert again == first


async def test_the_async_middleware_waits_for_a_person_and_carries_a_rejection(server, api_key, tool_name):
    server.put_tool(tool_name, effect="irreversible")
    async with AsyncIdem(server.base_url, api_key) as client:
        for decision in ("approve", "reject"):
            seen, calls = [], []
            agent = refund_agent(client, server, tool_name, ARGS, seen, calls)
            with client.run(f"lg-async-{decision}"):
                await agent.ainvoke(ASK)
            assert calls == [] and "waiting for a person's approval" in seen[-1]
            waiting = server.waiting_for_approval(tool_name)[0]
            if decision == "approve":
                server.approve(waiting)
            else:
                server.reject(waiting, "over the refund limit")
            for _ in range(2):
                with client.run(f"lg-async-{decision}"):
                    await agent.ainvoke(ASK)
            if decision == "approve":
                assert calls == ["o-1"] and "no new action taken" in seen[-1]
            else:
                assert calls == [] and "over the refund limit" in seen[-1]
    assert server.effects(tool_name) == 1
