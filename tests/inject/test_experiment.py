"""A KnowGPT run directory resumes only a run of the same data set, LLM and settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.errors import ConfigError
from kgwise.inject import BanditConfig
from kgwise.inject.experiment import ExperimentConfig, _claim_run_dir


def test_run_dir_resumes_only_the_same_run(tmp_path: Path) -> None:
    cfg = ExperimentConfig()
    _claim_run_dir(tmp_path, "csqa", "smollm2-135m", cfg)
    _claim_run_dir(tmp_path, "csqa", "smollm2-135m", cfg)  # a resume
    _claim_run_dir(tmp_path, "csqa", "smollm2-135m", ExperimentConfig(limit=1000))  # more test questions
    with pytest.raises(ConfigError, match="llm"):
        _claim_run_dir(tmp_path, "csqa", "gemma3-270m", cfg)
    with pytest.raises(ConfigError, match="train_limit"):
        _claim_run_dir(tmp_path, "csqa", "smollm2-135m", ExperimentConfig(train_limit=400))
    with pytest.raises(ConfigError, match="scoring"):  # outcomes were scored by another rule
        _claim_run_dir(tmp_path, "csqa", "smollm2-135m", ExperimentConfig(scoring="sum"))
    with pytest.raises(ConfigError, match="bandit"):  # the bandit was trained with other settings
        _claim_run_dir(tmp_path, "csqa", "smollm2-135m", ExperimentConfig(bandit=BanditConfig(ridge_grid=())))


def test_unknown_scoring_rule_is_named() -> None:
    with pytest.raises(ConfigError, match="scoring must be one of sum, mean, auto"):
        ExperimentConfig(scoring="max")


@pytest.mark.parametrize("left", ["outcomes.jsonl", "path_policy.pt", "bandit.npz"])
def test_unrecorded_results_are_not_adopted(tmp_path: Path, left: str) -> None:
    (tmp_path / left).write_text("from a run before run.json existed\n")
    with pytest.raises(ConfigError, match="unrecorded"):
        _claim_run_dir(tmp_path, "obqa", "smollm2-135m", ExperimentConfig())
