"""The ready queue: two heaps answer exactly as one sorted list with the reserve's filter would.

The oracle is a plain list scanned for its minimum: the smallest live entry, a surplus
one only when surplus may take a slot.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rvguard.enforce.ready import ReadyQueue, rank

ops = st.lists(
    st.one_of(
        st.tuples(st.just("push"), st.integers(0, 2), st.booleans(), st.integers(-3, 3)),
        st.tuples(st.just("pop"), st.booleans()),
        st.tuples(st.just("kill"), st.integers(0, 50)),
        st.tuples(st.just("compact")),
    ),
    max_size=120,
)


@given(ops, st.booleans())
def test_pop_is_the_smallest_live_entry_surplus_only_when_allowed(
    program: list[tuple[object, ...]], fifo: bool
) -> None:
    dead: set[int] = set()
    queue: ReadyQueue[int] = ReadyQueue(lambda e: e not in dead)
    oracle: list[tuple[tuple[int, int, float, int], int, bool]] = []
    seq = 0
    for op in program:
        if op[0] == "push":
            _, tier, surplus, hint = op
            seq += 1
            key = rank(int(tier), bool(surplus), float(hint), seq, fifo=fifo)  # type: ignore[arg-type]
            queue.push(key, seq, surplus=bool(surplus))
            oracle.append((key, seq, bool(surplus)))
        elif op[0] == "pop":
            room = bool(op[1])
            allowed = [o for o in oracle if o[1] not in dead and (room or not o[2])]
            want = min(allowed)[1] if allowed else None
            assert queue.pop(surplus_room=room) == want
            oracle = [o for o in oracle if o[1] != want]
        elif op[0] == "kill":
            dead.add(int(op[1]))  # type: ignore[call-overload]
        else:
            queue.compact(sum(1 for o in oracle if o[1] not in dead))
        assert sorted(queue) == sorted(o[1] for o in oracle if o[1] not in dead)


def test_rank_orders_floor_before_surplus_within_a_tier_and_tier_first() -> None:
    assert rank(0, True, -9.0, 1) > rank(0, False, None, 2)  # floor first in its tier, hint or not
    assert rank(0, True, 5.0, 3) < rank(1, False, None, 1)  # a lower tier number first
    assert rank(1, True, -1.0, 9) < rank(1, True, 0.0, 2)  # the hint orders surplus
    assert rank(0, False, 7.0, 4) == (0, 0, 0.0, 4)  # the hint never orders floor work
    assert rank(3, True, -1.0, 5, fifo=True) == (0, 0, 0.0, 5)  # FIFO: arrival alone
