"""WordNet 3.0 database files (``data.*``/``index.*``, format of ``man 5 wndb``) → ``CSRGraph``.

Nodes are synsets (label ``lemma.pos.NN`` as NLTK names them, text = the full gloss, aliases = the synset's
words) followed by lemmas (label = the word, lower case, ``_`` as space). ``NN`` is the synset's position in
the first lemma's list in ``index.*``; satellites (``.s.``) count in ``index.adj``'s list, as classic NLTK
releases name them (e.g. ``good.s.06``; NLTK 3.10 renumbers 1,518 satellites among satellites only). Every
lemma has an ``in_synset`` edge to each synset it belongs to (with ``senses="frequent"``, to its frequent
ones). Each pointer is stored once, in the direction the file lists it, from the synset whose line holds it:
semantic pointers (source/target ``0000``) link synsets, lexical pointers (antonym, derivation, …) link the
two lemmas they name. Lexical pointers between two senses of the same word string (e.g. ``walk`` the noun
``+`` ``walk`` the verb) would be self-loops in the part-of-speech-free lemma layer and are dropped.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import numpy as np

from kgwise.errors import DataError
from kgwise.kg.csr import CSRGraph
from kgwise.kg.loaders._common import numbered_lines, require_dir, require_file

__all__ = ["IN_SYNSET", "POINTER_RELATIONS", "SENSES", "load_wordnet"]

IN_SYNSET = "in_synset"
"""Relation of the lemma → synset membership edges."""

SENSES = ("all", "frequent")
"""Choices of :func:`load_wordnet`'s ``senses``: which ``in_synset`` edges a word keeps."""

POINTER_RELATIONS: dict[str, str] = {
    "!": "antonym",
    "@": "hypernym",
    "@i": "instance_hypernym",
    "~": "hyponym",
    "~i": "instance_hyponym",
    "#m": "member_holonym",
    "#s": "substance_holonym",
    "#p": "part_holonym",
    "%m": "member_meronym",
    "%s": "substance_meronym",
    "%p": "part_meronym",
    "=": "attribute",
    "+": "derivation",
    ";c": "domain_topic",
    "-c": "member_of_domain_topic",
    ";r": "domain_region",
    "-r": "member_of_domain_region",
    ";u": "domain_usage",
    "-u": "member_of_domain_usage",
    "*": "entailment",
    ">": "cause",
    "^": "also_see",
    "$": "verb_group",
    "&": "similar_to",
    "<": "participle",
    "\\": "pertainym",
}
"""wndb pointer symbols → relation names (``\\`` is "pertains to noun" for adjectives and "derived from
adjective" for adverbs; both are pertainyms)."""

_FILES = (("noun", "n"), ("verb", "v"), ("adj", "a"), ("adv", "r"))
_POS_FILE = {"n": "n", "v": "v", "a": "a", "s": "a", "r": "r"}


def _strip_marker(word: str) -> str:
    """Drop an adjective's syntactic marker: ``galore(ip)`` → ``galore``."""
    if word.endswith(")"):
        cut = word.rfind("(")
        if cut > 0:
            return word[:cut]
    return word


def _read_index(
    path: Path, pos: str, senses: dict[tuple[str, str], list[int]], tagged: dict[tuple[str, str], int]
) -> None:
    """``senses[(lemma, pos)]`` = synset offsets in sense order (most frequent first) and ``tagged[(lemma,
    pos)]`` = how many of them the SemCor sense-tagged corpus has (``tagsense_cnt``), from one ``index.*``
    file."""
    for lineno, line in numbered_lines(path):
        if not line or line[0] == " ":
            continue
        f = line.split()
        try:
            n_synsets, n_ptrs = int(f[2]), int(f[3])
            start = 4 + n_ptrs + 2
            offsets = [int(x) for x in f[start : start + n_synsets]]
            n_tagged = int(f[start - 1])
        except (IndexError, ValueError) as exc:
            raise DataError(f"malformed index line ({exc})", path, lineno) from exc
        if f[1] != pos or len(offsets) != n_synsets:
            raise DataError(f"malformed index line: expected pos {pos!r} and {n_synsets} offsets", path,
                            lineno)
        senses[(f[0], pos)] = offsets
        tagged[(f[0], pos)] = n_tagged


