"""``kgwise bench pipeline`` at a small scale: every part is timed, the parts add up, and the run is the
pipeline's own (fitted, routed, calibrated, recorded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kgwise.embed import MiniLM
from kgwise.errors import ConfigError
from kgwise.eval.bench.pipeline import PipelineBenchConfig, run_pipeline_benchmark, timing
from kgwise.eval.bench.synthetic import SyntheticConfig, synthetic_conceptnet
from kgwise.types import Question, make_question

WORDS = [f"{a}{b}" for a in ("ba", "ko", "mi", "tu", "re", "sa", "lo", "ne")
         for b in ("dor", "kin", "pel", "sut", "vam", "zor", "lim")]


def _questions(kg_labels: list[str], n: int) -> list[Question]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        picks = rng.choice(len(kg_labels), 4, replace=False)
        choices = [kg_labels[j] for j in picks]
        out.append(make_question(f"Which is related to {choices[0]} and question {i}?", choices, f"q{i}",
                                 answer=choices[0]))
    return out


def test_timing_is_median_and_p90_in_ms() -> None:
    t = timing([0.001 * k for k in range(1, 11)])
    assert t.median_ms == pytest.approx(5.5) and t.p90_ms == pytest.approx(9.1)
    with pytest.raises(ConfigError):
        timing([])


@pytest.mark.slow  # loads all-MiniLM-L6-v2
def test_the_benchmark_times_every_part_of_a_fitted_pipeline(tmp_path: Path) -> None:
    kg = synthetic_conceptnet(WORDS, SyntheticConfig(num_nodes=2000, num_edges=4300))
    labels = list(dict.fromkeys(kg.labels))
    qs = _questions(labels, 70)
    report = run_pipeline_benchmark(kg, qs, MiniLM(cache=False), PipelineBenchConfig(fit=40, questions=30),
                                    tmp_path)
    assert report.questions == 30 and report.fit_questions == 40 and sum(report.routed.values()) == 30
    assert report.graph["nodes"] == 2000
    for part in (report.embed, report.ground, report.record, report.route_calibrate, report.bare_arm_call):
        assert 0 <= part.median_ms <= part.p90_ms
    assert report.overhead.median_ms <= report.answer.median_ms
    assert report.record.median_ms > 0  # the journal is written
    assert report.router["selection"]["method"] == "config"  # 40 questions: too few to cross-fit
    assert report.met == (report.overhead.median_ms <= 10.0)
    assert {"pipeline_open_s", "fit_s"} <= set(report.setup_s)
    with pytest.raises(ConfigError, match="needs 200"):
        run_pipeline_benchmark(kg, qs, MiniLM(cache=False), PipelineBenchConfig(fit=100, questions=100),
                               tmp_path / "again")
