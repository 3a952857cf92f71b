"""Relation templates: how one KG edge ``(head, relation, tail)`` reads as an English clause (format F_s).

Relation names are looked up after :func:`relation_key` normalisation (lower case, letters and digits
only), so ``AtLocation``, ``at_location`` and ``atlocation`` share a template. Covered: ConceptNet's 17
KagNet-merged relations (and the raw ConceptNet names they merge), WordNet's pointer relations (between
verb synsets, hypernymy is troponymy and reads "wolf is a way to eat"), and the DDB relations of the
QA-GNN MedQA graph (by name and by raw relation code). Anything else falls back to
``"X <relation words> Y"``. :func:`mirror_phrase` names the relation that states an edge's fact from
its tail (WordNet keeps both ``dog hypernym canine`` and ``canine hyponym dog``).
"""

from __future__ import annotations

import re

__all__ = ["RELATION_PHRASES", "clause", "clean_label", "mirror_phrase", "relation_key", "relation_phrase"]

_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_SYNSET = re.compile(r"^(?P<word>.+)\.(?P<pos>[nvasr])\.(?P<num>\d{2})$")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")

# phrase placed between head and tail: "{head} {phrase} {tail}"
_CONCEPTNET: dict[str, str] = {
    "atlocation": "is found at",
    "locatednear": "is located near",
    "capableof": "is capable of",
    "causes": "causes",
    "causesdesire": "makes you want",
    "motivatedbygoal": "is motivated by",
    "createdby": "is created by",
    "desires": "wants",
    "antonym": "is the opposite of",
    "distinctfrom": "is distinct from",
    "hascontext": "is used in the context of",
    "hasproperty": "has the property",
    "hassubevent": "involves",
    "hasfirstsubevent": "begins with",
    "haslastsubevent": "ends with",
    "hasprerequisite": "requires",
    "entails": "entails",
    "mannerof": "is a way of",
    "isa": "is a kind of",
    "instanceof": "is an instance of",
    "definedas": "is defined as",
    "madeof": "is made of",
    "notcapableof": "is not capable of",
    "notdesires": "does not want",
    "partof": "is part of",
    "hasa": "has",
    "relatedto": "is related to",
    "similarto": "is similar to",
    "synonym": "means the same as",
    "usedfor": "is used for",
    "receivesaction": "can be",
    "formof": "is a form of",
    "derivedfrom": "is derived from",
    "etymologicallyrelatedto": "is etymologically related to",
}

_WORDNET: dict[str, str] = {
    "insynset": "is a word for",
    "hypernym": "is a kind of",
    "instancehypernym": "is an instance of",
    "hyponym": "has the subtype",
    "instancehyponym": "has the instance",
    "memberholonym": "is a member of",
    "substanceholonym": "is a substance of",
    "partholonym": "is a part of",
    "membermeronym": "has the member",
    "substancemeronym": "contains the substance",
    "partmeronym": "has the part",
    "attribute": "has the attribute",
    "derivation": "is derived from the same word as",
    "domaintopic": "belongs to the topic",
    "memberofdomaintopic": "is the topic of",
    "domainregion": "belongs to the region",
    "memberofdomainregion": "is the region of",
    "domainusage": "is a usage of",
    "memberofdomainusage": "has the usage",
    "entailment": "entails",
    "cause": "causes",
    "alsosee": "is related to",
    "verbgroup": "is similar to",
    "participle": "is the participle of",
    "pertainym": "pertains to",
}

# between verb synsets WordNet's hypernym pointer is troponymy: "wolf.v.01 @ eat.v.01"
_WORDNET_VERB: dict[str, str] = {
    "hypernym": "is a way to",
    "hyponym": "has the more specific form",
}

# DDB (Disease Database + DrugBank) relations as merged in the QA-GNN MedQA graph; raw codes of
# ddb_relas.json in the same order: 0 1 2 3 4 6 10 12 16 17 18 20 26 30 233
_DDB_NAMES: tuple[tuple[str, str], ...] = (
    ("0", "belongs to the category of"),
    ("1", "is a category"),
    ("2", "may cause"),
    ("3", "is a subtype of"),
    ("4", "is a risk factor of"),
    ("6", "is associated with"),
    ("10", "may contraindicate"),
    ("12", "interacts with"),
    ("16", "belongs to the drug family of"),
    ("17", "belongs to the drug super-family of"),
    ("18", "is a vector for"),
    ("20", "may be allelic with"),
    ("26", "see also"),
    ("30", "is an ingredient of"),
    ("233", "may treat"),
)


def relation_key(relation: str) -> str:
    """Normalised lookup key: camel case split, lower case, only letters and digits."""
    return _NON_ALNUM.sub("", _CAMEL.sub(" ", relation).lower())


def _ddb_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for code, phrase in _DDB_NAMES:
        table[code] = phrase
        table[f"ddb{code}"] = phrase
        table[f"rel{code}"] = phrase
        table[relation_key(phrase)] = phrase
    table["isaningradientof"] = "is an ingredient of"
    table["belongstodrugsuperfamily"] = "belongs to the drug super-family of"
    table["isavector"] = "is a vector for"
    return table


RELATION_PHRASES: dict[str, str] = {**_CONCEPTNET, **_WORDNET, **_ddb_table()}
"""Normalised relation key → the phrase between head and tail."""


_INVERSE_PAIRS = (
    ("is a kind of", "has the subtype"),
    ("is an instance of", "has the instance"),
    ("is a member of", "has the member"),
    ("is a substance of", "contains the substance"),
    ("is a part of", "has the part"),
    ("belongs to the topic", "is the topic of"),
    ("belongs to the region", "is the region of"),
    ("is a usage of", "has the usage"),
)
_SYMMETRIC = (
    "is the opposite of", "is derived from the same word as", "is related to", "is similar to",
    "means the same as", "is distinct from", "is located near", "is etymologically related to",
    "interacts with", "may be allelic with",
)
_MIRROR: dict[str, str] = {
    **{a: b for a, b in _INVERSE_PAIRS}, **{b: a for a, b in _INVERSE_PAIRS}, **{p: p for p in _SYMMETRIC}
}


def mirror_phrase(relation: str) -> str | None:
    """The phrase of the relation that states ``relation``'s fact read from tail to head: ``hyponym`` for
    ``hypernym``, itself for a symmetric relation; ``None`` when there is none."""
    return _MIRROR.get(relation_phrase(relation))


def relation_phrase(relation: str, verb: bool = False) -> str:
    """The phrase for ``relation`` (``verb``: between verb synsets); unknown ones read as their words
    (``has_part`` → ``has part``)."""
    key = relation_key(relation)
    found = (_WORDNET_VERB.get(key) if verb else None) or RELATION_PHRASES.get(key)
    if found is not None:
        return found
    words = " ".join(_NON_ALNUM.sub(" ", _CAMEL.sub(" ", relation).lower()).split())
    return words or "is linked to"


def clean_label(label: str) -> str:
    """A node label as words: WordNet synset names ``dog.n.01`` → ``dog``, ``_`` → space."""
    m = _SYNSET.match(label)
    if m:
        label = m.group("word")
    return " ".join(label.replace("_", " ").split())


def clause(head: str, relation: str, tail: str) -> str:
    """``"{head} {phrase} {tail}"`` with cleaned labels (verb phrases when ``head`` is a verb synset)."""
    m = _SYNSET.match(head)
    verb = m is not None and m.group("pos") == "v"
    return f"{clean_label(head)} {relation_phrase(relation, verb)} {clean_label(tail)}"
