"""What the cluster commands share: Ray's own notices stay off the stdout they write."""

from __future__ import annotations

import pytest

from relay._cluster._command import notices_to_stderr


def test_rays_notices_about_the_cluster_go_to_stderr_not_to_the_commands_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ray's driver prints a notice such as a node marked dead from a thread of its own, to
    # stdout, where `relay cluster list --json` writes its listing.
    worker = pytest.importorskip("ray._private.worker")
    monkeypatch.setattr(worker, "print_to_stdstream", worker.print_to_stdstream)
    notices_to_stderr()
    notices_to_stderr()  # once only: the notice is printed once
    notice = {"lines": ["a node was marked dead"], "pid": "raylet", "is_err": False}
    worker.print_to_stdstream(notice, ignore_prefix=False)
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("a node was marked dead") == 1
