"""``kgwise answer`` and ``kgwise eval knowgpt`` through the real command-line app."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app

runner = CliRunner()


@pytest.fixture(scope="module")
def ddb_file(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kgwise.kg.loaders import load_ddb

    return load_ddb(data_dir / "ddb").save(tmp_path_factory.mktemp("kg") / "ddb.npz")


def test_answer_rejects_bad_input(tmp_path: Path, ddb_file: Path) -> None:
    result = runner.invoke(app, ["answer", "Which drug?", "--choices", "only one", "--kg", str(ddb_file)])
    assert result.exit_code == 2 and "at least two answers" in result.output
    missing = str(tmp_path / "no.npz")
    result = runner.invoke(app, ["answer", "Which drug?", "--choices", "a|b", "--kg", missing])
    assert result.exit_code == 2 and "no.npz" in result.output
    result = runner.invoke(app, ["answer", "Which drug?", "--choices", "a|b", "--kg", str(ddb_file),
                                 "--bandit", str(tmp_path / "nobandit.npz")])
    assert result.exit_code == 2 and "nobandit.npz" in result.output


def test_eval_knowgpt_rejects_unknown_dataset_and_scoring() -> None:
    result = runner.invoke(app, ["eval", "knowgpt", "--dataset", "webqsp"])
    assert result.exit_code == 2 and "unknown data set" in result.output
    result = runner.invoke(app, ["eval", "knowgpt", "--dataset", "obqa", "--scoring", "max"])
    assert result.exit_code == 2 and "--scoring" in result.output


@pytest.mark.slow
def test_answer_prints_answer_knowledge_combination_and_usage(ddb_file: Path) -> None:
    result = runner.invoke(app, [
        "answer", "Which drug is used to treat hypertension?",
        "--choices", "Lisinopril|Insulin|Penicillin|Levothyroxine",
        "--kg", str(ddb_file), "--llm", "smollm2-135m", "--combo", "P_sub+F_t",
    ])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "answer:" in out and "combination: P_sub+F_t, choices ranked by sum" in out
    assert "knowledge:" in out and "usage:" in out and "LLM calls" in out
    assert "Lisinopril" in out and "ms" in out
