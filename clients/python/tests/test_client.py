"""The low-level client against a real server: typed answers and one exception per error."""

import time

import pytest

import idem
from idem import AsyncIdem, Idem

ARGS = {"order_id": "1234", "amount_cents": 500}


def test_claim_complete_and_replay_with_a_derived_key(server, api_key, tool_name):
    with Idem(server.base_url, api_key) as client:
        first = client.claim(tool_name, ARGS, run_id="run-42", step=4)
        assert first.must_execute and first.status_code == 201
        assert first.operation.key == idem.derived_key("run-42", 4, tool_name, ARGS)
        assert first.operation.fingerprint == idem.fingerprint(tool_name, ARGS)
        done = client.complete(first.operation.id, first.lease.token, {"refund_id": "re_1"})
        assert done.status == "succeeded" and done.result == {"refund_id": "re_1"}
        again = client.claim(tool_name, {"amount_cents": 500.0, "order_id": "1234"},
                             run_id="run-42", step=4)
        assert again.replayed and not again.must_execute
        assert "no new action taken" in again.note
        assert again.operation.result == {"refund_id": "re_1"}
        assert client.get(first.operation.id).status == "succeeded"


def test_each_contract_error_has_its_exception(server, api_key, tool_name):
    with Idem(server.base_url, api_key) as client:
        first = client.claim(tool_name, ARGS, key="k-1")
        with pytest.raises(idem.InProgress) as in_progress:
            client.claim(tool_name, ARGS, key="k-1")
        assert in_progress.value.operation.id == first.operation.id
        assert in_progress.value.retry_after is not None
        with pytest.raises(idem.KeyReused) as reused:
            client.claim(tool_name, {"order_id": "9"}, key="k-1")
        assert reused.value.code == "idempotency_key_reused" and reused.value.status_code == 422
        client.unknown(first.operation.id, first.lease.token, "timeout", "no answer")
        with pytest.raises(idem.OutcomeUnknown):
            client.claim(tool_name, ARGS, key="k-1")
        with pytest.raises(idem.LeaseLost):
            client.complete(first.operation.id, "not-the-token", {})
        with pytest.raises(idem.BadRequest) as missing:
            client.claim(tool_name, ARGS)
        assert missing.value.code == "missing_idempotency_key"
    with Idem(server.base_url, "wrong-key") as stranger:
        with pytest.raises(idem.Unauthorized):
            stranger.claim(tool_name, ARGS, key="k-1")


def test_a_permanent_failure_is_replayed(server, api_key, tool_name):
    with Idem(server.base_url, api_key) as client:
        first = client.claim(tool_name, ARGS, key="k-fail")
        failed = client.fail(first.operation.id, first.lease.token, "card_declined", "declined")
        assert failed.status == "failed" and not failed.retryable
        again = client.claim(tool_name, ARGS, key="k-fail")
        assert again.replayed and again.operation.error["code"] == "card_declined"


def test_awaiting_approval_carries_the_operation_and_the_dashboard_link(server, api_key, tool_name):
    server.put_tool(tool_name, effect="irreversible")
    with Idem(server.base_url, api_key) as client:
        with pytest.raises(idem.AwaitingApproval) as waiting:
            client.claim(tool_name, ARGS, key="wire-1")
        op_id = waiting.value.operation_id
        assert waiting.value.dashboard_url == f"{server.base_url}/operations/{op_id}"
        server.approve(op_id)
        granted = client.wait(tool_name, ARGS, key="wire-1", seconds=5)
        assert granted.must_execute and granted.operation.id == op_id


def test_an_unreachable_server_is_idem_unavailable():
    with Idem("http://127.0.0.1:9", "k", timeout=2) as client:
        with pytest.raises(idem.IdemUnavailable):
            client.claim("refund", ARGS, key="k")


async def test_the_async_client_speaks_the_same_contract(server, api_key, tool_name):
    async with AsyncIdem(server.base_url, api_key) as client:
        first = await client.claim(tool_name, ARGS, key="a-1")
        assert first.must_execute
        done = await client.complete(first.operation.id, first.lease.token, 7)
        assert done.result == 7
        again = await client.claim(tool_name, ARGS, key="a-1")
        assert again.replayed and again.operation.result == 7
        with pytest.raises(idem.KeyReused):
            await client.claim(tool_name, {"x": 1}, key="a-1")


