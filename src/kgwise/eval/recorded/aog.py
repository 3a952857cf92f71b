"""AoG (Qwen3-max agent) on WebQSP: ``AoG_webqsp_qwen3-max.jsonl``, one JSON object per question with
``question``, ``Answer``, ``correct``, ``call_num``, ``input_token``, ``output_token`` (all recorded)."""

from __future__ import annotations

from pathlib import Path

from kgwise.datasets._io import read_jsonl
from kgwise.errors import DataError
from kgwise.eval.recorded import Outcome

__all__ = ["AOG_WEBQSP", "read_aog"]

AOG_WEBQSP = "predictions/aog_qwen3max_webqsp/AoG_webqsp_qwen3-max.jsonl"
_FIELDS = ("question", "correct", "call_num", "input_token", "output_token")


def read_aog(path: str | Path) -> list[Outcome]:
    """One :class:`Outcome` per line; tokens and LLM calls as recorded; ``correct`` as recorded."""
    p = Path(path)
    out: list[Outcome] = []
    for n, row in read_jsonl(p, "AoG predictions file"):
        missing = [f for f in _FIELDS if f not in row]
        if missing:
            raise DataError(f"missing field(s) {missing}", p, n)
        if not isinstance(row["correct"], bool):
            raise DataError(f"'correct' must be true/false, got {row['correct']!r}", p, n)
        try:
            tokens_in, tokens_out = int(row["input_token"]), int(row["output_token"])
            calls = int(row["call_num"])
        except (TypeError, ValueError) as exc:
            raise DataError(f"token/call counts must be integers: {exc}", p, n) from exc
        out.append(
            Outcome(
                qid="",
                question=str(row["question"]),
                correct=row["correct"],
                prediction=str(row.get("Answer") or ""),
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                calls=calls,
            )
        )
    return out
