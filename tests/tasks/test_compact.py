"""Compaction's pure functions: budgets, truncation, placement, selection (docs/compaction.md)."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given

import relay
from relay import lowlevel as ll
from relay._base._config import BUILTIN_PROVIDERS, Config, Features, ProviderConfig
from relay._base._tokens import approx_tokens
from relay._core._summary import (
    NO_SUMMARY,
    is_summary,
    keep_recent_user_messages,
    real_user_messages,
    summary_prefix,
)
from relay.tasks import compaction as cb
from relay.tasks.compaction._history import (
    TRUNCATED_OUTPUT_NOTE,
    drop_oldest,
    filter_remote_output,
    fit_to_window,
    keep_recent_messages,
)


def user(text: str, **metadata: object) -> relay.Message:
    return relay.user_message(text, metadata=metadata or None)


def test_build_token_limited_compacted_history_truncates_overlong_user_messages() -> None:
    overlong = "x" * 400  # 100 tokens
    history = relay.lowlevel.build_compacted_history([user(overlong)], "the summary", budget=16)
    assert len(history) == 2
    first, last = history
    assert isinstance(first, relay.Message)
    assert "tokens truncated" in first.text() and overlong not in first.text()
    assert isinstance(last, relay.Message) and last.text() == relay.lowlevel.summary_text(
        "the summary"
    )


def test_build_compacted_history_preserves_user_message_metadata() -> None:
    messages = [user("one", source="cli"), user("two", source="api", n=2)]
    history = relay.lowlevel.build_compacted_history(messages, "sum")
    assert [m.metadata for m in history if isinstance(m, relay.Message)] == [
        {"source": "cli"},
        {"source": "api", "n": 2},
        None,
    ]


def test_keep_recent_walks_newest_first_and_stops_after_truncating() -> None:
    messages = [user("a" * 40), user("b" * 40), user("c" * 40)]  # 10 tokens each
    kept = keep_recent_user_messages(messages, 25)
    texts = [m.text() for m in kept]
    assert texts[1:] == ["b" * 40, "c" * 40]
    assert texts[0].startswith("aaaaaaaaaa") and "…5 tokens truncated…" in texts[0]


def test_summary_text_and_empty_summary() -> None:
    assert relay.lowlevel.summary_text("") == f"{summary_prefix()}\n{NO_SUMMARY}"
    assert is_summary(user(relay.lowlevel.summary_text("x")))
    assert not is_summary(user(summary_prefix()))  # the prefix alone, no newline


def test_real_user_messages_exclude_context_markers_and_summaries() -> None:
    items: list[relay.ResponseItem] = [
        user("<environment_context>\n</environment_context>"),
        user("real one"),
        user(relay.lowlevel.summary_text("old summary")),
        relay.assistant_message("answer"),
        user("<turn_aborted>\nstop\n</turn_aborted>"),
        user("real two"),
        relay.Message("developer", [relay.InputText("dev")]),
    ]
    assert [m.text() for m in real_user_messages(items)] == ["real one", "real two"]


messages_st = st.lists(st.builds(lambda text: user(text), st.text(max_size=200)), max_size=12)


@given(messages=messages_st, budget=st.integers(min_value=0, max_value=150))
def test_kept_messages_are_a_suffix_within_budget(
    messages: list[relay.Message], budget: int
) -> None:
    kept = keep_recent_user_messages(messages, budget)
    n = len(kept)
    assert n <= len(messages)
    originals = messages[len(messages) - n :] if n else []
    # Order is kept and every kept message is the original, except maybe the oldest one.
    for index, (k, o) in enumerate(zip(kept, originals, strict=True)):
        if index == 0 and k.text() != o.text():
            assert "tokens truncated…" in k.text()
        else:
            assert k.text() == o.text()
    marker_allowance = approx_tokens("…9999999 tokens truncated…")
    assert sum(approx_tokens(k.text()) for k in kept) <= budget + marker_allowance


def test_v2_retention_budget_three_keeps_truncated_middle_and_new() -> None:
    messages = [user("old-old"), user("middle1234"), user("new")]
    kept = keep_recent_messages(messages, 3)
    texts = [m.text() for m in kept]
    assert texts[1] == "new"
    # Truncated to the 2 tokens left (8 bytes), head and tail as docs/compaction.md truncates.
    assert texts[0] == "midd…1 tokens truncated…1234"
    assert len(kept) == 2


@pytest.mark.parametrize(("budget", "kept"), [(1, 1), (2, 2)])
def test_v2_image_only_message_costs_one(budget: int, kept: int) -> None:
    image = relay.Message("user", [relay.InputImage("data:image/png;base64,AAAA")])
    result = keep_recent_messages([image, user("abcd")], budget)
    assert len(result) == kept
    if kept == 2:
        assert result[0] == image


def test_place_initial_context_rules() -> None:
    env = user("<environment_context>\n</environment_context>")
    summary = user(relay.lowlevel.summary_text("s"))
    real = user("question")
    comp = relay.Compaction("enc")
    before = ll.Injection.BEFORE_LAST_USER_MESSAGE
    assert cb.place_initial_context([real, summary], [env], before) == [env, real, summary]
    assert cb.place_initial_context([summary], [env], before) == [env, summary]
    assert cb.place_initial_context([comp], [env], before) == [env, comp]
    assert cb.place_initial_context([], [env], before) == [env]
    assert cb.place_initial_context([real, summary], [env], ll.Injection.DO_NOT_INJECT) == [
        real,
        summary,
    ]


def test_drop_oldest_takes_the_call_partner_along() -> None:
    call = relay.FunctionCall("f", "{}", "c1")
    out = relay.FunctionCallOutput("c1", "r")
    rest, n = drop_oldest([call, user("u"), out, user("v")])
    assert n == 2 and rest == [user("u"), user("v")]
    rest, n = drop_oldest([user("u"), call, out])
    assert n == 1 and rest == [call, out]


@pytest.mark.parametrize(
    ("token_budget", "v2_feature", "capability", "expected"),
    [
        (tb, v2, cap, exp)
        for tb in (False, True)
        for v2 in (False, True)
        for cap, exp in (("unsupported", "local"), ("v1", "remote_v1"), ("v2", None))
        for exp in [exp if exp else ("remote_v2" if v2 else "remote_v1")]
    ],
)
def test_select_backend_over_every_combination(
    token_budget: bool, v2_feature: bool, capability: str, expected: str
) -> None:
    config = Config(features=Features(token_budget=token_budget, remote_compaction_v2=v2_feature))
    provider = ProviderConfig(name="p", remote_compaction=capability)  # type: ignore[arg-type]
    want = "token_budget" if token_budget else expected
    assert cb.select_backend(config, provider).value == want


def test_builtin_providers_select_their_backends() -> None:
    assert cb.select_backend(Config(), BUILTIN_PROVIDERS["openai"]) is cb.Backend.REMOTE_V1
    assert cb.select_backend(Config(), BUILTIN_PROVIDERS["ollama"]) is cb.Backend.LOCAL
    v2 = Config(features=Features(remote_compaction_v2=True))
    assert cb.select_backend(v2, BUILTIN_PROVIDERS["ollama"]) is cb.Backend.LOCAL


def test_compaction_prompt_choice(tmp_path: object) -> None:
    from pathlib import Path

    default = relay.lowlevel.compaction_prompt(Config())
    assert default.startswith("Pause here: your context is about to be replaced")
    assert relay.lowlevel.compaction_prompt(Config(compact_prompt="  Mine.  ")) == "Mine."
    assert relay.lowlevel.compaction_prompt(Config(compact_prompt="   ")) == default
    file = Path(str(tmp_path)) / "prompt.md"
    file.write_text("From a file.\n")
    assert relay.lowlevel.compaction_prompt(Config(experimental_compact_prompt_file=str(file))) == (
        "From a file."
    )
    assert (
        relay.lowlevel.compaction_prompt(
            Config(compact_prompt="Mine.", experimental_compact_prompt_file=str(file))
        )
        == "Mine."
    )
    assert (
        relay.lowlevel.compaction_prompt(Config(), "Focus on tests.")
        == default + "\n\nFocus on tests."
    )
    with pytest.raises(relay.ConfigError, match="experimental_compact_prompt_file"):
        relay.lowlevel.compaction_prompt(
            Config(experimental_compact_prompt_file=str(file) + ".missing")
        )


def test_fit_to_window_rewrites_trailing_tool_outputs_only() -> None:
    big = "z" * 4000
    items: list[relay.ResponseItem] = [
        relay.FunctionCall("f", "{}", "c0"),
        relay.FunctionCallOutput("c0", big),
        user("question"),
        relay.FunctionCall("f", "{}", "c1"),
        relay.FunctionCallOutput("c1", big),
        relay.FunctionCall("f", "{}", "c2"),
        relay.FunctionCallOutput("c2", big),
    ]
    fitted = fit_to_window(items, "instr", 600)
    outputs = [i.output for i in fitted if isinstance(i, relay.FunctionCallOutput)]
    # The walk stops at the call c2 (not an output), so only the last output is rewritten.
    assert outputs == [big, big, TRUNCATED_OUTPUT_NOTE]
    assert fit_to_window(items, "instr", None) == items
    assert fit_to_window(items, "instr", 10**6) == items


def test_filter_remote_output() -> None:
    items: list[relay.ResponseItem] = [
        relay.Message("developer", [relay.InputText("d")]),
        relay.Message("system", [relay.InputText("s")]),
        user("<environment_context>\n</environment_context>"),
        user("real"),
        relay.assistant_message("answer"),
        relay.Reasoning("r1"),
        relay.FunctionCall("f", "{}", "c"),
        relay.FunctionCallOutput("c", "o"),
        relay.Compaction("enc"),
        relay.Other({"type": "mystery"}),
    ]
    assert filter_remote_output(items) == [
        user("real"),
        relay.assistant_message("answer"),
        relay.Compaction("enc"),
    ]
