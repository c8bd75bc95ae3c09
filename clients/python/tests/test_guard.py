"""The guard against a real server and the sandbox provider: each side effect happens once."""

import asyncio
import threading
import time

import httpx
import pytest
import requests

import idem
from idem import AsyncIdem, Idem



@pytest.fixture
def client(server, api_key):
    with Idem(server.base_url, api_key, in_progress_wait=0) as client:
        yield client


def refund_tool(client, server, tool_name, **guard):
    calls = []

    @client.guard(tool_name, **guard)
    def refund(order_id: str, amount_cents: int) -> dict:
        calls.append(idem.current_operation())
        return server.act(tool_name, {"order_id": order_id, "cents": amount_cents})

    return refund, calls


def test_a_resumed_run_replays_each_step_without_acting_again(client, server, tool_name):
    refund, calls = refund_tool(client, server, tool_name)
    with client.run("run-1"):
        first = refund("o-1", 500)
        second = refund("o-2", 700)
    with client.run("run-1") as resumed:
        assert refund("o-1", 500) == first
        assert resumed.last.replayed and "no new action taken" in resumed.last.note
        assert refund("o-2", 700) == second
    assert len(calls) == 2 and server.effects(tool_name) == 2
    assert calls[0].key == idem.derived_key("run-1", 0, tool_name, {"order_id": "o-1", "amount_cents": 500})
    assert calls[1].step == 1


def test_with_note_returns_the_replay_note_alongside(client, server, tool_name):
    refund, _ = refund_tool(client, server, tool_name, with_note=True)
    with client.run("run-note"):
        fresh = refund("o-1", 1)
    with client.run("run-note"):
        replay = refund("o-1", 1)
    assert not fresh.replayed and fresh.note is None
    assert replay.replayed and replay.value == fresh.value and "already completed" in replay.note


def test_a_business_key_holds_across_runs_and_refuses_other_arguments(client, server, tool_name):
    refund, calls = refund_tool(client, server, tool_name, key=lambda order_id, **_: f"refund:{order_id}")
    with client.run("run-a"):
        refund("o-9", 500)
    with client.run("run-b", step=10):
        refund("o-9", 500)
        with pytest.raises(idem.KeyReused):
            refund("o-9", 999)
    assert len(calls) == 1 and server.effects(tool_name) == 1


class CardDeclined(Exception):
    pass


def test_a_permanent_failure_is_stored_and_replayed_as_the_same_exception(client, server, tool_name):
    calls = []

    @client.guard(tool_name, permanent=(CardDeclined,))
    def charge(card: str) -> None:
        calls.append(card)
        raise CardDeclined("insufficient funds")

    @client.guard(tool_name + "_b")
    def charge_b(card: str) -> None:
        calls.append(card)
        raise idem.PermanentFailure("card_declined", "insufficient funds")

    for _ in range(2):
        with client.run("run-p"), pytest.raises(CardDeclined, match="insufficient funds"):
            charge("c-1")
        with client.run("run-p", step=1), pytest.raises(idem.PermanentFailure) as failure:
            charge_b("c-1")
        assert failure.value.code == "card_declined"
    assert calls == ["c-1", "c-1"]


def test_an_ordinary_exception_is_retryable_and_runs_again(client, server, tool_name):
    attempts = []

    @client.guard(tool_name)
    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("provider said 503")
        return "ok"

    with client.run("run-r"), pytest.raises(RuntimeError):
        flaky()
    with client.run("run-r"):
        assert flaky() == "ok"
    with client.run("run-r"):
        assert flaky() == "ok"
    assert len(attempts) == 2


def test_a_timeout_reports_unknown_and_is_never_retried(client, server, tool_name):
    calls = []

    @client.guard(tool_name)
    def send(to: str) -> None:
        calls.append(to)
        raise TimeoutError("provider did not answer")

    with client.run("run-t"), pytest.raises(idem.OutcomeUnknown) as unknown:
        send("a@example.com")
    assert client.get(unknown.value.operation.id).status == "unknown"
    with client.run("run-t"), pytest.raises(idem.OutcomeUnknown):
        send("a@example.com")
    assert calls == ["a@example.com"]


def test_an_irreversible_tool_waits_for_a_person_and_runs_once(client, server, tool_name):
    server.put_tool(tool_name, effect="irreversible")
    refund, calls = refund_tool(client, server, tool_name)
    with client.run("run-ap"), pytest.raises(idem.AwaitingApproval) as waiting:
        refund("o-1", 100)
    assert calls == []
    server.approve(waiting.value.operation_id)
    with client.run("run-ap"):
        refund("o-1", 100)
    with client.run("run-ap"):
        refund("o-1", 100)
    assert len(calls) == 1 and server.effects(tool_name) == 1


