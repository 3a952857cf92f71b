"""The DDB biomedical KG of QA-GNN's MedQA setup (Disease Database + DrugBank) → ``CSRGraph``.

What the two files hold (inferred from the data and from how QA-GNN-derived code reads them):

* ``ddb_names.json``: ``{name: [item_id, preferred]}``. ``item_id`` is a DDB item pointer (a number, or a
  UMLS CUI such as ``C0002965`` for 753 names); several names share one id (synonyms). ``preferred`` is
  ``"1"`` for exactly one name per id (9,958 ids, 9,958 ``"1"``s) and ``"0"`` for the synonyms, so it is a
  preferred-name flag, not a node type. Each id is one node labelled by its preferred name; the synonyms
  are its aliases, and are also kept as the node text (``"also: a; b"``) and by :func:`ddb_synonyms`.
* ``ddb_relas.json``: ``{row: [subject_id, object_id, relation_code]}``, a directed edge subject → object.
  The codes are named after the DDB relation types in the order QA-GNN-derived MedQA code lists them, and
  the samples agree (e.g. code 2 *Anal cancer → Gastrointestinal bleeding* "may cause", 233 *Simvastatin →
  Hyperlipidemia* "may treat", 16 *Loratadine → Histamine H1 receptor antagonists* "belongs to the drug
  family of", 18 *Aedes mosquito → Dengue* "is a vector for", 30 *Trimethoprim → Co-trimoxazole* "is an
  ingredient of"). An unknown code raises ``DataError``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kgwise.errors import DataError
from kgwise.files import read_json
from kgwise.kg.csr import CSRGraph
from kgwise.kg.loaders._common import require_dir, require_file

__all__ = ["DDB_RELATIONS", "ddb_synonyms", "load_ddb"]

DDB_RELATIONS: dict[str, str] = {
    "0": "belongs to the category of",
    "1": "is a category",
    "2": "may cause",
    "3": "is a subtype of",
    "4": "is a risk factor of",
    "6": "is associated with",
    "10": "may contraindicate",
    "12": "interacts with",
    "16": "belongs to the drug family of",
    "17": "belongs to drug super-family",
    "18": "is a vector for",
    "20": "may be allelic with",
    "26": "see also",
    "30": "is an ingredient of",
    "233": "may treat",
}
"""DDB relation codes (third field of ``ddb_relas.json``) → relation names."""



def _line_of(path: Path, key: str) -> int | None:
    """Line of the first occurrence of JSON key ``key`` in ``path`` (for error messages)."""
    needle = json.dumps(key) + ":"
    with path.open(encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if needle in line:
                return lineno
    return None


def _names(path: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """``(id → preferred name, id → synonyms)`` from ``ddb_names.json``."""
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise DataError("expected a JSON object {name: [id, preferred]}", path, 1)
    preferred: dict[str, str] = {}
    synonyms: dict[str, list[str]] = {}
    for name, val in raw.items():
        if (not isinstance(val, list) or len(val) != 2 or not all(isinstance(x, str) for x in val)
                or val[1] not in ("0", "1") or not val[0] or not name.strip()):
            raise DataError(f"name {name!r}: expected [id, \"0\"|\"1\"], got {val!r}", path,
                            _line_of(path, name))
        item, flag = val
        if flag == "1":
            if item in preferred:
                raise DataError(f"id {item} has two preferred names ({preferred[item]!r}, {name!r})", path,
                                _line_of(path, name))
            preferred[item] = name
        else:
            synonyms.setdefault(item, []).append(name)
    orphan = next((i for i in synonyms if i not in preferred), None)
    if orphan is not None:
        raise DataError(f"id {orphan} has synonyms but no preferred name", path,
                        _line_of(path, synonyms[orphan][0]))
    return preferred, synonyms


def ddb_synonyms(directory: str | Path) -> dict[str, str]:
    """Every DDB name (preferred or synonym) → the preferred name of its node."""
    root = require_dir(directory)
    preferred, synonyms = _names(require_file(root / "ddb_names.json"))
    out = {name: name for name in preferred.values()}
    for item, names in synonyms.items():
        for name in names:
            out.setdefault(name, preferred[item])
    return out


def load_ddb(directory: str | Path) -> CSRGraph:
    """Load the DDB KG from ``ddb_names.json`` and ``ddb_relas.json`` in ``directory``.

    Raises ``DataError`` naming the file (and line) of a malformed entry, an unknown relation code or an
    edge to an id without a name.
    """
    root = require_dir(directory)
    names_path, relas_path = require_file(root / "ddb_names.json"), require_file(root / "ddb_relas.json")
    preferred, synonyms = _names(names_path)
    items = list(preferred)
    node_of = {item: i for i, item in enumerate(items)}
    labels = [preferred[i] for i in items]
    texts = [("also: " + "; ".join(synonyms[i])) if i in synonyms else "" for i in items]

    raw = read_json(relas_path)
    if not isinstance(raw, dict):
        raise DataError("expected a JSON object {row: [subject, object, code]}", relas_path, 1)
    codes = list(DDB_RELATIONS)
    code_of = {c: k for k, c in enumerate(codes)}
    n = len(raw)
    heads = np.empty(n, dtype=np.int64)
    rels = np.empty(n, dtype=np.int64)
    tails = np.empty(n, dtype=np.int64)
    for k, (row, val) in enumerate(raw.items()):
        try:
            subj, obj, code = val
            heads[k], tails[k], rels[k] = node_of[subj], node_of[obj], code_of[code]
        except (TypeError, ValueError, KeyError) as exc:
            what = (f"unknown relation code {val[2]!r}" if isinstance(val, list) and len(val) == 3
                    and val[0] in node_of and val[1] in node_of else
                    f"expected [subject id, object id, code] with named ids, got {val!r}")
            raise DataError(f"row {row}: {what}", relas_path, _line_of(relas_path, row)) from exc
    aliases = [(node_of[i], name) for i, names in synonyms.items() for name in names]
    return CSRGraph.from_arrays(labels, [DDB_RELATIONS[c] for c in codes], heads, rels, tails, texts,
                                name="ddb", aliases=aliases)
