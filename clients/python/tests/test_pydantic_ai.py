"""Pydantic AI's real agent loop, a scripted FunctionModel, a real idem and sandbox provider."""

import json

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

import idem
from idem import AsyncIdem
from idem.pydantic_ai import idem_capability



def scripted(tool: str, args: dict, seen: list):
    """A model that calls `tool` once, then answers with what the tool returned."""

    def model(messages, info):
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if returns:
            seen.append(returns[-1].content)
            return ModelResponse(parts=[TextPart(json.dumps(returns[-1].content, default=str))])
        return ModelResponse(parts=[ToolCallPart(tool, args)])

    return FunctionModel(model)


def refund_agent(client, server, tool, args, seen, calls):
    agent = Agent(scripted(tool, args, seen), output_type=[str, DeferredToolRequests],
                  capabilities=[idem_capability(client)])

    @agent.tool_plain(name=tool)
    def refund(order_id: str, amount_cents: int) -> dict:
        calls.append(order_id)
        assert idem.provider_key() is not None  # the operation reaches the tool
        return server.act(tool, {"order_id": order_id, "cents": amount_cents})

    return agent


ARGS = {"order_id": "o-1", "amount_cents": 500}


async def test_a_rerun_executes_once_and_the_model_reads_the_note(server, api_key, tool_name):
    seen, calls = [], []
    async with AsyncIdem(server.base_url, api_key) as client:
        agent = refund_agent(client, server, tool_name, ARGS, seen, calls)
        for _ in range(2):
            with client.run("pai-run-1"):
                await agent.run("refund order o-1")
        assert calls == ["o-1"] and server.effects(tool_name) == 1
        assert "no new action taken" in seen[1]["note"]
        assert seen[1]["result"] == seen[0]


async def test_a_reused_key_with_other_arguments_is_refused(server, api_key, tool_name):
    seen, calls = [], []
    async with AsyncIdem(server.base_url, api_key) as client:
        cap = idem_capability(client, keys={tool_name: lambda order_id, **_: f"refund:{order_id}"})
        for amount in (500, 900):
            agent = Agent(scripted(tool_name, {"order_id": "o-1", "amount_cents": amount}, seen),
                          capabilities=[cap])
            agent.tool_plain(name=tool_name)(lambda order_id, amount_cents: calls.append(amount_cents))
            with client.run(f"pai-run-{amount}"):
                if amount == 500:
                    await agent.run("refund")
                else:
                    with pytest.raises(idem.KeyReused):
                        await agent.run("refund")
        assert calls == [500]


async def test_an_irreversible_tool_is_deferred_until_a_person_approves(server, api_key, tool_name):
    server.put_tool(tool_name, effect="irreversible")
    seen, calls = [], []
    async with AsyncIdem(server.base_url, api_key) as client:
        agent = refund_agent(client, server, tool_name, ARGS, seen, calls)
        with client.run("pai-approve"):
            paused = await agent.run("refund order o-1")
        assert isinstance(paused.output, DeferredToolRequests) and calls == []
        request = paused.output.approvals[0]
        operation_id = paused.output.metadata[request.tool_call_id]["idem_operation_id"]
        server.approve(operation_id)
        for _ in range(2):
            with client.run("pai-approve"):
                await agent.run(message_history=paused.all_messages(),
                                deferred_tool_results=DeferredToolResults(
                                    approvals={request.tool_call_id: True}))
        assert calls == ["o-1"] and server.effects(tool_name) == 1


async def test_a_rejection_reaches_the_model_with_the_reason(server, api_key, tool_name):
    server.put_tool(tool_name, effect="irreversible")
    seen, calls = [], []
    async with AsyncIdem(server.base_url, api_key) as client:
        agent = refund_agent(client, server, tool_name, ARGS, seen, calls)
        with client.run("pai-reject"):
            paused = await agent.run("refund order o-1")
        request = paused.output.approvals[0]
        server.reject(paused.output.metadata[request.tool_call_id]["idem_operation_id"],
                      "over the refund limit")
        with client.run("pai-reject"):
            await agent.run(message_history=paused.all_messages(),
                            deferred_tool_results=DeferredToolResults(
                                approvals={request.tool_call_id: True}))
        assert calls == [] and "over the refund limit" in seen[-1]
        assert "local-admin" in seen[-1]
