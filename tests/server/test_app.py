"""``kgwise serve --config`` over loopback, and the inject arm's choice-scoring rules, with the real DDB
graph and the real local model (SmolLM2-135M)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kgwise.app import Pipeline
from kgwise.errors import ConfigError, DataError
from kgwise.eval.bench.net import free_port
from kgwise.inject import PromptBandit
from kgwise.kg.loaders import load_ddb

QUESTION = "Which drug is used to treat hypertension?"
CHOICES = ["Lisinopril", "Insulin", "Penicillin", "Levothyroxine"]


def _arm(name: str, scoring: str, extra: str = 'combo = "P_sub+F_t"\n') -> str:
    return (f'[[arms]]\nname = "{name}"\nkind = "inject"\nspec = "smollm2-135m"\nscoring = "{scoring}"\n'
            f'price = 0\n{extra}\n')


def _config(root: Path, arms: str, name: str = "kgwise.toml") -> Path:
    path = root / name
    path.write_text(f'[kg]\ngraph = "ddb.npz"\n\n{arms}\n[router]\nbudget_calls = 1000\n', encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def root(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("server")
    load_ddb(data_dir / "ddb").save(out / "ddb.npz")
    return out


@pytest.mark.slow
def test_the_scoring_rule_reaches_the_answers(root: Path) -> None:
    """``scoring = "mean"`` ranks by per-token mean log-probability, ``"pmi"`` by the gain over each choice's
    context-free log-probability: other probabilities than the sum's; an unknown rule is refused by name."""
    config = _config(root, _arm("sum", "sum") + _arm("mean", "mean") + _arm("pmi", "pmi"), "rules.toml")
    with Pipeline.from_config(config, root / "rules-state") as pipe:
        by = {arm: pipe.answer(QUESTION, CHOICES, arm=arm).probabilities for arm in ("sum", "mean", "pmi")}
    assert by["mean"] != pytest.approx(by["sum"], abs=1e-3)
    assert by["pmi"] != pytest.approx(by["sum"], abs=1e-3) and sum(by["pmi"].values()) == pytest.approx(1.0)
    with pytest.raises((ConfigError, DataError), match="scoring"):
        Pipeline.from_config(_config(root, _arm("max", "max"), "bad.toml"), root / "bad-state")


@pytest.mark.slow
def test_a_bandit_brings_the_scoring_rule_it_was_trained_with(root: Path) -> None:
    bandit = PromptBandit(384)
    bandit.scoring = "mean"
    bandit.save(root / "bandit.npz")
    trained = 'bandit = "bandit.npz"\n'
    with pytest.raises(ConfigError, match="trained with 'mean'"):
        Pipeline.from_config(_config(root, _arm("sum", "sum", trained), "sum.toml"), root / "sum-state")


def _post(url: str, payload: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(url, json.dumps(payload).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        out: dict[str, Any] = json.loads(resp.read())
        return out


@pytest.mark.slow
def test_kgwise_serve_answers_over_loopback(root: Path) -> None:
    config = _config(root, _arm("knowgpt", "sum"), "serve.toml")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kgwise.cli.main", "serve", "--config", str(config), "--state",
         str(root / "serve-state"), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ.copy(),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as resp:
                    assert json.loads(resp.read())["status"] == "ok"
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
                assert time.monotonic() < deadline, "server did not start within 180 s"
                time.sleep(0.5)
        body = _post(base + "/v1/chat/completions", {
            "model": "kgwise", "messages": [{"role": "user", "content": QUESTION}],
            "kgwise": {"choices": CHOICES}})
        assert body["kgwise"]["arm"] == "knowgpt" and body["kgwise"]["choice"] in "ABCD"
        evidence = _post(base + "/v1/evidence", {"question": QUESTION, "choices": CHOICES})
        assert evidence["triples"] == body["kgwise"]["evidence"]["triples"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
