"""Grading an answer against gold: normalised exact match or whole-word containment of a gold name.

The product grades with it (feedback given as gold answers) and so do the evaluations ("Hits@1 by
matching", as for the GPT-family WebQSP answers of Tan et al. 2023).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence

import ftfy

__all__ = ["match_answer", "normalize_answer", "question_key", "repair_text"]


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation + "‘’“”–—"})


def normalize_answer(text: str) -> str:
    """Lower-case, strip accents, punctuation and English articles, squeeze spaces."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    text = text.translate(_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def match_answer(prediction: str, gold: Sequence[str], *, containment: bool = True) -> bool:
    """True when a normalised gold name equals the normalised prediction or, with ``containment``,
    occurs in it as a whole-word span (``"barack obama"`` in ``"the president was barack obama"``)."""
    pred = normalize_answer(prediction)
    if not pred:
        return False
    padded = f" {pred} "
    for g in gold:
        ng = normalize_answer(g)
        if not ng:
            continue
        if ng == pred or (containment and f" {ng} " in padded):
            return True
    return False


_NON_ALNUM = re.compile(r"[^a-z0-9]")


def repair_text(text: str) -> str:
    """``text`` with mojibake repaired (UTF-8 read as Latin-1/cp1252, once or twice: ``MÃ©xico`` →
    ``México``, by ftfy) and NFKC-normalised."""
    return ftfy.fix_text(text, normalization="NFKC")


def question_key(text: str) -> str:
    """Alignment key of a question text: mojibake repaired, WordPiece ``" ##"`` joins undone, accents
    stripped, lower case, only [a-z0-9] kept."""
    plain = unicodedata.normalize("NFKD", repair_text(text).replace(" ##", ""))
    return _NON_ALNUM.sub("", "".join(c for c in plain if not unicodedata.combining(c)).lower())
