"""The install rule of background compaction, as plain functions (no event loop)."""

from __future__ import annotations

import hypothesis.strategies as st
import relay
from hypothesis import given
from relay import compaction as c
from relay.lowlevel import Snapshot

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
    assert c.still_current(snapshot(history), history + since, "w1")


@given(history=histories, since=histories)
def test_another_window_is_never_current(
    history: list[relay.ResponseItem], since: list[relay.ResponseItem]
) -> None:
    assert not c.still_current(snapshot(history), history + since, "w2")


@given(history=histories.filter(bool), since=histories, data=st.data())
def test_a_changed_prefix_is_never_current(
    history: list[relay.ResponseItem], since: list[relay.ResponseItem], data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(history) - 1))
    other = data.draw(items.filter(lambda item: item != history[index]))
    changed = [*history[:index], other, *history[index + 1 :]]
    assert not c.still_current(snapshot(history), changed + since, "w1")


@given(history=histories.filter(bool), cut=st.integers(1, 8))
def test_a_shorter_history_is_never_current(history: list[relay.ResponseItem], cut: int) -> None:
    assert not c.still_current(snapshot(history), history[: max(0, len(history) - cut)], "w1")


@given(history=histories, since=histories, compacted=histories, initial=histories)
def test_an_install_keeps_everything_since_the_snapshot_once(
    history: list[relay.ResponseItem],
    since: list[relay.ResponseItem],
    compacted: list[relay.ResponseItem],
    initial: list[relay.ResponseItem],
) -> None:
    installed = c.installed_history(compacted, initial, snapshot(history), history + since)
    assert installed == compacted + initial + since
    assert installed[len(installed) - len(since) :] == since


def test_background_due() -> None:
    assert c.background_due(60, 600, 1000)
    assert not c.background_due(60, 599, 1000)
    assert not c.background_due(0, 10_000, 1000)
    assert not c.background_due(60, 10_000, None)
