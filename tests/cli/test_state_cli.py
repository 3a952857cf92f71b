"""The state from the shell: a command that writes refuses to overwrite its inputs (the config, a file
in the state directory, the questions), ``kgwise state repair`` says what it keeps and drops, and the
advice an error gives is a command that works (run here)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgwise.app.config import PipelineConfig
from kgwise.app.state import Pending, StateDir
from kgwise.cli.main import app
from kgwise.errors import DataError

runner = CliRunner()

CONFIG = """\
[kg]
graph = "kg.tsv"

[[arms]]
name = "small"
kind = "llm"
spec = "smollm2-135m"
price = 0.1

[[arms]]
name = "big"
kind = "llm"
spec = "smollm2-135m"
price = 0.3

[router]
budget_usd = 10
"""


def _config(tmp_path: Path) -> Path:
    (tmp_path / "kg.tsv").write_text("aspirin\ttreats\theadache\n", encoding="utf-8")
    path = tmp_path / "kgwise.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def _run(args: list[str]) -> tuple[int, str]:
    result = runner.invoke(app, args)
    return result.exit_code, " ".join(result.output.split())


def _advised(message: str) -> list[str]:
    """The `kgwise …` command an error message advises, as arguments."""
    found = re.search(r"`kgwise ([^`]+)`", message)
    assert found is not None, message
    return shlex.split(found.group(1))


WRITERS = [["status"], ["feedback", "abc", "--correct"], ["fit", "--questions", "dev.jsonl"], ["ask", "q?"]]


@pytest.mark.parametrize(("command", "target"), [
    *((c, t) for c in WRITERS for t in ("kgwise.toml", ".kgwise-state/state.json",
                                        ".kgwise-state/calibration.json")),
    (WRITERS[2], "dev.jsonl")])
def test_a_command_refuses_to_overwrite_its_inputs(tmp_path: Path, command: list[str], target: str) -> None:
    cfg = _config(tmp_path)
    (tmp_path / "dev.jsonl").write_text('{"id": 1, "text": "q", "answer": "a"}\n', encoding="utf-8")
    (tmp_path / ".kgwise-state").mkdir()
    (tmp_path / target).write_text("precious\n", encoding="utf-8")
    args = [*command, "--config", str(cfg), "--json", str(tmp_path / target)]
    if command[0] == "fit":
        args[2] = str(tmp_path / "dev.jsonl")
    code, text = _run(args)
    assert code == 2 and "error:" in text and ("is also" in text or "is inside --state" in text), text
    assert (tmp_path / target).read_text(encoding="utf-8") == "precious\n"


def test_repair_says_what_it_keeps_and_drops_and_its_advice_works(tmp_path: Path) -> None:
    cfg = PipelineConfig.load(_config(tmp_path))
    state = tmp_path / "state"
    st = StateDir(state, cfg, 8)
    for i in range(3):
        arm = st.select(f"d{i}", [0.1] * 8, {"small": 0.1, "big": 0.3})
        assert arm is not None
        _, bound = st.selected[f"d{i}"]
        st.record(Pending(f"d{i}", "q", ["a"], arm, bound, bound, [0.1] * 8, "A", None))
    st.sync()
    st._journal.close()  # killed: no snapshot of these events
    st._spend.close()
    st._lock.release()
    journal = state / "journal.jsonl"
    journal.write_bytes(journal.read_bytes()[:-7])  # a torn last event
    (state / "state.json").write_text("{not json", encoding="utf-8")  # and a broken snapshot
    with pytest.raises(DataError, match="kgwise state repair") as refused:
        StateDir(state, cfg, 8)
    code, text = _run(_advised(str(refused.value)))  # kgwise state repair --state DIR --dry-run
    assert code == 0 and "would keep 5 events" in text and "would drop (set aside)" in text, text
    assert "torn" in text and "snapshot: unreadable" in text
    code, text = _run(_advised(text))  # the dry run advises the repair itself
    assert code == 0 and "repaired" in text, text
    assert list((state / "set-aside").iterdir())
    with StateDir(state, cfg, 8) as st:  # opens; the spend mark keeps what the three answers cost
        assert not st.set_aside and st.router.spent >= 0.3
    code, text = _run(["state", "repair", "--state", str(state)])
    assert code == 0 and "nothing to repair" in text


def test_line_numbers_do_not_print_as_emoji(tmp_path: Path) -> None:
    bad = tmp_path / "dev.jsonl"
    bad.write_bytes(b"".join(b'{"id": %d, "text": "q", "answer": "a"}\n' % i for i in range(99))
                    + b'{"id": 99, "text": "caf\xe9"}\n')
    cfg = _config(tmp_path)
    code, text = _run(["fit", "--config", str(cfg), "--questions", str(bad)])
    assert code == 2 and f"{bad}:100: not valid UTF-8" in text and "💯" not in text, text
