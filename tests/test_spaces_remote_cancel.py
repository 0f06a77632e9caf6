"""A blocking RemoteSpace.get cancelled from outside never loses a tuple (against a feds gate)."""

from __future__ import annotations

import pytest
import trio

from feds.spaces import Formal, RemoteSpace, SequentialSpace, SpaceRepository

ROUNDS = 8
TUPLES = 30


async def one_round(mode: str) -> tuple[list[tuple], list[tuple]]:
    """Getters cancelled after 0..4 ms while a producer puts; returns (received, left)."""
    async with SpaceRepository() as repo:
        space = repo.add("seq", SequentialSpace())
        gate = await repo.add_gate(f"tcp://127.0.0.1:0/?{mode}")
        received: list[tuple] = []
        done = trio.Event()

        scopes: list[trio.CancelScope] = []

        async def getter(k: int) -> None:
            async with RemoteSpace(gate.space_uri("seq")) as remote:
                while not done.is_set():
                    with trio.move_on_after(0.001 * (k % 5)) as scope:
                        scopes.append(scope)
                        received.append(await remote.get("job", Formal(int)))
                    scopes.remove(scope)
                    k += 1

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for k in range(6):
                    nursery.start_soon(getter, k)
                async with RemoteSpace(gate.space_uri("seq")) as producer:
                    for n in range(TUPLES):
                        await producer.put("job", n)
                        if n % 2:  # cancel the getters as the put wakes one of them
                            for scope in scopes:
                                scope.cancel()
                        await trio.sleep(0.002)
                    with trio.move_on_after(5):  # let the getters take what they can
                        while len(received) + len(space.queryAll("job", Formal(int))) < TUPLES:
                            await trio.sleep(0.01)
                done.set()
                nursery.cancel_scope.cancel()  # getters still blocked withdraw their gets
            async with RemoteSpace(gate.space_uri("seq")) as drain:
                left = await drain.getAll("job", Formal(int))
        return received, left


@pytest.mark.parametrize("mode", ["keep", "conn"])
async def test_cancelled_remote_gets_never_lose_or_duplicate_a_tuple(mode) -> None:
    for _ in range(ROUNDS):
        received, left = await one_round(mode)
        assert sorted(received + left) == [("job", n) for n in range(TUPLES)]