def _frequent(
    order_of: dict[tuple[str, str], list[int]], n_tagged: dict[tuple[str, str], int], word: str, pos: str,
    offset: int,
) -> bool:
    """Whether ``offset`` is a SemCor-tagged sense of ``word`` (or its first sense where none is tagged);
    a word missing from the index keeps the edge."""
    order = order_of.get((word, pos))
    if order is None or offset not in order:
        return True
    return order.index(offset) < max(1, n_tagged[(word, pos)])


def load_wordnet(
    directory: str | Path, relations: Collection[str] | None = None, senses: str = "all"
) -> CSRGraph:
    """Load WordNet 3.0 from its database files in ``directory``.

    ``relations`` restricts the pointer relations kept (names from ``POINTER_RELATIONS``). ``senses``
    chooses the ``in_synset`` membership edges: ``"all"``, or ``"frequent"``: a word keeps its senses of a
    part of speech that the SemCor sense-tagged corpus has, or its first (most frequent) one where it has
    none, so ``go`` is no word for the drug ``adam``. Raises ``DataError`` naming the file and line of a
    malformed line.
    """
    if senses not in SENSES:
        raise ValueError(f"senses must be {' or '.join(map(repr, SENSES))}, got {senses!r}")
    root = require_dir(directory)
    keep = set(POINTER_RELATIONS.values()) if relations is None else set(relations)
    unknown = keep - set(POINTER_RELATIONS.values())
    if unknown:
        raise ValueError(f"unknown WordNet relation(s) {sorted(unknown)}")

    order_of: dict[tuple[str, str], list[int]] = {}
    n_tagged: dict[tuple[str, str], int] = {}
    for name, pos in _FILES:
        _read_index(require_file(root / f"index.{name}"), pos, order_of, n_tagged)

    rel_names = [IN_SYNSET, *dict.fromkeys(POINTER_RELATIONS.values())]
    rel_id = {r: i for i, r in enumerate(rel_names)}
    sym_rel = {s: (rel_id[r] if r in keep else -1) for s, r in POINTER_RELATIONS.items()}
    # a synset's key: code of its data file * 1e8 + offset (increasing in file order)
    file_code = {"n": 0, "v": 1, "a": 2, "s": 2, "r": 4}

    synset_keys: list[int] = []
    synset_labels: list[str] = []
    glosses: list[str] = []
    words_flat: list[str] = []  # lemma labels of every synset, concatenated in file order
    words_ptr: list[int] = [0]
    member: list[bool] = []  # senses="frequent": whether each entry of words_flat keeps its in_synset edge
    # pointers, one entry each, in file order
    p_src: list[int] = []
    p_sym: list[str] = []
    p_target: list[str] = []
    p_tpos: list[str] = []
    p_st: list[str] = []
    p_file: list[int] = []
    p_line: list[int] = []
    paths: list[Path] = []

    for name, pos in _FILES:
        path = require_file(root / f"data.{name}")
        paths.append(path)
        fcode = len(paths) - 1
        base = file_code[pos] * 100_000_000
        for lineno, line in numbered_lines(path):
            if not line or line[0] == " ":
                continue  # licence header
            body, bar, gloss = line.partition(" | ")
            f = body.split()
            try:
                offset = int(f[0])
                ss_type = f[2]
                n_words = int(f[3], 16)
                at = 4 + 2 * n_words
                words = f[4:at:2]
                n_ptrs = int(f[at])
                ptrs = f[at + 1 : at + 1 + 4 * n_ptrs]
            except (IndexError, ValueError) as exc:
                raise DataError(f"malformed synset line ({exc})", path, lineno) from exc
            if (not bar or len(ptrs) != 4 * n_ptrs or _POS_FILE.get(ss_type) != pos or n_words == 0
                    or len(words) != n_words):
                raise DataError("malformed synset line: counts, part of speech or gloss do not match", path,
                                lineno)
            if synset_keys and base + offset <= synset_keys[-1]:
                raise DataError(f"synset {offset:08d} out of order (data files are sorted by offset)", path,
                                lineno)
            words = [_strip_marker(w).replace("_", " ").lower() for w in words]
            first = words[0].replace(" ", "_")
            order = order_of.get((first, pos))
            if order is None or offset not in order:
                raise DataError(f"synset {offset:08d}: lemma {first!r} missing from index.{name}", path,
                                lineno)
            sid = len(synset_labels)
            synset_keys.append(base + offset)
            synset_labels.append(f"{first}.{ss_type}.{order.index(offset) + 1:02d}")
            glosses.append(gloss.strip())
            words_flat.extend(words)
            words_ptr.append(len(words_flat))
            if senses == "frequent":
                member.extend(_frequent(order_of, n_tagged, w.replace(" ", "_"), pos, offset) for w in words)
            if n_ptrs:
                p_src.extend([sid] * n_ptrs)
                p_sym.extend(ptrs[0::4])
                p_target.extend(ptrs[1::4])
                p_tpos.extend(ptrs[2::4])
                p_st.extend(ptrs[3::4])
                p_file.extend([fcode] * n_ptrs)
                p_line.extend([lineno] * n_ptrs)

    def fail(k: int, message: str) -> DataError:
        return DataError(message, paths[p_file[k]], p_line[k])

    # --- lemma layer: one node per distinct word string, ``in_synset`` edges to its synsets
    n_synsets = len(synset_labels)
    lemma_ids: dict[str, int] = {}
    word_node = np.fromiter(
        (lemma_ids.setdefault(w, n_synsets + len(lemma_ids)) for w in words_flat), np.int64, len(words_flat)
    )
    wptr = np.asarray(words_ptr, dtype=np.int64)
    word_synset = np.repeat(np.arange(n_synsets, dtype=np.int64), np.diff(wptr))

    # --- pointers, resolved with array operations
    try:
        rel = np.fromiter((sym_rel[s] for s in p_sym), np.int64, len(p_sym))
    except KeyError:
        k = next(i for i, s in enumerate(p_sym) if s not in sym_rel)
        raise fail(k, f"unknown pointer symbol {p_sym[k]!r}") from None
    try:
        tcode = np.fromiter((file_code[p] for p in p_tpos), np.int64, len(p_tpos))
        target = np.asarray(p_target, dtype=np.int64) + tcode * 100_000_000
    except (KeyError, ValueError):
        k = next(i for i, (t, p) in enumerate(zip(p_target, p_tpos, strict=True))
                 if p not in file_code or not t.isdigit())
        raise fail(k, f"malformed pointer target {p_target[k]} {p_tpos[k]}") from None
    keys = np.asarray(synset_keys, dtype=np.int64)
    tsid = np.searchsorted(keys, target).clip(max=len(keys) - 1)
    missing = np.flatnonzero(keys[tsid] != target)
    if missing.size:
        k = int(missing[0])
        raise fail(k, f"pointer to missing synset {p_target[k]} ({p_tpos[k]})")
    src = np.asarray(p_src, dtype=np.int64)
    semantic = np.fromiter((s == "0000" for s in p_st), bool, len(p_st))
    lex_idx = np.flatnonzero(~semantic)
    try:
        st = np.array([(int(p_st[k][:2], 16), int(p_st[k][2:], 16)) for k in lex_idx.tolist()],
                      dtype=np.int64).reshape(-1, 2)
    except ValueError:
        k = next(int(i) for i in lex_idx if len(p_st[i]) != 4 or not all(c in "0123456789abcdefABCDEF"
                                                                          for c in p_st[i]))
        raise fail(k, f"malformed pointer source/target {p_st[k]!r}") from None
    lsrc, ldst = src[lex_idx], tsid[lex_idx]
    n_words_of = np.diff(wptr)
    bad = (st[:, 0] < 1) | (st[:, 1] < 1) | (st[:, 0] > n_words_of[lsrc]) | (st[:, 1] > n_words_of[ldst])
    if bad.any():
        k = int(lex_idx[np.flatnonzero(bad)[0]])
        raise fail(k, f"lexical pointer {p_st[k]} names a word beyond its synset's words")
    lhead = word_node[wptr[lsrc] + st[:, 0] - 1]
    ltail = word_node[wptr[ldst] + st[:, 1] - 1]
    lrel = rel[lex_idx]
    sem_idx = np.flatnonzero(semantic)
    heads = np.concatenate([word_node, src[sem_idx], lhead])
    rels = np.concatenate([np.zeros(len(word_node), np.int64), rel[sem_idx], lrel])
    tails = np.concatenate([word_synset, tsid[sem_idx], ltail])
    keep_edge = (rels >= 0) & (heads != tails)  # filtered relations; same-word lexical self-loops
    if senses == "frequent":
        keep_edge[: len(word_node)] &= np.asarray(member, dtype=bool)

    labels = synset_labels + list(lemma_ids)
    texts = glosses + [""] * len(lemma_ids)
    aliases = zip(word_synset.tolist(), words_flat, strict=True)
    return CSRGraph.from_arrays(
        labels, rel_names, heads[keep_edge], rels[keep_edge], tails[keep_edge], texts, name="wordnet",
        aliases=aliases,
    )
