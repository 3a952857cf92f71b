"""``kgwise bench serve --replicas``: real ``kgwise serve --config`` replicas (replayed arms) over a real
PostgreSQL on 127.0.0.1, at a size that runs in a few minutes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kgwise.datasets import load
from kgwise.errors import ConfigError
from kgwise.eval.bench import wrk
from kgwise.eval.bench.postgres import postgres_binaries
from kgwise.eval.bench.replicas import ReplicaBenchConfig, run_replica_benchmark
from kgwise.kg.loaders import load_ddb


@pytest.mark.slow
def test_replicas_share_the_budget_and_lose_nothing_at_kill_9(tmp_path: Path, data_dir: Path) -> None:
    if postgres_binaries() is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql; .ci/install does)")
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed (apt-get install wrk; .ci/install does)")
    kg = load_ddb(data_dir / "ddb").save(tmp_path / "ddb.npz")
    questions = [q.text for q in load("webqsp", "test", data_dir)][:20]
    report = run_replica_benchmark(kg, questions, ReplicaBenchConfig(replicas=2, requests=30, concurrency=4,
                                                                     budget_calls=8, questions=20, rounds=2,
                                                                     throughput_s=1.0),
                                   tmp_path / "work")
    budget = report["budget"]
    assert budget["spent"] <= 8.0 and budget["spend_within_budget"]
    assert budget["answers_acknowledged"] <= 8 and budget["statuses"].get("429", 0) > 0
    assert budget["answers_missing"] == 0 and budget["feedback_missing"] == 0
    assert budget["reserved"] == 0.0  # the killed replicas' holds were released
    passes = report["throughput"]["passes"]
    assert [(t["round"], t["replicas"]) for t in passes] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert all(t["statuses"]["2xx"] > 0 and t["statuses"]["other"] == 0 and not t["transport_errors"]
               for t in passes)
    assert all(t["cpu_ms_per_answer"]["replicas"] > 0 for t in passes)
    assert len(report["throughput"]["ratio_2_over_1"]) == 2
    overhead = report["overhead"]
    assert overhead["median_ms_postgresql"] > 0 and len(overhead["rounds"]) == 2
    assert overhead["state_median_ms_postgresql"] > 0 and overhead["state_median_ms_folder"] > 0


def test_the_bench_names_wrk_before_starting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wrk.shutil, "which", lambda _: None)
    with pytest.raises(ConfigError, match=r"throughput phase with wrk.*apt-get install wrk"):
        run_replica_benchmark(tmp_path / "kg.npz", ["q"], ReplicaBenchConfig(), tmp_path / "work")
    assert not (tmp_path / "work").exists()
