"""The chaos soak's verdict on default-mode duplicates (tests/chaos_helpers.py): it accepts
exactly the documented case and flags every other."""

from __future__ import annotations

from .chaos_helpers import IN_GET, Life, allowed_default_duplicates, allowed_default_losses


def _consumer(records: list[tuple[str, list[str], float]], killed_at: float | None) -> Life:
    life = Life("C0", 1, 4242, "/nonexistent", killed=killed_at is not None, killed_at=killed_at or 0.0)
    life.records = records
    return life


def test_a_killed_consumers_last_item_may_repeat_after_a_connection_break() -> None:
    life = _consumer([("R", ["a", "1"], 10.0), ("D", ["a"], 10.1), ("R", ["b", "1"], 11.0)], killed_at=11.4)
    assert set(allowed_default_duplicates([life], [(11.1, 11.2)])) == {"b"}


def test_no_break_no_repeat() -> None:
    life = _consumer([("R", ["b", "1"], 11.0)], killed_at=11.4)
    assert allowed_default_duplicates([life], []) == {}
    assert allowed_default_duplicates([life], [(2.0, 3.0), (20.0, 21.0)]) == {}


def test_a_consumer_that_was_not_killed_never_repeats() -> None:
    life = _consumer([("R", ["b", "1"], 11.0)], killed_at=None)
    assert allowed_default_duplicates([life], [(11.1, 11.2)]) == {}


def test_an_item_the_consumer_got_past_within_its_lease_does_not_repeat() -> None:
    """Its next get (within the lease) dropped what the first left in flight: only the last
    item of a killed consumer may repeat."""
    life = _consumer([("R", ["a", "1"], 1.0), ("R", ["b", "1"], 1.5)], killed_at=1.8)
    assert set(allowed_default_duplicates([life], [(0.9, 1.2)], lease=2.0)) == {"b"}


def test_an_item_may_repeat_when_a_break_kept_its_consumer_from_a_get_past_its_lease() -> None:
    """Redis down longer than the lease right after a receipt: the DEL went with the broken
    connection, and the entry aged past the lease before the consumer's next get could drop
    it, so a sweep requeued it; the consumer lives on (docs: reliability.md, Guarantees: "... or makes no further get
    within its lease"). Without a break, or with the next get in time, it may not."""
    life = _consumer([("R", ["a", "1"], 1.0), ("R", ["a", "2"], 3.6), ("R", ["c", "1"], 3.7)], killed_at=None)
    assert set(allowed_default_duplicates([life], [(1.05, 3.5)], lease=2.0)) == {"a"}
    assert allowed_default_duplicates([life], [], lease=2.0) == {}
    assert allowed_default_duplicates([life], [(1.05, 3.5)], lease=3.0) == {}


def test_an_item_in_hand_inside_get_whose_drop_left_with_the_process_may_be_lost() -> None:
    """Loaded inside get(), in its lists when the process was stopped, gone just after the
    kill: its DEL had been posted (get() was returning it). Still there after the kill: it
    is requeued, so losing it is not allowed."""
    life = _consumer([("L", ["a"], 10.0), ("L", ["b"], 10.1)], killed_at=10.2)
    life.phase_at_kill = IN_GET
    life.held_at_kill = ["a", "b"]
    life.held_after_kill = ["b"]
    assert set(allowed_default_losses([life], "processing")) == {"a"}
    life.held_after_kill = ["a", "b"]
    assert allowed_default_losses([life], "processing") == {}
