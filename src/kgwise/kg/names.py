"""What a graph's names allow beyond their exact spelling, computed once per name index: spellings
without accents, word order, distinctive parts of proper names, and which names stand only for capitals.

* **Folded keys** (:func:`~kgwise.kg.text.fold_key`): "Zurich", "Sao Paulo" and "U.S." reach "Zürich",
  "São Paulo" and the alias "US"; a name with a hyphen inside a word is reached closed up
  ("Membranoproliferative glomerulonephritis" reaches "Membrano-proliferative glomerulonephritis").
* **Word bags**: a name's content words, sorted ("korea south"), so "Korea, South" reaches "South Korea"
  and "Congo, Democratic Republic of the" its node; a bag two nodes share is dropped.
* **Partial names**: a word of a proper name of two or three words ("Mount Kilimanjaro", "Lake Titicaca",
  "Czech koruna": every other content word capitalised) that is no name itself, no common English word
  (:func:`~kgwise.kg.text.common_words`), at least 4 letters long and in the names of no other node
  reaches that node ("kilimanjaro", "titicaca", "koruna"); "table" never reaches "Table Mountain".
* **Names without their parenthesis or comma qualifier**: "Hypotonia (skeletal muscle)", "Pyloric
  stenosis (adult / acquired)", "Adrenalectomy, bilateral" are reached by "hypotonia", "pyloric stenosis"
  and "adrenalectomy" when no other node's name is, or when one of them is the *primary* one ("Lung
  cancer (primary)", not "Lung cancer (secondary)": an unqualified disease is the primary one) — a
  partial name too; so is an eponym's *disease* under its *syndrome* and the other way round, where no
  other node is so named ("Chediak-Higashi syndrome" reaches "Chediak-Higashi disease").
* **Synonym words**: the one-word names of one node ("Hemangioma", alias "Angioma"), each in no other
  node's one-word names, are one word: :meth:`kgwise.kg.grounding.Grounder._synonym` swaps them in a
  choice ("Cherry hemangioma" reaches "Cherry angioma").
* **Rare words**: each word in the names (less parenthesis and comma qualifier) of at most
  :data:`RARE_NODES` nodes, with those names, so a whole mention can reach a name that narrows it
  ("Alcohol withdrawal" → `Alcohol withdrawal syndrome`: :meth:`kgwise.kg.grounding.Grounder._containing`).
* **Kinds**: the nodes a general term names the kinds of, where it names no node itself: "Teratoma" →
  "Teratoma, ovary", "Teratoma, benign", "Teratoma, testicular"; "Burkholderia" → "Burkholderia cepacia",
  "Burkholderia pseudomallei"; "Galactosemia" → "Galactosaemia type 1", "Galactosaemia II"
  (:meth:`kgwise.kg.grounding.Grounder._kinds` links them all).
* **Capitals only**: an alias written in capitals ("US", "IT", "WHO", "UAE": :func:`~kgwise.kg.text.
  is_acronym`), or a label so written whose lower-case form is an English word, matches only a span
  written in capitals: "used", "us" and "who" never link the United States or the WHO.
* **Ambiguous aliases**: an alias key that names two or more nodes (and no label) links none of them: it
  is reported (``ambiguous``), not resolved by the order the names were read in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

from kgwise.kg.text import (
    common_words,
    fold_key,
    is_acronym,
    phrase_key,
    read_wordnet,
    stopwords,
    written_tokens,
)

__all__ = ["LATIN_NUMBER", "QUALIFIERS", "NameVariants", "another_count", "another_quantity", "bag_key",
           "body_words", "body_words_from_wordnet", "comma_qualifies", "derived_keys", "is_category",
           "latin_singulars", "names_a_state", "opposite_degree", "word_forms"]

RARE_NODES = 30
"""A word in the names of at most this many nodes is *rare*: the names a whole mention may narrow are looked
for among those of its rarest word. 30 reaches "immunodeficiency" (12 DDB nodes: "Human immunodeficiency
virus" → `HIV-1 disease`, whose name is "Human immunodeficiency virus 1") and bounds the names read per
mention (``kgwise.kg.grounding.MAX_HOLDERS`` decides which choices are too general)."""

PARTIAL_SCORE = 0.9
"""The score of a partial-name link: below an exact name (1.0), so a ``[linking] min_score`` above 0.9
keeps whole names only."""


QUALIFIERS = frozenset({
    "acute", "chronic", "previous", "prior", "recent", "history", "mild", "moderate", "severe",
    "high", "low", "increased", "decreased", "elevated", "raised", "reduced", "excess", "excessive",
    "level", "levels", "serum", "plasma", "concentration", "concentrations",
    "intoxication", "overdose", "poisoning", "toxicity", "infection", "infections",
    "therapy", "treatment", "release", "secretion",
    # how a substance is given: its route, its form, the giving
    "oral", "topical", "inhaled", "intravenous", "intramuscular", "subcutaneous", "ointment", "cream",
    "gel", "lotion", "drops", "tablet", "tablets", "capsule", "capsules", "injection", "patch", "spray",
    "supplement", "supplements", "supplementation", "administer", "administration",
    # how far a disease has spread
    "disseminated", "generalized", "generalised", "localized", "localised", "widespread",
    # giving, keeping or stopping a treatment
    "continue", "continued", "start", "begin", "initiate", "resume", "monotherapy", "discontinue",
    "discontinued", "stop",
    # changing a dose
    "dose", "doses", "dosage", "daily", "reduce", "reducing", "increase", "increasing", "taper", "tapering",
    # whether a condition is known
    "undiagnosed", "untreated", "suspected", "presumed", "confirmed",
    # the salt a drug is given as
    "succinate", "tartrate", "hydrochloride", "mesylate", "maleate", "besylate", "fumarate", "citrate"})
"""Words that state the degree, time, measure or course of a concept rather than the concept itself
("Ethanol *intoxication*", "*Serum* iron *level*", "*Previous* radiation *therapy*", "Aspergillus fumigatus
*infection*", "*Disseminated* tuberculosis"), or how a substance is given ("*Inhaled* beclomethasone",
"Erythromycin *ointment*", "*Supplementation* with vitamin D", "*Continue* metformin *monotherapy*",
"*Discontinue* methimazole", "*Reducing daily* insulin *dose*", "Metoprolol *succinate*": the salt,
not one that names a substance of its own, as sulfate, phosphate or chloride do), or whether a condition
is known or treated ("*Undiagnosed* pneumonia"). A choice's contained name is weighed without them, and
its core (what the embedding fallback reads) drops them: the labelling rules of the MedQA→DDB link set
(``tests/data/links/README.md``: a concept plus modifiers is that concept; a substance with a state, level or
process is the substance)."""

_HIGHER = frozenset({"high", "increased", "elevated", "raised", "excess", "excessive"})
_LOWER = frozenset({"low", "decreased", "reduced"})
_STATES = _HIGHER | _LOWER | {"normal", "deficiency", "deficient", "absent", "absence", "lengthened",
                               "shortened", "prolonged", "prolongation", "shortening"}
"""Words that turn a name into a state of the concept it holds ("Pyruvate kinase *deficiency*",
"Reticulocyte count *low*", "PR interval *lengthened*", "*Normal* anion gap metabolic acidosis")."""
_LOOKALIKE = ("pseudo", "over", "under")
"""Prefixes of a condition that resembles another or is a degree of it, its stem ("pseudoparkinsonism" is
parkinsonism brought on by drugs, "oversedation" a sedation)."""


def derived_keys(toks: Sequence[str]) -> list[str]:
    """Names medicine writes a raised or lowered quantity, an inflamed organ or a look-alike condition
    as, by word formation: "High triglyceride levels" → "hypertriglyceridemia", "Aldosterone excess" →
    "hyperaldosteronism", "Low calcium" → "hypocalcemia" (*hyper-*/*hypo-* and *-emia*/*-aemia*/*-ism*
    joined to a content word, its final *e*, *ium* or *um* dropped; a cell, *-cyte*, raised or lowered is
    *-cytosis* or *-cytopenia*: "Increased reticulocyte count" → "reticulocytosis"; or named as a state,
    "Increased lactate concentration" → "lactate levels raised"); "Peritoneal
    inflammation" → "peritonitis" (an adjective's stem, *-eal*/*-al*/*-ic*/*-ous* dropped, and *-itis*);
    "Pseudoparkinsonism" → "parkinsonism", "Oversedation" → "sedation" (a word less one of
    :data:`_LOOKALIKE` prefixes). Tried in that order; ``[]`` when none applies."""
    words = set(toks)
    stop = stopwords()
    content = [t for t in toks if t not in stop and t not in QUALIFIERS and t.isalpha() and len(t) >= 4]
    out: list[str] = []
    prefix = "hyper" if words & _HIGHER else "hypo" if words & _LOWER else ""
    for t in content if prefix else ():
        stems = dict.fromkeys([t, t.removesuffix("e"), t.removesuffix("ium"), t.removesuffix("um")])
        out += [prefix + s + suffix for s in stems for suffix in ("emia", "aemia", "ism")]
    for t in content if prefix else ():  # DDB's names of a state: "Lactate levels raised"
        out.append(f"{t} levels {'raised' if prefix == 'hyper' else 'low'}")
    for t in content if prefix else ():  # "Increased reticulocyte count" → "reticulocytosis"
        stem = t.removesuffix("s")
        if stem.endswith("cyte") and len(stem) > 6:
            out.append(stem[:-1] + ("osis" if prefix == "hyper" else "openia"))
    if words & {"inflammation", "inflamed"}:
        for t in content:
            for end in ("eal", "al", "ic", "ous"):
                if t.endswith(end) and len(t) - len(end) >= 3:
                    out.append(t[:-len(end)] + "itis")
                    break
    if len(content) == 1:
        out += [content[0][len(p):] for p in _LOOKALIKE
                if content[0].startswith(p) and len(content[0]) - len(p) >= 6]
    return out


_FORMS = (("astic", "asm"), ("omatous", "omatosis"), ("omatous", "oma"), ("tic", "sis"), ("ic", "ia"),
          ("ic", "y"), ("ist", "ism"))
"""Adjective and noun endings of one medical stem: "spastic"/"spasm", "hamartomatous"/"hamartomatosis",
"adenomatous"/"adenoma", "psychotic"/"psychosis", "hypoxic"/"hypoxia", "atrophic"/"atrophy" (the first
ending that fits a word is used, either way); and an action and its agent, "antagonism"/"antagonist": a
mechanism is named for its drug class ("Muscarinic antagonism" → `Muscarinic antagonists`, the
MedQA→DDB labelling rules)."""


_ONE_WAY = frozenset({"y", "oma"})
"""Noun endings not turned into adjectives: an *-oma* noun stays the term it is ("Luteoma of pregnancy" is a
luteoma; "adenomatous" is still "adenoma")."""


def word_forms(toks: Sequence[str]) -> list[list[str]]:
    """``toks`` with one word in its other form (:data:`_FORMS`, words of 6 letters or more, adjective to
    noun and noun to adjective): "History of psychosis" → "history of psychotic" (DDB: `Psychotic
    disorders`), "Spastic cricopharyngeal muscle" → "spasm cricopharyngeal muscle" (`Cricopharyngeal
    spasm`). For a whole choice no name matches as written."""
    out: list[list[str]] = []
    for i, t in enumerate(toks):
        if len(t) < 6 or not t.isalpha():
            continue
        alts = []
        adjective = next((a for a, _ in _FORMS if t.endswith(a)), None)
        if adjective is not None:
            alts += [t[:-len(a)] + n for a, n in _FORMS if a == adjective]
        noun = next((n for _, n in _FORMS if t.endswith(n) and n not in _ONE_WAY), None)
        if noun is not None:
            alts += [t[:-len(n)] + a for a, n in _FORMS if n == noun]
        out += [[*toks[:i], alt, *toks[i + 1:]] for alt in alts]
    return out


LATIN_NUMBER = (("us", "i"), ("um", "a"), ("a", "ae"), ("is", "es"), ("ex", "ices"), ("ix", "ices"),
                ("on", "a"))
"""Latin and Greek singular and plural endings ("bacillus"/"bacilli", "bacterium"/"bacteria",
"vertebra"/"vertebrae", "testis"/"testes", "phenomenon"/"phenomena")."""


def latin_singulars(word: str) -> list[str]:
    """The Latin or Greek singulars a plural of 5 letters or more may have (:data:`LATIN_NUMBER`):
    "emboli" → "embolus", "bacteria" → "bacterium", "vertebrae" → "vertebra"; ``[]`` for a shorter word."""
    if len(word) < 5 or not word.isalpha():
        return []
    return [word[:-len(b)] + a for a, b in LATIN_NUMBER if word.endswith(b) and len(word) - len(b) >= 3]


_COUNT_PREFIXES = ("mono", "di", "tri", "tetra", "penta", "hexa", "bi", "uni")
"""Number prefixes of chemistry and anatomy ("diphosphate", "triphosphate", "biceps")."""


def another_count(mention: str, name: str) -> bool:
    """Whether ``name`` is ``mention`` with another count in one word: a number, or a number prefix of
    chemistry ("Adenosine diphosphate" is no "Adenosine triphosphate", "Trisomy 13" no "Trisomy 18"). A
    paraphrase is another compound then, however close its embedding."""
    a, b = phrase_key(mention).split(" "), phrase_key(name).split(" ")
    pairs = [(x, y) for x, y in zip(a, b, strict=False) if x != y]
    if len(a) != len(b) or len(pairs) != 1:
        return False
    x, y = pairs[0]
    if x.isdigit() and y.isdigit():
        return True

    def bare(w: str) -> str:
        return next((w[len(p):] for p in _COUNT_PREFIXES if w.startswith(p) and len(w) - len(p) >= 4), w)

    return bare(x) == bare(y) and bare(x) != x and bare(y) != y


_OPPOSITE_PREFIXES = (("hyper", "hypo"), ("macro", "micro"), ("tachy", "brady"), ("poly", "oligo"))
"""Prefixes of opposite degree ("hyperchromic"/"hypochromic", "macrocytic"/"microcytic")."""


_QUANTITY_ENDS = ("aemia", "emia", "uria")
"""Endings of a word naming the level of a quantity in blood or urine ("hypokalemia", "glycosuria")."""


def another_quantity(x: str, y: str) -> bool:
    """Whether two words name the level of different quantities: the same *hyper-*/*hypo-* prefix and
    :data:`_QUANTITY_ENDS` ending around another stem ("hypovolemia" is no slip for "hypokalemia",
    "hyperkalemia" none for "hypercalcemia", though one or two letters apart)."""
    for p in ("hyper", "hypo"):
        for end in _QUANTITY_ENDS:
            if x.startswith(p) and y.startswith(p) and x.endswith(end) and y.endswith(end):
                return x[len(p):-len(end)] != y[len(p):-len(end)]
    return False


def opposite_degree(x: str, y: str) -> bool:
    """Whether words ``x`` and ``y`` differ in a prefix of opposite degree (:data:`_OPPOSITE_PREFIXES`):
    "hyperchromic" is no slip for "hypochromic", whatever its edit similarity (0.91); the opposite, not
    the same word."""
    return any(u.startswith(a) and v.startswith(b) for a, b in _OPPOSITE_PREFIXES
               for u, v in ((x, y), (y, x)))


_BODY_LEXFILE = "08"
"""WordNet's lexicographer file of body parts, substances and genes (``noun.body``)."""
_BODY_ROOTS = frozenset({"body_part", "somatic_cell"})
"""The synsets (by their first word) whose hyponyms are parts of the body: organs, tissues, vessels, cells
(not hormones, fluids or genes, which ``noun.body`` files too)."""


def body_words_from_wordnet(wordnet_dir: str | Path) -> list[str]:
    """The WordNet 3.0 noun lemmas whose first (most frequent) sense is a part of the body: in ``noun.body``
    and below one of :data:`_BODY_ROOTS` ("vulva", "fallopian tube", "hair follicle", "artery",
    "erythrocyte"; not "tube" or "cell", whose first senses are other things, nor "glucagon" or "blood"),
    words joined by a space, sorted."""
    synsets: dict[str, tuple[str, str, list[str]]] = {}  # offset → lexicographer file, first word, hypernyms
    first: dict[str, str] = {}

    def parse(is_data: bool, f: list[str]) -> None:
        if is_data:
            at = 5 + 2 * int(f[3], 16)
            ptrs = f[at:at + 4 * int(f[at - 1])]
            hypernyms = [ptrs[i + 1] for i in range(0, len(ptrs), 4) if ptrs[i] in ("@", "@i")]
            synsets[f[0]] = (f[1], f[4], hypernyms)
        else:
            first[f[0]] = f[6 + int(f[3])]

    read_wordnet(wordnet_dir, "noun", parse)

    def below_root(offset: str) -> bool:
        seen: set[str] = set()
        todo = [offset]
        while todo:
            o = todo.pop()
            if o in seen or o not in synsets:
                continue
            seen.add(o)
            if synsets[o][1] in _BODY_ROOTS:
                return True
            todo += synsets[o][2]
        return False

    return sorted(w.replace("_", " ") for w, o in first.items()
                  if o in synsets and synsets[o][0] == _BODY_LEXFILE and below_root(o))


@cache
def body_words() -> frozenset[str]:
    """Parts of the body (``kgwise/data/body_words_en.txt``, made by :func:`body_words_from_wordnet`)."""
    text = resources.files("kgwise").joinpath("data/body_words_en.txt").read_text(encoding="utf-8")
    return frozenset(w for w in text.splitlines() if w and not w.startswith("#"))


_CATEGORY_HEADS = frozenset({"conditions", "infections", "diseases"})
"""The plural heads of DDB's classes of conditions."""


def is_category(label: str) -> bool:
    """Whether a node labelled ``label`` is a class of conditions rather than one: DDB files its nodes under
    such classes, named in the plural — "Inflammatory conditions" (alias "Inflammation"), "Neoplastic
    conditions", "Infections", "Viruses and viral diseases" (a label whose last word is "conditions", a
    bare "Infections" or "Diseases", or "… and … diseases/infections"). The MedQA→DDB labelling rules
    never take one for a narrower mention ("Transmural inflammation" is no `Inflammatory conditions`): no
    name inside a mention links one (:meth:`kgwise.kg.grounding.Grounder._category`)."""
    words = phrase_key(label).split(" ")
    last = words[-1]
    return last == "conditions" or (last in _CATEGORY_HEADS and (len(words) == 1 or "and" in words))


def names_a_state(mention_key: str, name: str) -> bool:
    """Whether ``name`` is a state of what the mention names: it holds every content word of the mention
    (plurals aside) and adds one of :data:`_STATES` the mention does not have — "Pyruvate kinase" is no
    "Pyruvate kinase deficiency", "Erythrocyte sedimentation rate" no "Erythrocyte sedimentation rate
    raised"; "Low serum potassium" may be "Potassium levels low (plasma or serum)"."""
    stop = stopwords()

    def words(text: str) -> set[str]:
        return {w[:-1] if len(w) > 3 and w.endswith("s") else w
                for w in fold_key(phrase_key(text)).split(" ") if w and w not in stop}

    held, named = words(mention_key), words(name)
    return bool(held) and held <= named and bool((named - held) & _STATES)


_ADJECTIVE_ENDS = ("al", "ar", "ary", "ac", "ic", "ous", "ed", "ive", "ant", "ent", "oid", "ian", "ile",
                   "ory")
"""Endings of adjectives ("bilateral", "autosomal dominant", "recessive", "acquired")."""


def _head_part(name: str) -> str:
    """A name without its trailing parenthesis or the qualifier after its first comma ("Hypotonia (skeletal
    muscle)", "Thrombocytosis, autosomal dominant" → "Hypotonia", "Thrombocytosis"), else the name."""
    cut = name.index("(") if name.rstrip().endswith(")") and "(" in name else name.find(", ")
    return name[:cut] if cut > 0 else name


def comma_qualifies(text: str) -> bool:
    """Whether ``text`` has a comma part and it only qualifies what comes before it (:func:`_qualified`:
    "Gastric adenocarcinoma, intestinal type"), so that the part before the comma is the concept."""
    return ", " in text and not text.rstrip().endswith(")") and _qualified(text)


def _qualified(name: str) -> bool:
    """Whether what :func:`_head_part` cuts off a name qualifies it: a parenthesis, or after a comma only
    adjectives (:data:`_ADJECTIVE_ENDS`), :data:`QUALIFIERS` or a type number ("Adrenalectomy, bilateral",
    "Thrombocytosis, autosomal dominant"); "Ligation, fallopian tube" names the ligation of a site, so
    "Ligation" is not that name without its qualifier."""
    if name.rstrip().endswith(")") and "(" in name:
        return True
    rest = name[name.find(", ") + 2:].lower().replace(",", " ").split()
    return all(w in QUALIFIERS or w.endswith(_ADJECTIVE_ENDS) or w.isdigit() or w in _QUALIFYING
               for w in rest)


_QUALIFYING = frozenset({"type", "male", "female", "human"})
"""Words after a name's comma that qualify it besides adjectives: a type, a sex or the species it comes
from ("Condoms, male", "DNase, human")."""

_HYPHENATED = re.compile(r"(?<=[^\W\d_]{3})-(?=[^\W\d_]{3})")
"""A hyphen inside a word, between two runs of three letters or more ("Membrano-proliferative")."""


def _closed_hyphens(name: str) -> str:
    """The folded key of ``name`` with each hyphen inside a word closed up ("Membrano-proliferative
    glomerulonephritis" → "membranoproliferative glomerulonephritis"), or ``""`` when it has none: medicine
    writes such compounds either way, as a mention's hyphenated prefix is closed up
    (``kgwise.kg.grounding._closed_prefixes``)."""
    if "-" not in name:
        return ""
    closed = _HYPHENATED.sub("", name)
    return fold_key(phrase_key(closed)) if closed != name else ""


_SWAPPED_HEADS = ("syndrome", "disease")
"""Heads an eponymous name takes either way ("Chediak-Higashi disease", "… syndrome")."""


def _other_heads(key: str) -> list[str]:
    """``key`` (folded) with its last word, one of :data:`_SWAPPED_HEADS` after two other words or more
    (an eponym of two names, "Chediak-Higashi"), in the other form; ``[]`` for any other key. Two nodes
    so named ("Cushing disease", "Cushing syndrome") keep their own names, and a swapped key two nodes
    share is dropped."""
    words = key.split(" ")
    if len([w for w in words[:-1] if len(w) > 1]) < 2 or words[-1] not in _SWAPPED_HEADS:
        return []
    return [" ".join([*words[:-1], h]) for h in _SWAPPED_HEADS if h != words[-1]]


_EPITHET_ENDS = ("a", "ae", "e", "i", "is", "um", "us")
"""Endings of a Latin species epithet ("cepacia", "pseudomallei", "aureus", "urealyticum"): a capitalised
word and such a lower-case one are a genus and its species; "Opioid antagonists" is no species."""

_ROMAN = frozenset({"i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x"})
"""Roman type numbers ("Galactosaemia II")."""


def _genus(name: str) -> str:
    """The folded key of the general term a name names a kind of, or ``""``: the name before its comma or
    parenthesis ("Teratoma, ovary", "Teratoma, benign"), before a type number or letter ("Galactosaemia
    type 1", "Galactosaemia II"), or the genus of a binomial ("Burkholderia cepacia": a capitalised word
    and a lower-case Latin epithet, :data:`_EPITHET_ENDS`, that is no common English word)."""
    part = _head_part(name)
    if part != name:
        return fold_key(phrase_key(part))
    words = [w for w, _, _ in written_tokens(name)]
    if len(words) < 2:
        return ""
    last = words[-1]
    if last.isdigit() or last.lower() in _ROMAN or (len(last) == 1 and last.isupper()):
        cut = len(words) - 1 - (words[-2].lower() == "type")
        return fold_key(phrase_key(" ".join(words[:cut]))) if cut else ""
    genus, epithet = (words[0], words[1]) if len(words) == 2 else ("", "")
    if (genus[:1].isupper() and genus[1:].islower() and genus.isalpha() and epithet.isalpha()
            and epithet.islower() and epithet.endswith(_EPITHET_ENDS) and epithet not in common_words()):
        return fold_key(genus.lower())
    return ""


def bag_key(key: str) -> str:
    """The sorted content words of a phrase key (stop words dropped, accents folded), or ``""`` for fewer
    than two."""
    stop = stopwords()
    words = sorted(w for w in fold_key(key).split(" ") if w and w not in stop)
    return " ".join(words) if len(words) >= 2 else ""


@dataclass(slots=True)
class NameVariants:
    """The variant keys of a set of names (see the module docstring); each maps to one node."""

    folded: dict[str, int] = field(default_factory=dict)
    bags: dict[str, int] = field(default_factory=dict)
    partial: dict[str, int] = field(default_factory=dict)
    heads: dict[str, int] = field(default_factory=dict)
    rare: dict[str, tuple[tuple[int, str], ...]] = field(default_factory=dict)
    kinds: dict[str, tuple[int, ...]] = field(default_factory=dict)
    synonyms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    caps_only: set[str] = field(default_factory=set)
    ambiguous: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def of_names(cls, names: Sequence[str], nodes: Sequence[int], is_alias: Sequence[bool]) -> NameVariants:
        """The variants of ``names`` (labels and aliases, each with its node and whether it is an alias)."""
        stop, common = stopwords(), common_words()
        keys = [phrase_key(n) for n in names]
        label_keys = {k for k, a in zip(keys, is_alias, strict=True) if not a and k}
        alias_nodes: dict[str, set[int]] = {}
        caps: dict[str, bool] = {}
        for name, key, node, alias in zip(names, keys, nodes, is_alias, strict=True):
            if not key:
                continue
            if alias and key not in label_keys:
                alias_nodes.setdefault(key, set()).add(node)
            upper = is_acronym(name) and (alias or key in stop or key in common)
            caps[key] = caps.get(key, True) and upper
        out = cls(caps_only={k for k, v in caps.items() if v},
                  ambiguous={k: tuple(sorted(v)) for k, v in alias_nodes.items() if len(v) > 1})
        known = set(keys)
        folded: dict[str, set[int]] = {}
        bags: dict[str, set[int]] = {}
        token_nodes: dict[str, set[int]] = {}
        heads: dict[str, set[int]] = {}
        swapped: dict[str, set[int]] = {}  # a name with another naming head → its nodes
        primary: dict[str, set[int]] = {}  # head → nodes named "head (primary)"
        candidates: dict[str, int] = {}
        headed: list[tuple[int, str]] = []  # node, head key ("Thrombocytosis, autosomal dominant": its head)
        kinds: dict[str, set[int]] = {}
        for name, key, node in zip(names, keys, nodes, strict=True):
            if not key or key in out.ambiguous:
                continue
            genus = _genus(name)
            if genus:
                kinds.setdefault(genus, set()).add(node)
            f = fold_key(key)
            if f != key and f not in known:
                folded.setdefault(f, set()).add(node)
            closed = _closed_hyphens(name)
            if closed and closed not in known:  # "Membrano-proliferative …" is "Membranoproliferative …"
                folded.setdefault(closed, set()).add(node)
            for other in _other_heads(f):  # "Chediak-Higashi disease" is the "… syndrome"
                if other not in known:
                    swapped.setdefault(other, set()).add(node)
            b = bag_key(key)
            if b:
                bags.setdefault(b, set()).add(node)
            part = _head_part(name)
            head = fold_key(phrase_key(part))
            qualified = part == name or _qualified(name)
            headed.append((node, head if qualified else f))
            if part != name and head and head not in known:
                heads.setdefault(head, set()).add(node if qualified else -1)  # -1: no qualifier
                if name.rstrip().endswith("(primary)"):
                    primary.setdefault(head, set()).add(node)
            toks = [(fold_key(w.lower()), w) for w, _, _ in written_tokens(name)]
            for t, _ in toks:
                token_nodes.setdefault(t, set()).add(node)
            if 2 <= len(toks) <= 3 and key not in out.caps_only:
                for i, (t, _) in enumerate(toks):
                    others = [w for j, (u, w) in enumerate(toks) if j != i and u not in stop]
                    if (len(t) >= 4 and t.isalpha() and t not in stop and t not in common and others
                            and all(w[0].isupper() for w in others)):
                        candidates.setdefault(t, node)
        out.folded = {k: next(iter(v)) for k, v in folded.items() if len(v) == 1}
        for k, v in heads.items():  # "Lung cancer (primary)" before "Lung cancer (secondary)"
            if len(v) > 1 and len(primary.get(k, ())) == 1:
                heads[k] = primary[k]
        for k, v in swapped.items():  # never over a name in other words ("Cushing's disease")
            if k not in heads and k not in out.folded and bag_key(k) not in bags:
                heads[k] = v
        out.heads = {k: next(iter(v)) for k, v in heads.items()
                     if len(v) == 1 and -1 not in v and k not in out.folded}
        out.caps_only |= {f for f in map(fold_key, out.caps_only) if f in out.folded}
        out.bags = {k: next(iter(v)) for k, v in bags.items() if len(v) == 1}
        rare = {t for t, v in token_nodes.items() if len(v) <= RARE_NODES and t not in stop
                and (len(t) >= 4 or (len(t) == 3 and not t.isalpha()) or (len(t) > 1 and t in _ROMAN))}
        # "b12" and a Roman type number ("vii" of "Coagulation factor VII") too
        by_token: dict[str, list[tuple[int, str]]] = {}
        for node, head in headed:
            for t in set(head.split(" ")) & rare:
                by_token.setdefault(t, []).append((node, head))
        out.rare = {t: tuple(dict.fromkeys(v)) for t, v in by_token.items()}
        words_of: dict[int, set[str]] = {}  # a node → its one-word names
        word_nodes: dict[str, set[int]] = {}
        for key, node in zip(keys, nodes, strict=True):
            f = fold_key(key)
            if f.isalpha() and len(f) >= 4 and f not in stop and key not in out.caps_only:
                words_of.setdefault(node, set()).add(f)
                word_nodes.setdefault(f, set()).add(node)
        out.synonyms = {w: tuple(sorted(ws - {w})) for ws in words_of.values() if len(ws) > 1 for w in ws
                        if len(word_nodes[w]) == 1}
        out.kinds = {k: tuple(sorted(v)) for k, v in kinds.items()
                     if len(v) > 1 and k not in known and k not in out.folded}
        out.partial = {t: v for t, v in candidates.items()
                       if len(token_nodes[t]) == 1 and t not in known and t not in out.folded}
        return out
