"""A one-arm KnowGPT config (``kgwise init``) and ``kgwise eval knowgpt`` through the real command-line app
(the one-arm answers themselves: ``tests/app/test_one_arm.py``)."""

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


def test_a_one_arm_config_from_init(tmp_path: Path, ddb_file: Path) -> None:
    """``kgwise init --arm x=inject:LLM`` writes the config of a single KnowGPT tool; bad input to it and to
    ``kgwise ask --config`` is refused before any model loads, naming what is wrong."""
    from kgwise.app import PipelineConfig

    out = tmp_path / "kgwise.toml"
    result = runner.invoke(app, ["init", "--kg", str(ddb_file), "--arm", "knowgpt=inject:smollm2-135m",
                                 "--budget-calls", "100", "--out", str(out)])
    assert result.exit_code == 0, result.output
    config = PipelineConfig.load(out)
    assert [(a.name, a.kind, a.spec) for a in config.arms] == [("knowgpt", "inject", "smollm2-135m")]
    result = runner.invoke(app, ["init", "--kg", str(ddb_file), "--arm", "knowgpt", "--out",
                                 str(tmp_path / "b.toml")])
    assert result.exit_code == 2 and "NAME=KIND:SPEC" in result.output
    result = runner.invoke(app, ["ask", "Which drug?", "--choices", "a|b", "--config",
                                 str(tmp_path / "missing.toml")])
    assert result.exit_code == 2 and "missing.toml" in result.output


def test_eval_knowgpt_rejects_unknown_dataset_and_scoring() -> None:
    result = runner.invoke(app, ["eval", "knowgpt", "--dataset", "webqsp"])
    assert result.exit_code == 2 and "unknown data set" in result.output
    result = runner.invoke(app, ["eval", "knowgpt", "--dataset", "obqa", "--scoring", "max"])
    assert result.exit_code == 2 and "scoring must be one of" in result.output
    result = runner.invoke(app, ["eval", "knowgpt", "--dataset", "obqa", "--evidence", "full",
                                 "--knowledge-ratio", "2"])
    assert result.exit_code == 2 and "--knowledge-ratio budget ranked evidence" in result.output
    result = runner.invoke(app, ["eval", "knowgpt", "--dataset", "obqa", "--knowledge-ratio", "-1"])
    assert result.exit_code == 2 and "--knowledge-ratio" in result.output
