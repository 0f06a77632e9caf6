"""Presence and chat in one plain dataspace, written with ``during`` and ``on_message``.

Run it: ``.venv/bin/python examples/presence.py``. No network: one scheduler runs everything
(the sans-IO core), so the output is deterministic.

* a *room* actor reacts to ``<present name>`` assertions with ``during`` (a facet per present
  user, whose stop action runs when the user leaves) and to ``<speak name text>`` messages;
* users assert their presence, speak, and leave; one user crashes mid-turn, and the dataspace
  retracts everything that user held.
"""

from __future__ import annotations

from feds.actor import Ref, Scheduler, Turn
from feds.dataspace import Dataspace
from feds.reactive import during, on_message
from feds.values import record


def room(ds: Ref):
    def boot(turn: Turn) -> None:
        @during(turn, ds, "<present $who:string>")
        def arrived(turn: Turn, who: str) -> None:
            print(f"room: {who} arrived")
            turn.on_stop(lambda turn: print(f"room: {who} left"))

        @on_message(turn, ds, "<speak $who $text>")
        def spoke(turn: Turn, who: str, text: str) -> None:
            print(f"room: {who} says {text!r}")

    return boot


def user(ds: Ref, name: str, lines: list[str]):
    def boot(turn: Turn) -> None:
        turn.publish(ds, record("present", name))
        for line in lines:
            turn.message(ds, record("speak", name, line))

    return boot


def main() -> None:
    scheduler = Scheduler()
    holder: list[Ref] = []
    scheduler.spawn(lambda t: holder.append(t.ref(Dataspace())), name="dataspace")
    scheduler.run_until_idle()
    ds = holder[0]
    scheduler.spawn(room(ds), name="room")
    scheduler.run_until_idle()

    alice = scheduler.spawn(user(ds, "Alice", ["hello"]), name="alice")
    scheduler.spawn(user(ds, "Bob", ["hi Alice"]), name="bob")
    scheduler.run_until_idle()

    def crash(turn: Turn) -> None:
        turn.message(ds, record("speak", "Alice", "this is never delivered"))
        raise RuntimeError("Alice's program failed")

    print("-- Alice's next turn raises: none of its effects happen, her presence is retracted")
    scheduler.enqueue(alice, alice.root, crash)
    scheduler.run_until_idle()


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.CRITICAL)
    main()
