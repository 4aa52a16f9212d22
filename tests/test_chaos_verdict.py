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


def test_only_the_last_item_may_repeat() -> None:
    life = _consumer([("R", ["a", "1"], 1.0), ("R", ["b", "1"], 11.0)], killed_at=11.4)
    assert set(allowed_default_duplicates([life], [(0.9, 11.2)])) == {"b"}


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