def test_wait_blocks_until_the_person_decides(client, server, tool_name):
    server.put_tool(tool_name, effect="irreversible")
    refund, calls = refund_tool(client, server, tool_name, wait=20)

    def approve_when_asked():
        for _ in range(400):
            waiting = server.waiting_for_approval(tool_name)
            if waiting:
                server.approve(waiting[0])
                return
            time.sleep(0.05)

    approver = threading.Thread(target=approve_when_asked)
    approver.start()
    with client.run("run-w"):
        refund("o-1", 100)
    approver.join()
    assert len(calls) == 1


def test_a_rejection_carries_who_and_why(client, server, tool_name):
    server.put_tool(tool_name, effect="irreversible")
    refund, calls = refund_tool(client, server, tool_name)
    with client.run("run-rej"), pytest.raises(idem.AwaitingApproval) as waiting:
        refund("o-1", 100)
    server.reject(waiting.value.operation_id, "refund policy: over the limit")
    with client.run("run-rej"), pytest.raises(idem.Rejected) as rejected:
        refund("o-1", 100)
    assert rejected.value.reason == "refund policy: over the limit"
    assert rejected.value.decided_by == "local-admin"
    assert "over the limit" in str(rejected.value)
    assert calls == []


def test_in_progress_waits_for_the_other_caller_then_replays(server, api_key, tool_name):
    with Idem(server.base_url, api_key) as holder, Idem(
        server.base_url, api_key, in_progress_wait=20
    ) as client:
        claim = holder.claim(tool_name, {"n": 1}, key="busy")
        calls = []

        @client.guard(tool_name, key=lambda **_: "busy")
        def work(n: int) -> int:
            calls.append(n)
            return n

        timer = threading.Timer(0.3, lambda: holder.complete(claim.operation.id, claim.lease.token, 41))
        timer.start()
        assert work(1) == 41
        timer.join()
        assert calls == []

        @client.guard(tool_name, key=lambda **_: "busy2", in_progress_wait=0)
        def work2(n: int) -> int:
            return n

        holder.claim(tool_name, {"n": 2}, key="busy2")
        with pytest.raises(idem.InProgress):
            work2(2)


def test_fail_closed_refuses_to_act_and_fail_open_acts(tool_name):
    calls = []
    with Idem("http://127.0.0.1:9", "k", timeout=1) as down:
        @down.guard(tool_name)
        def closed() -> str:
            calls.append("closed")
            return "x"

        @down.guard(tool_name, on_unavailable="fail_open")
        def opened() -> str:
            calls.append("open")
            return "y"

        with down.run("run-down"):
            with pytest.raises(idem.IdemUnavailable):
                closed()
            assert opened() == "y"
    assert calls == ["open"]


def test_the_provider_key_is_available_inside_the_guarded_function(client, server, tool_name):
    seen = []

    @client.guard(tool_name)
    def pay(amount: int) -> dict:
        seen.append(idem.provider_key())
        return server.act(tool_name, {"amount": amount}, key=idem.provider_key())

    with client.run("run-pk"):
        pay(5)
    operation = client.get(client.claim(tool_name, {"amount": 5}, run_id="run-pk", step=0).operation.id)
    assert seen == [operation.provider_key or operation.key]
    assert idem.provider_key() is None


async def test_async_functions_are_guarded_alike(server, api_key, tool_name):
    calls = []
    async with AsyncIdem(server.base_url, api_key) as client:

        @client.guard(tool_name)
        async def notify(user: str) -> str:
            calls.append(idem.current_operation().step)
            await asyncio.sleep(0)
            return f"notified {user}"

        with client.run("run-async"):
            results = await asyncio.gather(notify("a"), notify("b"))
        with client.run("run-async"):
            again = await asyncio.gather(notify("a"), notify("b"))
    assert results == again == ["notified a", "notified b"]
    assert sorted(calls) == [0, 1]


async def test_the_sync_client_guards_async_functions_too(server, api_key, tool_name):
    calls = []
    with Idem(server.base_url, api_key) as client:

        @client.guard(tool_name)
        async def notify(user: str) -> str:
            calls.append(user)
            return user

        with client.run("run-mixed"):
            await notify("a")
        with client.run("run-mixed"):
            assert await notify("a") == "a"
    assert calls == ["a"]


