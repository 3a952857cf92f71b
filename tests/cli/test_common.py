"""``kgwise.cli.common``: the helpers every command shares."""

from __future__ import annotations

import pytest

from kgwise.cli.common import say


def test_progress_text_is_printed_as_it_is_not_as_markup(capsys: pytest.CaptureFixture[str]) -> None:
    say("pinned; [router] pin_single_arm = false routes regardless [bold]")
    assert "[router] pin_single_arm = false routes regardless [bold]" in capsys.readouterr().err
