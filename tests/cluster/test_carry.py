"""Which modules of a run's own tasks go to the hosts, and how the hosts name them: a plain
function of where this Python finds each module. No Ray."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import relay
from relay._cluster._tasks import Carried, Origin, carry, origin, task_options


def found(**where: Origin) -> dict[str, Origin]:
    return where


def test_a_file_is_carried_itself_and_the_hosts_import_it_by_its_name(tmp_path: Path) -> None:
    made = carry({"whisper": "extra/whisper.py:whisper"}, cwd=tmp_path, locate=lambda _: None)
    assert made == Carried({"whisper": "whisper:whisper"}, (str(tmp_path / "extra/whisper.py"),))
    assert made.runtime_env() == {"py_modules": [str(tmp_path / "extra/whisper.py")]}


def test_a_package_of_the_working_directory_is_carried_whole_and_keeps_its_name() -> None:
    where = found(shoutpkg=Origin("/work/shoutpkg", installed=False))
    made = carry({"shout": "shoutpkg.tasks:shout", "yell": "shoutpkg.more:yell"}, locate=where.get)
    assert made.tasks == {"shout": "shoutpkg.tasks:shout", "yell": "shoutpkg.more:yell"}
    assert made.modules == ("/work/shoutpkg",)


def test_an_installed_package_and_relay_itself_are_not_carried() -> None:
    where = found(review_bot=Origin("/venv/site-packages/review_bot", installed=True))
    made = carry(
        {"review": "review_bot.tasks:review", "again": "relay.tasks:regular"}, locate=where.get
    )
    assert made.modules == ()
    assert made.runtime_env() == {}
    assert made.tasks == {"review": "review_bot.tasks:review", "again": "relay.tasks:regular"}


def test_what_cannot_be_carried_is_a_configuration_error_naming_the_op(tmp_path: Path) -> None:
    with pytest.raises(
        relay.ConfigError, match=r"task loud: .* 'my-loud\.py' is not a module name"
    ):
        carry({"loud": "my-loud.py:loud"}, cwd=tmp_path, locate=lambda _: None)
    with pytest.raises(relay.ConfigError, match="two modules named 'loud'"):
        carry({"a": "one/loud.py:a", "b": "two/loud.py:b"}, cwd=tmp_path, locate=lambda _: None)
    with pytest.raises(relay.ConfigError, match=r"task gone 'nowhere\.x:y': cannot find"):
        carry({"gone": "nowhere.x:y"}, locate=lambda _: None)


def test_where_this_python_finds_a_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "relay_carry_probe"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "relay_carry_single.py").write_text("", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert origin("relay_carry_probe") == Origin(str(package), installed=False)
    assert origin("relay_carry_single") == Origin(
        str(tmp_path / "relay_carry_single.py"), installed=False
    )
    attrs_origin = origin("attrs")
    assert attrs_origin is not None and attrs_origin.installed
    assert origin("json") == Origin(str(Path(sys.modules["json"].__path__[0])), installed=True)
    assert origin("relay_no_such_module") is None


def test_task_options_are_op_equals_factory() -> None:
    assert task_options(["shout = shoutpkg.tasks:shout", "a=b.py:c"]) == {
        "shout": "shoutpkg.tasks:shout",
        "a": "b.py:c",
    }
    with pytest.raises(relay.ConfigError, match="--task 'shout': expected OP=FACTORY"):
        task_options(["shout"])
