"""The install rule of background compaction, as plain functions (no event loop)."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given

import relay
from relay.lowlevel import Snapshot
from relay.tasks.compaction._background import installed_history, still_current

texts = st.text(alphabet="abc", min_size=1, max_size=3)
items = st.builds(
    lambda role, text: relay.Message(role=role, content=(relay.InputText(text),)),
    st.sampled_from(["user", "assistant"]),
    texts,
)
histories = st.lists(items, max_size=8)


def snapshot(history: list[relay.ResponseItem], window: str = "w1") -> Snapshot:
    return Snapshot(tuple(history), window, 0.0)


@given(history=histories, since=histories)
def test_a_history_that_only_grew_is_current(
    history: list[relay.ResponseItem], since: list[relay.ResponseItem]
) -> None:
    assert still_current(snapshot(history), history + since, "w1")


@given(history=histories, since=histories)
def test_another_window_is_never_current(
    history: list[relay.ResponseItem], since: list[relay.ResponseItem]
) -> None:
    assert not still_current(snapshot(history), history + since, "w2")


@given(history=histories.filter(bool), since=histories, data=st.data())
def test_a_changed_prefix_is_never_current(
    history: list[relay.ResponseItem], since: list[relay.ResponseItem], data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(history) - 1))
    other = data.draw(items.filter(lambda item: item != history[index]))
    changed = [*history[:index], other, *history[index + 1 :]]
    assert not still_current(snapshot(history), changed + since, "w1")


@given(history=histories.filter(bool), cut=st.integers(1, 8))
def test_a_shorter_history_is_never_current(history: list[relay.ResponseItem], cut: int) -> None:
    assert not still_current(snapshot(history), history[: max(0, len(history) - cut)], "w1")


@given(history=histories, since=histories, compacted=histories, initial=histories)
def test_an_install_keeps_everything_since_the_snapshot_once(
    history: list[relay.ResponseItem],
    since: list[relay.ResponseItem],
    compacted: list[relay.ResponseItem],
    initial: list[relay.ResponseItem],
) -> None:
    installed = installed_history(compacted, initial, snapshot(history), history + since)
    assert installed == compacted + initial + since
    assert installed[len(installed) - len(since) :] == since


def test_a_budget_reaches_a_share_of_a_limit() -> None:
    def usage(tokens: int) -> relay.lowlevel.TokenBudget:
        return relay.lowlevel.TokenBudget("m", window=2000, limit=1000, usage=tokens)

    assert usage(600).reached(60, 1000)
    assert not usage(599).reached(60, 1000)
    assert not usage(10_000).reached(0, 1000)
    assert not usage(10_000).reached(60, None)
    assert usage(1000).over_limit and not usage(999).over_limit
    assert usage(2001).over_window and not usage(2000).over_window
    assert not relay.lowlevel.TokenBudget("m", None, None, 10**9).over_limit
