"""A Pydantic AI refund agent guarded by idem. Run: python examples/python/refund_pydantic_ai.py

A scripted model by default (no network); with OPENAI_API_KEY set, gpt-4o-mini.
Needs: pip install './clients/python[pydantic-ai]' and `make build` (or IDEM_URL/IDEM_API_KEY).
"""

import asyncio
import os

from _setup import TOOL, setup, step
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from idem import AsyncIdem
from idem.pydantic_ai import idem_capability


def scripted_model(messages, info):
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(f"Done: {returns[-1].content}")])
    return ModelResponse(parts=[ToolCallPart(TOOL, {"order_id": "1234", "amount_cents": 500})])


async def main() -> None:
    model = "openai:gpt-4o-mini" if os.environ.get("OPENAI_API_KEY") else FunctionModel(scripted_model)
    with setup() as env:
        async with AsyncIdem(env.base_url, env.api_key) as idem:
            agent = Agent(model, output_type=[str, DeferredToolRequests],
                          capabilities=[idem_capability(idem)])
            agent.tool_plain(name=TOOL)(env.refund)
            ask = "Refund 500 cents for order 1234."

            step("run-42: the agent asks for the refund; idem holds it for a person")
            with idem.run("run-42"):
                paused = await agent.run(ask)
            assert isinstance(paused.output, DeferredToolRequests)
            env.approve_pending()
            approvals = {call.tool_call_id: True for call in paused.output.approvals}

            step("run-42 resumes: approved, the refund runs once")
            with idem.run("run-42"):
                done = await agent.run(message_history=paused.all_messages(),
                                       deferred_tool_results=DeferredToolResults(approvals=approvals))
            print(f"    the agent said: {done.output}")

            step("run-42 again (a crash and a retry): nothing is refunded twice")
            with idem.run("run-42"):
                again = await agent.run(message_history=paused.all_messages(),
                                        deferred_tool_results=DeferredToolResults(approvals=approvals))
            print(f"    the agent said: {again.output}")
            print(f"\nrefunds at the provider: {env.effects()}")


if __name__ == "__main__":
    asyncio.run(main())
