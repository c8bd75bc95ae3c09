"""An OpenAI Agents SDK refund agent guarded by idem. Run: python examples/python/refund_openai_agents.py

A scripted model by default (no network); with OPENAI_API_KEY set, the SDK's default model.
Needs: pip install './clients/python[openai-agents]' and `make build` (or IDEM_URL/IDEM_API_KEY).
"""

import asyncio
import json
import os

from _setup import TOOL, setup, step
from agents import Agent, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from idem import AsyncIdem
from idem.openai_agents import idem_function_tool


class ScriptedModel(Model):
    """Asks for the refund, then repeats what the tool answered."""

    async def get_response(self, system_instructions, input, *rest, **kw):
        outputs = [i for i in (input if isinstance(input, list) else [])
                   if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if outputs:
            text = ResponseOutputText(type="output_text", annotations=[],
                                      text=f"Done: {outputs[-1]['output']}")
            item = ResponseOutputMessage(id="m", type="message", role="assistant",
                                         status="completed", content=[text])
        else:
            item = ResponseFunctionToolCall(type="function_call", call_id="call-1", name=TOOL,
                                            arguments=json.dumps({"order_id": "1234", "amount_cents": 500}))
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


async def main() -> None:
    real = bool(os.environ.get("OPENAI_API_KEY"))
    set_tracing_disabled(not real)
    with setup() as env:
        async with AsyncIdem(env.base_url, env.api_key) as idem:

            def refund(order_id: str, amount_cents: int) -> dict:
                """Refund `amount_cents` of order `order_id` to the customer."""
                return env.refund(order_id, amount_cents)

            agent = Agent(name="support", instructions="Refund what the customer asks for.",
                          tools=[idem_function_tool(idem, refund)],
                          **({} if real else {"model": ScriptedModel()}))
            ask = "Refund 500 cents for order 1234."

            step("run-42: the agent asks for the refund; idem holds it for a person")
            with idem.run("run-42"):
                paused = await Runner.run(agent, ask)
            assert paused.interruptions
            env.approve_pending()
            state = paused.to_state()
            for item in paused.interruptions:
                state.approve(item)

            step("run-42 resumes from its RunState: approved, the refund runs once")
            with idem.run("run-42"):
                done = await Runner.run(agent, state)
            print(f"    the agent said: {done.final_output}")

            step("run-42 again (a crash and a retry): nothing is refunded twice")
            with idem.run("run-42"):
                again = await Runner.run(agent, ask)
            print(f"    the agent said: {again.final_output}")
            print(f"\nrefunds at the provider: {env.effects()}")


if __name__ == "__main__":
    asyncio.run(main())
