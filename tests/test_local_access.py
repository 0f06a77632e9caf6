"""Local access's observation tokens (protocols with ``per_observation``): one per distinct
Observe while a copy of it is asserted, given back when the last copy goes."""

from __future__ import annotations

from feds.actor import Entity, Handle, Ref, Scheduler, TurnAction
from feds.dataspace import observe
from feds.node import LocalAccess, Node
from feds.pattern_forms import bind, rec_group
from feds.values import Record, Symbol


def test_an_observation_token_lives_while_a_copy_of_its_observe_is_asserted() -> None:
    scheduler = Scheduler()
    node = Node(scheduler, "n", "observer-flood")
    scheduler.run_until_idle()
    access: LocalAccess = node.access.entity  # type: ignore[assignment]
    handles: list[Handle] = []

    def act(action: TurnAction) -> None:
        scheduler.enqueue(app.actor, app, action)
        scheduler.run_until_idle()

    observers: list[Ref] = []
    app = scheduler.spawn(lambda t: observers.append(t.ref(Entity())), name="app").root
    scheduler.run_until_idle()
    wanted = observe(rec_group(Symbol("x"), [bind()]), observers[0])
    plain = Record(Symbol("x"), (1,))

    act(lambda t: handles.extend(t.publish(node.access, v) for v in (wanted, wanted, plain)))
    first_token, copies = access.tokens[wanted]
    assert copies == 2 and len(access.tokens) == 1
    act(lambda t: t.retract(handles[2]))  # a plain assertion has no token to give back
    assert access.tokens[wanted] == (first_token, 2)
    act(lambda t: t.retract(handles[0]))
    assert access.tokens[wanted] == (first_token, 1)
    act(lambda t: t.retract(handles[1]))
    assert access.tokens == {} and access.handles == {}
    act(lambda t: handles.append(t.publish(node.access, wanted)))
    assert access.tokens[wanted][0] is not first_token  # a new observation, a new token
