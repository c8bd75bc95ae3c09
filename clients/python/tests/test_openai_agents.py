"""The OpenAI Agents SDK's real Runner, a scripted model, a real idem and sandbox provider."""

import json

import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.exceptions import UserError
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

import idem
from idem import AsyncIdem
from idem.openai_agents import idem_function_tool


set_tracing_disabled(True)


class ScriptedModel(Model):
    """Calls the tool once with `args`, then answers with the tool's output (no network)."""

    def __init__(self, tool: str, args: dict, seen: list) -> None:
        self.tool, self.args, self.seen = tool, args, seen

    async def get_response(self, system_instructions, input, *rest, **kw):
        outputs = [i for i in (input if isinstance(input, list) else [])
                   if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if outputs:
            self.seen.append(outputs[-1]["output"])
            text = ResponseOutputText(type="output_text", text=str(outputs[-1]["output"]), annotations=[])
            item = ResponseOutputMessage(id="m1", type="message", role="assistant", status="completed", content=[text])
        else:
            item = ResponseFunctionToolCall(type="function_call", call_id="call-" + self.tool,
                                            name=self.tool, arguments=json.dumps(self.args))
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


def refund_agent(client, server, tool, args, seen, calls, recorded=True, **guard):
    def refund(order_id: str, amount_cents: int) -> dict:
        calls.append(order_id)
        # The operation reaches the tool (none when idem is down and the guard fails open).
        assert (idem.provider_key() is not None) == recorded
        return server.act(tool, {"order_id": order_id, "cents": amount_cents})

    refund.__name__ = tool
    return Agent(name="support", model=ScriptedModel(tool, args, seen),
                 tools=[idem_function_tool(client, refund, **guard)])


ARGS = {"order_id": "o-1", "amount_cents": 500}


async def test_a_rerun_executes_once_and_the_model_reads_the_note(server, api_key, tool_name):
    seen, calls = [], []
    async with AsyncIdem(server.base_url, api_key) as client:
        agent = refund_agent(client, server, tool_name, ARGS, seen, calls)
        for _ in range(2):
            with client.run("oa-run-1"):
                await Runner.run(agent, "refund order o-1")
    assert calls == ["o-1"] and server.effects(tool_name) == 1
    assert "no new action taken" in seen[1]


async def test_a_reused_key_with_other_arguments_is_refused(server, api_key, tool_name):
    seen, calls = [], []
    key = lambda order_id, **_: f"refund:{order_id}"  # noqa: E731
    async with AsyncIdem(server.base_url, api_key) as client:
        first = refund_agent(client, server, tool_name, ARGS, seen, calls, key=key)
        other = refund_agent(client, server, tool_name, {"order_id": "o-1", "amount_cents": 9},
                             seen, calls, key=key)
        with client.run("oa-a"):
            await Runner.run(first, "refund")
        with client.run("oa-b"), pytest.raises(UserError) as refused:
            await Runner.run(other, "refund")
    assert isinstance(refused.value.__cause__, idem.KeyReused)
    assert calls == ["o-1"]


async def test_an_irreversible_tool_pauses_until_a_person_approves(server, api_key, tool_name):
    server.put_tool(tool_name, effect="irreversible")
    seen, calls = [], []
    async with AsyncIdem(server.base_url, api_key) as client:
        agent = refund_agent(client, server, tool_name, ARGS, seen, calls)
        with client.run("oa-approve"):
            paused = await Runner.run(agent, "refund order o-1")
        assert paused.interruptions and calls == []
        server.approve(server.waiting_for_approval(tool_name)[0])
        state = paused.to_state()
        state.approve(paused.interruptions[0])
        with client.run("oa-approve"):
            await Runner.run(agent, state)
        with client.run("oa-approve"):
            await Runner.run(agent, "refund order o-1")
    assert calls == ["o-1"] and server.effects(tool_name) == 1


async def test_a_rejection_reaches_the_model_with_the_reason(server, api_key, tool_name):
    server.put_tool(tool_name, effect="irreversible")
    seen, calls = [], []
    async with AsyncIdem(server.base_url, api_key) as client:
        agent = refund_agent(client, server, tool_name, ARGS, seen, calls)
        with client.run("oa-reject"):
            paused = await Runner.run(agent, "refund order o-1")
        server.reject(server.waiting_for_approval(tool_name)[0], "over the refund limit")
        state = paused.to_state()
        state.approve(paused.interruptions[0])
        with client.run("oa-reject"):
            await Runner.run(agent, state)
    assert calls == [] and "over the refund limit" in seen[-1] and "local-admin" in seen[-1]


async def test_fail_open_runs_the_tool_when_idem_is_down_and_fail_closed_does_not(server, tool_name):
    for policy, expected in (("fail_open", ["o-1"]), ("fail_closed", [])):
        seen, calls = [], []
        async with AsyncIdem("http://127.0.0.1:9", "k", timeout=1, on_unavailable=policy) as down:
            agent = refund_agent(down, server, tool_name, ARGS, seen, calls, recorded=False)
            with down.run("oa-run-down"):
                if expected:
                    await Runner.run(agent, "refund order o-1")
                else:
                    with pytest.raises(UserError) as refused:
                        await Runner.run(agent, "refund order o-1")
                    assert isinstance(refused.value.__cause__, idem.IdemUnavailable)
        assert calls == expected, policy
