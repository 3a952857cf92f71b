"""WebQSP inputs of `kgwise eval uag` are aligned; the command runs end to end on a small slice."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kgwise.conformal.grid import TableBatch
from kgwise.eval.recorded import question_key
from kgwise.eval.uag.experiment import (
    METHODS,
    check_targets,
    load_webqsp_data,
    markdown_table,
    miss_p_value,
    summarise,
    with_gnn,
)


def test_webqsp_inputs_are_aligned(data_dir: Path) -> None:
    wq = load_webqsp_data(data_dir)
    assert wq.gnn is not None and wq.generations is not None  # WebQSP comes with candidates and generations
    assert len(wq.questions) == 1628 == wq.gnn.num_questions
    assert [q.id for q in wq.questions] == wq.gnn.qids
    assert all(q.id in wq.generations for q in wq.questions)
    expected = ["Jamaican English", "Jamaican Creole English Language"]
    assert wq.generations["WebQTest-0"].splitlines() == expected
    # gold MIDs of the GNN file sit on the same question: its top candidate hit rate is the GNN's Hits@1
    top = wq.gnn.rank == 0
    hits1 = np.bincount(wq.gnn.q[top & wq.gnn.gold], minlength=1628).astype(bool).mean()
    assert 0.6 < hits1 < 0.9
    assert question_key(wq.questions[0].text) == question_key("what does jamaican people speak")


def test_with_gnn_merges_only_a_one_answer_questions_gold(data_dir: Path,
                                                           webqsp_uag_tables: TableBatch) -> None:
    """The gold MID of a one-answer question joins the path table's single gold node (same entity), so a
    set holding both counts it once; nothing else merges, and coverage does not change."""
    wq = load_webqsp_data(data_dir, limit=300)
    assert wq.gnn is not None and wq.single_answer is not None
    tables = webqsp_uag_tables
    naive, merged = with_gnn(tables, wq.gnn), with_gnn(tables, wq.gnn, wq.single_answer)
    gold_nodes = np.bincount(tables.node_q[tables.gold], minlength=300)
    expected = wq.gnn.gold & wq.single_answer[wq.gnn.q] & (gold_nodes[wq.gnn.q] == 1)
    assert 0 < expected.sum() < wq.gnn.gold.sum()
    assert naive.node_q.size - merged.node_q.size == expected.sum()
    assert np.array_equal(merged.gold_retrievable(), naive.gold_retrievable())
    q = int(wq.gnn.q[np.flatnonzero(expected)[0]])
    table = merged.table(q)
    (g,) = np.flatnonzero(table.gold)  # one gold node, reached by paths and scored by the GNN
    assert table.scored is not None
    assert np.isfinite(table.scored[g]) and (table.state_node == g).any()
    everything = table.final_set(np.inf, np.inf, np.inf, np.inf)
    assert everything.size == naive.table(q).final_set(np.inf, np.inf, np.inf, np.inf).size - 1


def test_summary_shape_and_table() -> None:
    row = {"abstained": False, "ecr": 0.9, "apss": 3.0, "hits1": 0.5, "violated": False}
    split = {m: [dict(row, alpha=0.1), {"alpha": 0.2, "abstained": True}] for m in METHODS}
    wide = {m: [dict(row, alpha=0.1, apss=30.0), {"alpha": 0.2, "abstained": True}] for m in METHODS}
    rep = summarise([split, split, wide], (0.1, 0.2))
    assert rep["uag"]["0.1"]["apss"] == pytest.approx(12.0) and rep["uag"]["0.1"]["apss_median"] == 3.0
    rep = summarise([split, split], (0.1, 0.2))
    assert rep["uag"]["0.1"]["ecr"] == pytest.approx(0.9) and rep["uag"]["0.1"]["ecr_std"] == 0
    assert rep["uag"]["0.2"]["ecr"] is None and rep["uag"]["0.2"]["abstain_rate"] == 1
    assert {"ecr", "ecr_std", "apss", "apss_std", "hits1", "violation_rate"} <= set(rep["top_k"]["0.1"])
    assert "| uag | 90.0 | 3.0 | - | - |" in markdown_table(rep, (0.1, 0.2))


def test_significant_violations_discount_test_split_noise() -> None:
    # 55 misses of 500 at α = 0.1: above α, but well within Binom(500, 0.1)'s noise (mean 50, sd 6.7)
    assert miss_p_value(55, 500, 0.1) > 0.2
    assert miss_p_value(75, 500, 0.1) < 0.01
    assert miss_p_value(0, 500, 0.1) == pytest.approx(1.0)
    p = [miss_p_value(k, 500, 0.1) for k in range(0, 120, 5)]
    assert np.all(np.diff(p) <= 0)
    row = {"abstained": False, "ecr": 0.89, "apss": 3.0, "hits1": 0.5, "violated": True, "significant": False}
    split = {m: [dict(row, alpha=0.1)] for m in METHODS}
    rep = summarise([split, dict(split, uag=[dict(row, alpha=0.1, significant=True)])], (0.1,))
    assert rep["uag"]["0.1"]["violation_rate"] == 1.0
    assert rep["uag"]["0.1"]["significant_violation_rate"] == 0.5
    assert rep["top_k"]["0.1"]["significant_violation_rate"] == 0.0


def _entry(ecr: float | None, apss: float | None) -> dict[str, float | None]:
    return {"ecr": ecr, "apss": apss}


def test_targets_leave_out_a_paper_size_below_the_coverage() -> None:
    alphas = (0.2, 0.45)
    # UAG reports 17.9 at α = 0.2 and 0.5 at α = 0.45: APSS ≥ ECR ≥ 0.55 makes the latter unreachable
    ok = {"0.2": _entry(0.82, 2.0), "0.45": _entry(0.56, 0.7)}
    report = {m: ok for m in METHODS} | {"split_cp": {"0.2": _entry(0.8, 3.0), "0.45": _entry(None, None)}}
    t = check_targets(report, alphas)["uag"]
    assert t["met"] is True
    assert t["per_alpha"]["0.45"]["paper_size_feasible"] is False
    assert t["per_alpha"]["0.45"]["size_le_paper"] is False
    assert t["per_alpha"]["0.45"]["size_lt_split_cp"] is None
    short = dict(ok, **{"0.2": _entry(0.79, 2.0)})
    assert check_targets(dict(report, uag=short), alphas)["uag"]["met"] is False
    wide = dict(ok, **{"0.2": _entry(0.82, 3.5)})  # above split CP's 3.0
    assert check_targets(dict(report, uag=wide), alphas)["uag"]["met"] is False
    never = dict(ok, **{"0.2": _entry(None, None)})  # abstained in every split
    assert check_targets(dict(report, uag=never), alphas)["uag"]["met"] is False


@pytest.mark.slow
def test_eval_uag_cli_on_a_slice(data_dir: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kgwise.cli.main import app

    out = tmp_path / "uag.json"
    res = CliRunner().invoke(app, ["eval", "uag", "--dataset", "webqsp", "--alphas", "0.3,0.5", "--splits",
                                   "2", "--limit", "30", "--steps", "0.25,0.25,0.25", "--data", str(data_dir),
                                   "--json", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    for m in ("uag", "uag_top_p", "uag_gnn", "split_cp", "top_k"):
        assert set(rep[m]) == {"0.3", "0.5"}
        assert rep[m]["0.5"]["splits"] == 2
    assert rep["meta"]["questions"] == 30
    assert (tmp_path / "uag_ecr.png").is_file() and (tmp_path / "uag_apss.png").is_file()
    assert (tmp_path / "uag_table6.md").read_text().startswith("| method |")
    # resumable: a second run reads the two splits back
    res = CliRunner().invoke(app, ["eval", "uag", "--alphas", "0.3,0.5", "--splits", "2", "--limit", "30",
                                   "--steps", "0.25,0.25,0.25", "--data", str(data_dir), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["uag"] == rep["uag"]
    # splits run in worker processes give the same report
    par = tmp_path / "par" / "uag.json"
    res = CliRunner().invoke(app, ["eval", "uag", "--alphas", "0.3,0.5", "--splits", "2", "--limit", "30",
                                   "--steps", "0.25,0.25,0.25", "--jobs", "2", "--data", str(data_dir),
                                   "--json", str(par)])
    assert res.exit_code == 0, res.output
    assert {m: json.loads(par.read_text())[m] for m in METHODS} == {m: rep[m] for m in METHODS}
    assert json.loads(par.read_text())["targets"] == rep["targets"]
    assert (rep["meta"]["config"]["tune_fraction"], rep["meta"]["config"]["cal_fraction"]) == (0.2, 0.5)
    res = CliRunner().invoke(app, ["eval", "uag", "--tune-fraction", "0.5", "--cal-fraction", "0.5",
                                   "--data", str(data_dir)])
    assert res.exit_code != 0 and "leave a test part" in res.output


def test_bench_conformal_reports_both_timings(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kgwise.cli.main import app

    out = tmp_path / "bench.json"
    res = CliRunner().invoke(app, ["bench", "conformal", "--synthetic", "--n-questions", "60", "--steps",
                                   "0.25,0.25,0.25", "--baseline-sample", "5", "--json", str(out)])
    assert res.exit_code == 0, res.output
    # --questions is the questions file: a count there is named as such
    old = CliRunner().invoke(app, ["bench", "conformal", "--synthetic", "--questions", "60"])
    assert old.exit_code == 2 and "--n-questions" in " ".join(old.output.split())
    rep = json.loads(out.read_text())
    assert rep["calibration_questions"] == 60 and rep["lambdas"] == 2 * 64  # absolute + relative Eq. 6
    assert rep["vectorised_calibrate_s"] > 0 and rep["per_lambda_loop_s_estimated"] > 0


@pytest.mark.slow
def test_eval_uag_with_a_live_local_llm(data_dir: Path, tmp_path: Path) -> None:
    """Φ(P) generated live by a local model (SmolLM2-135M via llama.cpp) from UAG's own retrieved paths."""
    from typer.testing import CliRunner

    from kgwise.cli.main import app

    out = tmp_path / "live.json"
    res = CliRunner().invoke(app, ["eval", "uag", "--alphas", "0.5", "--splits", "1", "--limit", "3",
                                   "--steps", "0.5,0.5,0.5", "--llm", "smollm2-135m", "--data", str(data_dir),
                                   "--json", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    assert rep["meta"]["questions"] == 3 and "smollm2-135m" in rep["meta"]["notes"]
