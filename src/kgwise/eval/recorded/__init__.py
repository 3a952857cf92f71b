"""Readers of recorded per-question outputs of published systems (``$KGWISE_DATA/predictions``).

Every reader returns :class:`Outcome` rows: what one system answered to one question, whether that was
right, and what it spent. Files are aligned to dataset questions by id where they carry one, else by
:func:`question_key` (the question text lower-cased with everything but letters and digits removed, which
also undoes WordPiece splits such as ``jam ##ar ##cus``).

Token counts that a file does not record are estimated by :func:`estimate_tokens` (``⌈chars / 4⌉``, the
usual rule of thumb for English with BPE tokenizers) and flagged ``tokens_estimated``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kgwise.grading import question_key

__all__ = ["Outcome", "estimate_tokens", "question_key"]

def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` estimated as ``⌈len(text) / 4⌉`` (0 for empty text)."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One system's recorded answer to one question.

    ``qid`` is the dataset id when the file has one (else ``""``); ``question`` the question text when the
    file has one (else ``""``); ``correct`` the file's hit, or the reader's scoring against gold names.
    """

    qid: str
    question: str
    correct: bool
    prediction: str
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 1
    tokens_estimated: bool = False

    @property
    def key(self) -> str:
        return question_key(self.question)


def _register_sources() -> None:
    """Register the shared data's recordings as replay sources (after ``Outcome`` exists)."""
    import kgwise.eval.recorded.sources  # noqa: F401


_register_sources()
