"""``eval pipeline --log`` with the log's labelled questions, KG and generations gets per-arm open sets
as WebQSP's built-in reader does: the same UAG tables and the same per-arm results on the same split; the
learned score's sets beside today's on the same split."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.datasets.user import write_generations, write_graded_log, write_questions
from kgwise.errors import ConfigError
from kgwise.eval.pipeline_sets import RoutedSets, user_sets, webqsp_sets
from kgwise.eval.route.export import webqsp_graded_log
from kgwise.eval.route.logs import GradedReplay, read_replay, webqsp_replay
from kgwise.eval.uag.experiment import load_user_data, webqsp_uag_files

N = 90


@pytest.fixture(scope="module")
def own_files(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], Path, Path]:
    """WebQSP's recorded arms as a graded log, and its questions and RoG generations in the user's
    formats (the files `kgwise data export --dataset webqsp` writes)."""
    out = tmp_path_factory.mktemp("own")
    log, lines, _ = webqsp_graded_log(data_dir)
    write_graded_log(out / "log.jsonl", log)
    questions, generations, _ = webqsp_uag_files(data_dir)
    write_questions(out / "questions.jsonl", questions)
    write_generations(out / "generations.jsonl", generations)
    specs = [f"{name}:{cluster}:{acc!r}" for name, cluster, acc in lines]
    return out / "log.jsonl", specs, out / "questions.jsonl", out / "generations.jsonl"


def _sets_both_ways(data_dir: Path, own_files: tuple[Path, list[str], Path, Path]
                    ) -> tuple[GradedReplay, RoutedSets, RoutedSets]:
    log, specs, questions, generations = own_files
    built_in = webqsp_replay(data_dir).head(N)
    own = read_replay(log, specs).head(N)
    assert built_in.table.qids == own.table.qids
    kg = str(data_dir / "webqsp" / "freebase_fragment.tsv")
    a = webqsp_sets(data_dir, built_in.table, (0.2, 0.3), 0.05)
    b = user_sets(load_user_data(questions, kg, generations), own.table, (0.2, 0.3), 0.05,
                  compare_scores=("absolute", "relative", "items", "items-relative", "learned"))
    return built_in, a, b


def test_a_graded_log_with_its_questions_gets_the_built_in_readers_sets(
        data_dir: Path, own_files: tuple[Path, list[str], Path, Path]) -> None:
    replay, a, b = _sets_both_ways(data_dir, own_files)
    assert np.array_equal(a.rows, b.rows) and (a.rows >= 0).sum() > 0.9 * N
    for name in ("state_q", "state_node", "prefix", "collect", "node_q", "node_ids", "eq6", "gold"):
        assert np.array_equal(getattr(a.tables, name), getattr(b.tables, name)), name
    # one held-out split as the replay runs it: learn / held / test, a fixed routing of the test rows
    perm = np.random.default_rng(0).permutation(N)
    learn, held, test = perm[:25], perm[25:55], perm[55:]
    arms = list(replay.table.arms)
    routed = [arms[i % 2] for i in range(test.size)]
    groups = [np.asarray([j % 2 for j in range(held.size)], dtype=np.int64) for _ in test]
    got_a = a.split_held_out(learn.tolist(), held.tolist(), test.tolist(), routed, groups, arms)
    got_b = b.split_held_out(learn.tolist(), held.tolist(), test.tolist(), routed, groups, arms)
    compared = got_b.pop("compared")
    assert json.dumps(got_a, sort_keys=True) == json.dumps(got_b, sort_keys=True)
    assert any(row.get("arms") for row in got_a["alphas"])  # per-arm coverage and size
    assert [r["alpha"] for r in compared["alphas"]] == [0.2, 0.3]
    assert compared["tuning_questions"] == got_a["tuning_questions"]


def test_own_sets_options_go_together_with_a_log(tmp_path: Path, data_dir: Path) -> None:
    result = CliRunner().invoke(app, ["eval", "pipeline", "--sets-questions", str(tmp_path / "q.jsonl"),
                                      "--data", str(data_dir)])
    out = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 2 and "--sets-questions, --sets-kg, --sets-generations go together" in out


def test_a_log_sharing_no_question_with_the_sets_questions_is_refused(
        data_dir: Path, own_files: tuple[Path, list[str], Path, Path]) -> None:
    log, specs, questions, generations = own_files
    own = read_replay(log, specs).head(N)
    inputs = load_user_data(questions, str(data_dir / "webqsp" / "freebase_fragment.tsv"), generations)
    inputs.questions = inputs.questions[-3:]
    with pytest.raises(ConfigError, match="no question of the log"):
        user_sets(inputs, own.table, (0.2,), 0.05)
    with pytest.raises(ConfigError, match="unknown evaluator score 'learnt'"):
        user_sets(load_user_data(questions, str(data_dir / "webqsp" / "freebase_fragment.tsv"), generations),
                  own.table, (0.2,), 0.05, compare_scores=("learnt",))  # type: ignore[arg-type]