def test_invoke_lets_idem_call_the_executor(server, api_key, tool_name):
    server.put_tool(
        tool_name, effect="non_idempotent_write",
        executor={"url": f"{server.sandbox_url}/actions/{tool_name}", "timeout_ms": 5000},
    )
    with Idem(server.base_url, api_key) as client:
        first = client.invoke(tool_name, ARGS, key="inv-1")
        assert first.operation.status == "succeeded"
        again = client.invoke(tool_name, ARGS, key="inv-1")
        assert again.replayed
    assert server.effects(tool_name) == 1


def test_a_key_over_its_rate_limit_is_rate_limited_with_the_delay(limited_server, tool_name):
    calls = []
    with Idem(limited_server.base_url, limited_server.new_key()) as client:
        client.claim(tool_name, {"n": 1}, key="first")
        with pytest.raises(idem.RateLimited) as refused:
            client.claim(tool_name, {"n": 2}, key="second")
        assert refused.value.code == "too_many_requests" and refused.value.status_code == 429
        assert refused.value.retry_after == 1  # the server's Retry-After, in seconds

        @client.guard(tool_name)
        def act(n: int) -> int:
            calls.append(n)
            return n

        with client.run("run-limited"), pytest.raises(idem.RateLimited):
            act(3)
        time.sleep(refused.value.retry_after)  # waiting as told is served
        assert client.claim(tool_name, {"n": 2}, key="second").must_execute
    assert calls == [], "a rate-limited guard does not act"


async def test_the_async_client_is_rate_limited_alike(limited_server, tool_name):
    async with AsyncIdem(limited_server.base_url, limited_server.new_key()) as client:
        await client.claim(tool_name, {"n": 1}, key="first")
        with pytest.raises(idem.RateLimited) as refused:
            await client.claim(tool_name, {"n": 2}, key="second")
        assert refused.value.retry_after == 1


async def test_the_async_client_has_every_method(server, api_key, tool_name):
    held, plain, executed = tool_name, tool_name + "_plain", tool_name + "_exec"
    server.put_tool(held, effect="irreversible")
    server.put_tool(
        executed, effect="non_idempotent_write",
        executor={"url": f"{server.sandbox_url}/actions/{executed}", "timeout_ms": 5000},
    )
    async with AsyncIdem(server.base_url, api_key) as client:
        with pytest.raises(idem.AwaitingApproval) as waiting:
            await client.claim(held, ARGS, key="h-1")
        assert waiting.value.dashboard_url == f"{server.base_url}/operations/{waiting.value.operation_id}"
        server.approve(waiting.value.operation_id)
        granted = await client.wait(held, ARGS, key="h-1", seconds=5)
        assert granted.must_execute and granted.operation.id == waiting.value.operation_id

        first = await client.claim(plain, ARGS, key="p-1")
        with pytest.raises(idem.InProgress) as busy:
            await client.claim(plain, ARGS, key="p-1")
        assert busy.value.retry_after is not None
        failed = await client.fail(first.operation.id, first.lease.token, "card_declined", "no")
        assert failed.status == "failed" and not failed.retryable
        replay = await client.claim(plain, ARGS, key="p-1")
        assert replay.replayed and replay.operation.error["code"] == "card_declined"

        second = await client.claim(plain, ARGS, key="p-2")
        await client.unknown(second.operation.id, second.lease.token, "timeout", "no answer")
        assert (await client.get(second.operation.id)).status == "unknown"
        with pytest.raises(idem.OutcomeUnknown) as unknown:
            await client.claim(plain, ARGS, key="p-2")
        assert unknown.value.operation.id == second.operation.id

        invoked = await client.invoke(executed, ARGS, key="e-1")
        assert invoked.operation.status == "succeeded"
        assert (await client.invoke(executed, ARGS, key="e-1")).replayed
        assert (await client.get_tool(held))["effect"] == "irreversible"
    assert server.effects(executed) == 1