def test_a_rate_limited_completion_waits_its_retry_after_and_is_recorded(limited_server, tool_name, caplog):
    calls = []
    with Idem(limited_server.base_url, limited_server.new_key()) as client:

        @client.guard(tool_name, with_note=True)
        def refund(order_id: str) -> dict:
            calls.append(order_id)
            return {"refunded": order_id}

        started = time.monotonic()
        with caplog.at_level("WARNING", logger="idem"), client.run("run-429"):
            # The claim takes the key's one request of this second: the completion right
            # after the refund is refused 429 with Retry-After: 1, and must not be lost.
            done = refund("o-1")
        assert time.monotonic() - started >= 0.9
        assert not done.replayed and done.operation.status == "succeeded"
        assert "again in 1.0 s" in caplog.text
        time.sleep(1)
        with client.run("run-429"):
            again = refund("o-1")
    assert again.replayed and again.value == {"refunded": "o-1"}
    assert calls == ["o-1"]


def _provider_call(server, tool_name, library):
    """A guarded refund that calls the sandbox provider with `library`, without giving it an
    idempotency key (so a second call would be a second refund), timing out after 0.5 s."""
    def call(order_id: str) -> dict:
        url = f"{server.sandbox_url}/actions/{tool_name}"
        if library == "httpx":
            return httpx.post(url, json={"order_id": order_id}, timeout=0.5).json()
        return requests.post(url, json={"order_id": order_id}, timeout=0.5).json()

    return call


@pytest.mark.parametrize("library, fault, raised", [
    ("httpx", "delay_after_commit", httpx.ReadTimeout),
    ("httpx", "drop_after_commit", httpx.RemoteProtocolError),
    ("requests", "delay_after_commit", requests.exceptions.ReadTimeout),
    ("requests", "drop_after_commit", requests.exceptions.ConnectionError),
])
def test_a_provider_transport_error_is_unknown_and_never_retried(
    client, server, tool_name, library, fault, raised,
):
    # The provider commits the refund, then answers too late or hangs up: nobody can tell.
    server.fault(fault, action=tool_name, **({"delay_ms": 2000} if "delay" in fault else {}))
    call, calls = _provider_call(server, tool_name, library), []

    @client.guard(tool_name)
    def refund(order_id: str) -> dict:
        calls.append(order_id)
        return call(order_id)

    with client.run("run-transport"), pytest.raises(idem.OutcomeUnknown) as unknown:
        refund("o-1")
    assert isinstance(unknown.value.__cause__, raised)
    assert client.get(unknown.value.operation.id).status == "unknown"
    with client.run("run-transport"), pytest.raises(idem.OutcomeUnknown):
        refund("o-1")
    assert calls == ["o-1"] and server.effects(tool_name) == 1


async def test_a_cancelled_call_is_unknown_and_never_retried(server, api_key, tool_name):
    calls, started = [], asyncio.Event()
    async with AsyncIdem(server.base_url, api_key) as client:

        @client.guard(tool_name)
        async def send(to: str) -> str:
            calls.append(to)
            started.set()
            await asyncio.sleep(30)
            return to

        with client.run("run-cancel"):
            task = asyncio.create_task(send("a@example.com"))
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        with client.run("run-cancel"), pytest.raises(idem.OutcomeUnknown) as unknown:
            await send("a@example.com")
    assert unknown.value.operation.status == "unknown"
    assert unknown.value.operation.error["code"] == "CancelledError"
    assert calls == ["a@example.com"]


def test_fail_open_logs_loudly_that_it_acts_unrecorded(tool_name, caplog):
    with Idem("http://127.0.0.1:9", "k", timeout=1, on_unavailable="fail_open") as down:

        @down.guard(tool_name)
        def act() -> str:
            return "done"

        with caplog.at_level("ERROR", logger="idem"), down.run("run-log"):
            assert act() == "done"
    assert f"running {tool_name} UNRECORDED (fail_open)" in caplog.text


async def test_an_async_guard_with_wait_blocks_until_the_person_decides(server, api_key, tool_name):
    server.put_tool(tool_name, effect="irreversible")
    calls = []
    async with AsyncIdem(server.base_url, api_key) as client:

        @client.guard(tool_name, wait=20)
        async def wire(cents: int) -> int:
            calls.append(cents)
            return cents

        async def approve_when_asked() -> None:
            while not (waiting := server.waiting_for_approval(tool_name)):
                await asyncio.sleep(0.05)
            server.approve(waiting[0])

        approver = asyncio.create_task(approve_when_asked())
        with client.run("run-async-wait"):
            assert await asyncio.wait_for(wire(100), 30) == 100
        await approver
    assert calls == [100]
