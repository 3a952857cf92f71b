"""``Replay`` on the real recorded outputs in the shared data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

from kgwise.errors import ConfigError
from kgwise.eval.recorded import Outcome, gnn_rag
from kgwise.llm import LLM, ReplayMissError, get_llm
from kgwise.llm.prices import default_prices
from kgwise.llm.replay import Replay
from kgwise.types import Question


@pytest.mark.parametrize("variant", ["rearev-sbert", "rearev-lmsr"])
def test_rog_hit_rate_equals_the_release_summary(data_dir: Path, variant: str) -> None:
    replay = Replay.from_spec(f"rog-{variant}", data_dir)
    detailed = data_dir / gnn_rag.ROG_GNN_DETAILED[variant]
    summary = gnn_rag.read_eval_summary(detailed.parent / "eval_result.txt")
    assert len(replay) == 1628
    hit = 100 * sum(cast(Outcome, r).correct for r in replay.records) / len(replay)
    assert hit == pytest.approx(summary["Hit"], abs=1e-9)
    # by id and by the question text inside a prompt, the same record comes back
    rec = replay.records[10]
    assert rec.qid and rec.question and rec.input_tokens > 0
    q = Question(rec.qid, rec.question)
    assert replay.answer(q).raw == rec.prediction
    gen = replay.generate(f"Question: {rec.question}\nAnswer with the entity names only.")
    assert gen.text == rec.prediction
    expected = default_prices().cost("llama-2-7b", rec.input_tokens, rec.output_tokens)
    assert gen.usage.cost == pytest.approx(expected)


def test_aog_tokens_and_accuracy_equal_the_file(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGWISE_DATA", str(data_dir))
    path = data_dir / "predictions/aog_qwen3max_webqsp/AoG_webqsp_qwen3-max.jsonl"
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    replay = get_llm("replay:aog-qwen3-max")
    assert isinstance(replay, Replay) and isinstance(replay, LLM)
    assert len(replay) == len(rows) == 1636
    tin = tout = calls = correct = 0
    for row in rows:
        gen = replay.generate(f"Answer this question: {row['question']}")
        assert gen.text == row["Answer"]
        tin, tout = tin + gen.usage.input_tokens, tout + gen.usage.output_tokens
        calls += gen.usage.calls
        correct += cast(Outcome, replay.lookup(row["question"])).correct
    assert (tin, tout, calls) == (sum(r["input_token"] for r in rows), sum(r["output_token"] for r in rows),
                                  sum(r["call_num"] for r in rows))
    assert correct == sum(r["correct"] for r in rows)
    rec = replay.records[0]
    assert replay.generate(rec.question).usage.cost == pytest.approx(
        (rec.input_tokens * 1.2 + rec.output_tokens * 6.0) / 1e6)


def test_gpt_family_replays_the_raw_lines(data_dir: Path) -> None:
    path = data_dir / "predictions/gpt_family_webqsp/WQSP_chatgpt_answers_March.txt"
    lines = [x.split("\t") for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    replay = Replay.from_spec("chatgpt", data_dir)
    assert len(replay) == len(lines)
    for parts in lines[:300]:
        rec = replay.lookup(parts[1])
        first = next(p for p in lines if p[1].strip().lower() == parts[1].strip().lower())
        assert rec.prediction == (first[2].strip() if len(first) > 2 else "")


def test_miss_raises_a_clear_error(data_dir: Path) -> None:
    replay = Replay.from_spec("gpt-4", data_dir)
    with pytest.raises(ReplayMissError, match="no recorded question found"):
        replay.generate("What is the airspeed velocity of an unladen swallow?")
    with pytest.raises(ReplayMissError, match="nope"):
        replay.answer(Question("nope", "zzz qqq unknown"))
    with pytest.raises(KeyError):
        replay.answer(Question("nope", "zzz qqq unknown"))


def test_a_sources_format_read_from_the_users_own_file(data_dir: Path, tmp_path: Path) -> None:
    """``replay:NAME@FILE``: the user's file in a registered source's format (here GPT-family lines on
    questions of their own), not the shared data's WebQSP file."""
    import kgwise.eval.recorded.sources  # noqa: F401  registers the sources

    own = tmp_path / "my_answers.txt"
    own.write_text("0\twhich drug treats gout?\tcolchicine\n1\twhich drug lowers blood sugar?\tinsulin\n",
                   encoding="utf-8")
    replay = get_llm(f"replay:gpt-4@{own}")
    assert isinstance(replay, Replay)
    assert len(replay) == 2 and replay.name == "replay:gpt-4@my_answers.txt"
    assert replay.lookup("Which drug treats gout?").prediction == "colchicine"
    with pytest.raises(ConfigError, match="is not a file"):
        get_llm(f"replay:gpt-4@{tmp_path / 'none.txt'}")
