"""GNN-RAG release on WebQSP (``predictions/gnn_rag_webqsp``).

* ``detailed_eval_result.jsonl`` (RoG/LLaMA2-7B with GNN retrieval, plain llama2-chat): per question
  ``id``, the predicted answer list, ``ground_truth``, and the release's own ``hit`` (any gold answer found
  in the prediction) — :func:`read_detailed_eval`.
* ``predictions.jsonl`` beside it: the full LLaMA2 prompt (``input``) and the raw reply —
  :func:`read_rog_predictions` (the router reads the prompt for its token estimates).
* ``gnn/RoG-webqsp/rearev-*/test.info``: the ReaRev GNN's scored candidates and ``hit`` (Hits@1) per
  question, in WebQSP test order, questions WordPiece-tokenised, no ids — :func:`read_test_info_candidates`
  (:func:`rearev_outcomes`: its top candidate and hit).
* ``eval_result.txt``: the release's summary (``Accuracy: … Hit: … F1: …``) — :func:`read_eval_summary`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kgwise.datasets._io import read_jsonl
from kgwise.errors import DataError
from kgwise.eval.recorded import Outcome, estimate_tokens

__all__ = [
    "GNN_RAG_DIR",
    "LLAMA2_CHAT_DETAILED",
    "REAREV_TEST_INFO",
    "ROG_GNN_DETAILED",
    "ROG_GNN_PREDICTIONS",
    "RoGPrediction",
    "ScoredCandidates",
    "read_detailed_eval",
    "read_eval_summary",
    "read_rog_predictions",
    "read_test_info_candidates",
    "rearev_outcomes",
]

GNN_RAG_DIR = "predictions/gnn_rag_webqsp"
_ROG = "RoG-webqsp/RoG/test/results_gen_rule_path_RoG-webqsp_RoG_test_predictions_3_False_jsonl/False"
ROG_GNN_DETAILED = {
    "rearev-sbert": f"{GNN_RAG_DIR}/KGQA-GNN-RAG/rearev-sbert/{_ROG}/detailed_eval_result.jsonl",
    "rearev-lmsr": f"{GNN_RAG_DIR}/KGQA-GNN-RAG/rearev-lmsr/{_ROG}/detailed_eval_result.jsonl",
    "rearev-sbert-ra": f"{GNN_RAG_DIR}/KGQA-GNN-RAG-RA/rearev-sbert/{_ROG}/detailed_eval_result.jsonl",
    "rearev-lmsr-ra": f"{GNN_RAG_DIR}/KGQA-GNN-RAG-RA/rearev-lmsr/{_ROG}/detailed_eval_result.jsonl",
}
LLAMA2_CHAT_DETAILED = (
    f"{GNN_RAG_DIR}/KGQA-GNN-RAG/rearev-lmsr/RoG-webqsp/llama2-chat-hf/test/no_rule/False/"
    "detailed_eval_result.jsonl"
)
REAREV_TEST_INFO = {
    "rearev-sbert": f"{GNN_RAG_DIR}/gnn/RoG-webqsp/rearev-sbert/test.info",
    "rearev-lmsr": f"{GNN_RAG_DIR}/gnn/RoG-webqsp/rearev-lmsr/test.info",
}


def _prediction_text(pred: object) -> str:
    """A recorded ``prediction`` (one string, or a list of answer lines) as text, one answer a line."""
    return "\n".join(str(x) for x in pred) if isinstance(pred, list) else str(pred)


def read_detailed_eval(path: str | Path) -> list[Outcome]:
    """One :class:`Outcome` per line: ``qid`` = ``id``, ``correct`` = the recorded ``hit``, the prediction
    lines joined by newlines, output tokens estimated from that text (input tokens unknown here: 0)."""
    p = Path(path)
    out: list[Outcome] = []
    for n, row in read_jsonl(p, "detailed_eval_result.jsonl"):
        if "id" not in row or "hit" not in row or "prediction" not in row:
            raise DataError("missing 'id', 'hit' or 'prediction'", p, n)
        text = _prediction_text(row["prediction"])
        out.append(
            Outcome(
                qid=str(row["id"]),
                question="",
                correct=bool(row["hit"]),
                prediction=text,
                input_tokens=0,
                output_tokens=estimate_tokens(text),
                calls=1,
                tokens_estimated=True,
            )
        )
    return out


_SUMMARY = re.compile(r"([A-Za-z0-9]+):\s*([-+0-9.eE]+)")


def read_eval_summary(path: str | Path) -> dict[str, float]:
    """``eval_result.txt`` → ``{"Accuracy": 73.77, "Hit": 85.69, …}`` (percentages as written)."""
    p = Path(path)
    if not p.is_file():
        raise DataError("eval_result.txt not found", p)
    found = {k: float(v) for k, v in _SUMMARY.findall(p.read_text(encoding="utf-8"))}
    if not found:
        raise DataError("no 'Name: value' pairs found", p)
    return found


# ---------------------------------------------------------------------------------------------------
# Scored candidates (ReaRev ``test.info``) and RoG generations (``predictions.jsonl``) for UAG baselines.

ROG_GNN_PREDICTIONS = {
    k: v.replace("detailed_eval_result.jsonl", "predictions.jsonl") for k, v in ROG_GNN_DETAILED.items()
}
"""RoG/LLaMA2-7B prompts (verbalised Freebase paths) and raw answers, per GNN retriever."""


@dataclass(frozen=True, slots=True)
class ScoredCandidates:
    """One line of a ReaRev ``test.info``: the (WordPiece) question, gold answer MIDs, candidate MIDs with
    the GNN's scores (best first, as recorded) and the recorded Hits@1."""

    question: str
    answers: tuple[str, ...]
    candidates: tuple[tuple[str, float], ...]
    hit: bool


