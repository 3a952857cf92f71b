"""Text normalisation for grounding: tokens, stop-words and a small rule-based English lemmatiser.

The lemmatiser follows the idea of WordNet's *morphy*: look the word up in an exception list of
irregular forms, else strip inflectional suffixes and keep the first candidate that is a known word of
the vocabulary (here: the single-word labels of the knowledge graph). It needs no downloaded corpus; the
WordNet ``*.exc`` files are read when a WordNet directory is given.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path

from kgwise.errors import DataError

__all__ = [
    "Lemmatiser", "common_words", "common_words_from_wordnet", "determiners", "fold_key", "is_acronym",
    "load_exceptions", "phrase_key", "phrase_keys", "read_wordnet", "stopwords", "tokenize", "written_tokens",
]

_TOKEN = re.compile(r"[^\W_]+")
_CLEAN = re.compile(r"[a-z0-9]+(?: [a-z0-9]+)*")

# suffix rules (suffix, replacement), tried in order; nouns, then verbs, then adjectives
_RULES: tuple[tuple[str, str], ...] = (
    ("ies", "y"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("sses", "ss"),
    ("xes", "x"),
    ("zes", "z"),
    ("ses", "s"),
    ("men", "man"),
    ("es", "e"),
    ("es", ""),
    ("s", ""),
    ("ied", "y"),
    ("ed", "e"),
    ("ed", ""),
    ("ying", "ie"),
    ("ing", "e"),
    ("ing", ""),
    ("iest", "y"),
    ("ier", "y"),
    ("est", "e"),
    ("est", ""),
    ("er", "e"),
    ("er", ""),
)
_VOWELS = frozenset("aeiou")

# a few very common irregular forms, used when no WordNet exception files are given
_BUILTIN_EXCEPTIONS: dict[str, str] = {
    "was": "be", "were": "be", "is": "be", "are": "be", "been": "be", "am": "be",
    "has": "have", "had": "have", "did": "do", "does": "do", "done": "do",
    "went": "go", "gone": "go", "goes": "go", "ate": "eat", "eaten": "eat", "ran": "run",
    "saw": "see", "seen": "see", "made": "make", "took": "take", "taken": "take",
    "gave": "give", "given": "give", "found": "find", "thought": "think", "told": "tell",
    "felt": "feel", "left": "leave", "kept": "keep", "bought": "buy", "brought": "bring",
    "children": "child", "people": "person", "men": "man", "women": "woman", "feet": "foot",
    "teeth": "tooth", "mice": "mouse", "geese": "goose", "lives": "life", "wives": "wife",
    "knives": "knife", "leaves": "leaf", "wolves": "wolf", "better": "good", "best": "good",
    "worse": "bad", "worst": "bad",
}


def tokenize(text: str) -> list[str]:
    """Lower-cased runs of letters and digits (punctuation, ``_`` and ``-`` separate tokens)."""
    return _TOKEN.findall(text.lower())


def written_tokens(text: str) -> list[tuple[str, int, int]]:
    """``(token as written, start, end)`` of every token of ``tokenize`` (same split, case kept, with its
    character offsets in ``text``)."""
    return [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def is_acronym(written: str) -> bool:
    """A name or span written in capitals: its letters (2 to 5) are all upper-case ("US", "U.S.", "WHO",
    "UAE"). Such a name stands for itself only where the text writes it in capitals too: "us", "who" and
    "it" are English words."""
    letters = [c for c in written if c.isalpha()]
    return 2 <= len(letters) <= 5 and all(c.isupper() for c in letters)


_LETTERS = str.maketrans({"ł": "l", "đ": "d", "ð": "d", "ø": "o", "æ": "ae", "œ": "oe", "ß": "ss", "ı": "i",
                          "þ": "th", "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "κ": "kappa",
                          "λ": "lambda", "μ": "mu", "µ": "mu"})
"""Letters NFKD does not decompose, written as English spellings write them ("złoty" → "zloty"), and the
Greek letters medicine writes in names, spelt out as names spell them ("IFN-α", "TNF-α", "β-blocker" →
"alpha", "beta")."""


_SHARP_BETA = re.compile(r"(?<![^\W\d_])ß(?![^\W\d_])")
"""A German sharp s standing alone ("ß-hCG", "ß-blocker"): medicine typed on German keyboards writes it
for a Greek beta; inside a word it is the German letter ("Straße")."""


_DIGRAPH = re.compile(r"(?<=[a-z])(?:ae(?=[a-z]{2})|oe(?!ing)(?=[aeiouy][a-z]|[b-df-hj-np-tv-z][aeiouy]|str))"
                      r"|\b(?:ae(?!r)|oe)(?=[a-z]{4})")
"""The British *ae*/*oe* of a word, inside it or starting it ("haemorrhage", "hypernatraemia", "oedema",
"oesophagus"), followed by two letters or more; not the Greek *aer-* ("aerial", "aerobic"). Inside a word
*oe* is the Latin and Greek one only before a vowel, a consonant and a vowel, or the *str* of *oestrus*
("seborrhoeic", "foetus", "coeliac", "amoeba", "allyloestrenol"): not
the German *oe* (ö) of a name before two consonants ("Noether" is not "nether", "Goethe", "Roentgen",
"Boerhaave"), an English compound's ("coefficient", "poetry"), nor a verb's in -oe before -ing ("boeing"
is not "being", "canoeing")."""


_RE_END = re.compile(r"(?<=[a-z][a-ln-z])([bt])re\b")
"""The British *-tre*/*-bre* ending of a word of 5 letters or more ("goitre", "centre", "litre", "fibre",
"calibre"), spelt *-ter*/*-ber* the American way; not *-mbre* ("timbre" is no "timber"), *-cre*
("massacre", "lucre") nor *-gre* ("ogre"), which American spelling keeps."""

_OUR_END = re.compile(r"(?<=[a-z]{2}[bdgilmnr])our\b")
"""The British *-our* ending of a word of 6 letters or more ("tumour", "colour", "behaviour", "labour"),
spelt *-or*; not after *t* or *v* ("contour", "detour", "devour") nor in shorter words ("flour", "hour")."""


def fold_key(key: str) -> str:
    """A phrase key without accents (NFKD, combining marks dropped: "zürich" → "zurich"), spelt the
    American way (*ae*/*oe* → *e* in words of 6 letters or more: "hypernatraemia" → "hypernatremia",
    "oedema" → "edema"; *-tre*/*-bre* → *-ter*/*-ber*, "goitre" → "goiter", :data:`_RE_END`; *-our* →
    *-or*, "tumour" → "tumor", :data:`_OUR_END`), with a run of single letters joined ("u s" → "us", the
    key of "U.S.")."""
    if not key.isascii():
        if "ß" in key:  # "ß-hCG": the German letter standing for a beta
            key = _SHARP_BETA.sub("beta", key)
        key = "".join(c for c in unicodedata.normalize("NFKD", key.translate(_LETTERS))
                      if not unicodedata.combining(c))
    if "ae" in key or "oe" in key:
        key = " ".join(_DIGRAPH.sub("e", t) if len(t) >= 6 else t for t in key.split(" "))
    if "re" in key:
        key = _RE_END.sub(r"\1er", key)
    if "our" in key:
        key = _OUR_END.sub("or", key)
    if " " in key and any(len(t) == 1 for t in key.split(" ")):
        key = _join_letters(key.split(" "))
    return key


def _join_letters(toks: list[str]) -> str:
    """Tokens joined by spaces, each run of single letters joined without ("w h o" → "who")."""
    out: list[str] = []
    run = False  # whether out[-1] is a run of single letters
    for t in toks:
        single = len(t) == 1 and t.isalpha()
        if single and run:
            out[-1] += t
        else:
            out.append(t)
        run = single
    return " ".join(out)


def phrase_key(text: str) -> str:
    """The lookup key of a label or a span: its tokens joined by single spaces."""
    low = text.lower()
    if _CLEAN.fullmatch(low):
        return low
    return " ".join(_TOKEN.findall(low))


_SEPARATORS = re.compile(r"(?:[^\w\n]|_)+")
_ASCII_SEPARATORS = re.compile(r"[^a-z0-9\n]+")


def phrase_keys(labels: Sequence[str]) -> list[str]:
    """``phrase_key`` of many labels at once (one regex pass over the joined text)."""
    if not labels:
        return []
    blob = "\n".join(labels)
    if blob.count("\n") != len(labels) - 1:  # a label holding a newline
        return [phrase_key(x) for x in labels]
    blob = blob.lower()
    # fast path for ASCII text: a plain character class
    blob = _ASCII_SEPARATORS.sub(" ", blob) if blob.isascii() else _SEPARATORS.sub(" ", blob)
    # separators are single spaces now: at most one on either side of a line break
    return blob.replace(" \n", "\n").replace("\n ", "\n").strip(" ").split("\n")


_DETERMINERS = frozenset({
    "a", "an", "the", "this", "that", "these", "those", "my", "your", "his", "her", "its", "our", "their",
    "some", "any", "each", "every", "no",
})


def determiners() -> frozenset[str]:
    """Articles, demonstratives and possessives: a grounded span never starts with one."""
    return _DETERMINERS


@cache
def stopwords() -> frozenset[str]:
    """The built-in English stop-word list (``kgwise/data/stopwords_en.txt``)."""
    text = resources.files("kgwise").joinpath("data/stopwords_en.txt").read_text(encoding="utf-8")
    return frozenset(w.strip() for w in text.splitlines() if w.strip() and not w.startswith("#"))


@cache
def common_words() -> frozenset[str]:
    """Common English words (``kgwise/data/common_words_en.txt``, made by :func:`common_words_from_wordnet`
    from WordNet 3.0): a word of running text that is one of these is never linked to a node by a part of
    its name nor by edit distance ("wall" is not the Great Wall of China, "hungry" not Hungary)."""
    text = resources.files("kgwise").joinpath("data/common_words_en.txt").read_text(encoding="utf-8")
    return frozenset(w for w in text.splitlines() if w and not w.startswith("#"))


def read_wordnet(wordnet_dir: str | Path, pos: str, parse: Callable[[bool, list[str]], None]) -> None:
    """Give ``parse`` every entry of WordNet 3.0's ``data.POS`` then ``index.POS`` (licence lines skipped):
    whether it is a data line, and its fields split on white space. A missing file, or a line ``parse``
    cannot read (``IndexError``/``ValueError``), raises ``DataError`` naming the file and line."""
    root = Path(wordnet_dir)
    for path, is_data in ((root / f"data.{pos}", True), (root / f"index.{pos}", False)):
        if not path.is_file():
            raise DataError("WordNet file not found", path)
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if line.startswith(" "):
                    continue
                try:
                    parse(is_data, line.split())
                except (IndexError, ValueError) as exc:
                    raise DataError(f"not a WordNet {'data' if is_data else 'index'} line", path,
                                    lineno) from exc


def common_words_from_wordnet(wordnet_dir: str | Path) -> list[str]:
    """The single-word WordNet 3.0 lemmas (letters only) that a sense-tagged corpus uses (``tagsense_cnt``
    ≥ 1 in an ``index.*`` file) and that some synset writes in lower case (so "mississippi", written
    only "Mississippi", is not common; "china" and "turkey" are), sorted."""
    lower: set[str] = set()
    tagged: set[str] = set()

    def parse(is_data: bool, f: list[str]) -> None:
        if is_data:
            lower.update(w for w in (f[4 + 2 * k].split("(")[0] for k in range(int(f[3], 16))) if w.islower())
        elif int(f[5 + int(f[3])]) >= 1 and f[0].isalpha():
            tagged.add(f[0])

    for pos in ("noun", "verb", "adj", "adv"):
        read_wordnet(wordnet_dir, pos, parse)
    return sorted(tagged & lower)


def load_exceptions(wordnet_dir: str | Path) -> dict[str, str]:
    """Irregular inflections ``form -> lemma`` from WordNet's ``{noun,verb,adj,adv}.exc`` files.

    The first lemma listed for a form wins; files that are absent are skipped, a malformed line raises
    ``DataError`` naming file and line.
    """
    out: dict[str, str] = {}
    root = Path(wordnet_dir)
    for pos in ("noun", "verb", "adj", "adv"):
        path = root / f"{pos}.exc"
        if not path.is_file():
            continue
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                parts = line.split()
                if not parts:
                    continue
                if len(parts) < 2:
                    raise DataError("exception line needs a form and a lemma", path, lineno)
                out.setdefault(parts[0].replace("_", " "), parts[1].replace("_", " "))
    return out


class Lemmatiser:
    """Map an inflected English word to a lemma known to ``vocabulary`` (morphy-style, rule-based).

    ``lemma(w)``: the exception-list lemma if it is in the vocabulary; else the first suffix-rule candidate
    (with consonant un-doubling, ``running -> run``) that is in the vocabulary; else ``w`` itself.
    Results are memoised.
    """

    def __init__(self, vocabulary: Collection[str], exceptions: Mapping[str, str] | None = None) -> None:
        self._vocab = vocabulary
        self._exc = dict(_BUILTIN_EXCEPTIONS)
        if exceptions:
            self._exc.update(exceptions)
        self._memo: dict[str, str] = {}

    def lemma(self, word: str) -> str:
        hit = self._memo.get(word)
        if hit is None:
            hit = self._memo[word] = self._lemma(word)
        return hit

    def _lemma(self, word: str) -> str:
        exc = self._exc.get(word)
        if exc is not None and exc in self._vocab:
            return exc
        for cand in self._candidates(word):
            if cand in self._vocab:
                return cand
        return word

    @staticmethod
    def _candidates(word: str) -> Iterable[str]:
        for suffix, repl in _RULES:
            if len(word) > len(suffix) + 1 and word.endswith(suffix):
                stem = word[: -len(suffix)]
                yield stem + repl
                if (not repl and len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in _VOWELS
                        and stem[-1] not in "sl"):
                    yield stem[:-1]  # running -> runn -> run, stopped -> stopp -> stop
