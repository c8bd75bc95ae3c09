"""A LangGraph (LangChain create_agent) refund agent guarded by idem.
Run: python examples/python/refund_langgraph.py

A scripted chat model by default (no network); with OPENAI_API_KEY set and langchain-openai
installed, gpt-4o-mini. Needs: pip install './clients/python[langgraph]' and `make build`.
"""

import os
from typing import Any

from _setup import TOOL, setup, step
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from idem import Idem
from idem.langgraph import IdemMiddleware


class ScriptedChatModel(BaseChatModel):
    """Asks for the refund, then repeats what the tool answered."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        returns = [m for m in messages if isinstance(m, ToolMessage)]
        if returns:
            message = AIMessage(content=f"Done: {returns[-1].content}")
        else:
            call = {"name": TOOL, "args": {"order_id": "1234", "amount_cents": 500},
                    "id": "call-1", "type": "tool_call"}
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])


def chat_model() -> BaseChatModel:
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from langchain_openai import ChatOpenAI
            return ChatOpenAI(model="gpt-4o-mini")
        except ImportError:
            print("(langchain-openai is not installed: using the scripted model)")
    return ScriptedChatModel()


def main() -> None:
    with setup() as env, Idem(env.base_url, env.api_key) as idem:

        @tool(TOOL)
        def refund(order_id: str, amount_cents: int) -> str:
            """Refund `amount_cents` of order `order_id` to the customer."""
            return str(env.refund(order_id, amount_cents))

        agent = create_agent(chat_model(), tools=[refund], middleware=[IdemMiddleware(idem)])
        ask = {"messages": [("user", "Refund 500 cents for order 1234.")]}

        def say(answer: dict) -> None:
            print(f"    the agent said: {answer['messages'][-1].content}")

        step("run-42: the agent asks for the refund; idem holds it for a person (no interrupt)")
        with idem.run("run-42"):
            say(agent.invoke(ask))
        env.approve_pending()

        step("run-42 runs again once approved: the refund runs once")
        with idem.run("run-42"):
            say(agent.invoke(ask))

        step("run-42 again (a crash and a retry): nothing is refunded twice")
        with idem.run("run-42"):
            say(agent.invoke(ask))
        print(f"\nrefunds at the provider: {env.effects()}")


if __name__ == "__main__":
    main()