def rearev_outcomes(path: str | Path) -> list[Outcome]:
    """One :class:`Outcome` per line of a ReaRev ``test.info``: the (WordPiece) question, ``correct`` = the
    recorded ``hit`` (Hits@1), the top-scored candidate MID as the prediction; no tokens (a local GNN)."""
    return [Outcome("", c.question, c.hit, c.candidates[0][0] if c.candidates else "")
            for c in read_test_info_candidates(path)]


def read_test_info_candidates(path: str | Path) -> list[ScoredCandidates]:
    """Every line of a ReaRev ``test.info`` (WebQSP test order, 1,639 questions, no ids)."""
    p = Path(path)
    out: list[ScoredCandidates] = []
    for n, row in read_jsonl(p, "ReaRev test.info"):
        try:
            answers = tuple(str(a) for a in row["answers"])
            cands = tuple((str(c[0]), float(c[1])) for c in row["cand"])
            hit = float(row["hit"]) > 0.5
            out.append(ScoredCandidates(str(row["question"]).strip(), answers, cands, hit))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise DataError(
                f"malformed test.info record ({exc!r}): needs question, answers, cand, hit", p, n
            ) from exc
    return out


@dataclass(frozen=True, slots=True)
class RoGPrediction:
    """One line of RoG's ``predictions.jsonl``: the prompt ``prompt`` (with verbalised reasoning paths),
    the raw generated ``answer`` (one answer per line) and the recorded ``ground_truth`` names."""

    qid: str
    question: str
    prompt: str
    answer: str
    ground_truth: tuple[str, ...]


def read_rog_predictions(path: str | Path) -> list[RoGPrediction]:
    """Every line of a RoG ``predictions.jsonl``, in file order."""
    p = Path(path)
    out: list[RoGPrediction] = []
    for n, row in read_jsonl(p, "predictions.jsonl"):
        if "id" not in row or "prediction" not in row or "input" not in row:
            raise DataError("missing 'id', 'prediction' or 'input'", p, n)
        answer = _prediction_text(row["prediction"])
        truth = row.get("ground_truth") or []
        out.append(
            RoGPrediction(
                str(row["id"]),
                str(row.get("question", "")),
                str(row["input"]),
                answer,
                tuple(str(x) for x in truth),
            )
        )
    return out
