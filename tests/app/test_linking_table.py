"""The ``[linking]`` table of ``kgwise.toml``: the pipeline's grounder links as it says (a real TSV KG, a
real grounder; the encoder is :class:`FakeEncoder`, a test double no linking reads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.app.config import LinkTable, PipelineConfig
from kgwise.app.evidence import ConceptLink, Evidence
from kgwise.app.pipeline import Pipeline
from kgwise.errors import DataError

from .conftest import FakeEncoder, write_config, write_kg

BODY = """\
[kg]
graph = "kg.tsv"

[[arms]]
name = "caller"
kind = "external"

[router]
budget_calls = 10
{linking}"""

QUESTION, CHOICES = "Which drug treats diabetes?", ["Metformn", "Penicillin"]  # a misspelt choice


def evidence(tmp_path: Path, linking: str) -> Evidence:
    config = write_config(tmp_path, BODY.format(linking=linking))
    with Pipeline.from_config(config, tmp_path / "state", encoder=FakeEncoder()) as pipe:
        return pipe.evidence(QUESTION, CHOICES)


def test_min_score_drops_a_fuzzy_link_from_the_evidence(tmp_path: Path) -> None:
    write_kg(tmp_path)
    exact = [ConceptLink("diabetes", "diabetes", "exact", 1.0), ConceptLink("Penicillin", "penicillin",
                                                                            "exact", 1.0)]
    before = evidence(tmp_path, "")  # exact names only, as before the table
    assert before.choice_concepts == ((), ("penicillin",)) and set(before.links) == set(exact)
    fuzzy = "\n[linking]\nfuzzy = true\n"
    linked = evidence(tmp_path, fuzzy)
    assert linked.choice_concepts == (("metformin",), ("penicillin",))
    assert [(k.concept, k.method, round(k.score, 3)) for k in linked.links if k.mention == "Metformn"] == \
        [("metformin", "fuzzy", 0.889)]  # one edit in 9 letters
    strict = evidence(tmp_path, fuzzy + "min_score = 0.95\n")
    assert strict.choice_concepts == ((), ("penicillin",)) and set(strict.links) == set(exact)
    ends = [{p.nodes[-1] for p in e.paths} for e in (linked, strict)]  # question→choice paths
    assert "metformin" in ends[0] and "metformin" not in ends[1]


def test_the_table_reads_back_and_a_bad_value_names_file_line_and_key(tmp_path: Path) -> None:
    write_kg(tmp_path)
    cfg = PipelineConfig.load(write_config(tmp_path, BODY.format(linking="[linking]\nmin_score = 0.95\n")))
    assert cfg.linking == LinkTable(min_score=0.95)
    grounding = cfg.linking.grounding()
    assert grounding is not None and (grounding.min_score, grounding.fuzzy) == (0.95, False)
    assert PipelineConfig.load(write_config(tmp_path, BODY.format(linking=""))).linking.grounding() is None
    with pytest.raises(DataError, match=r"kgwise.toml:11: linking.min_score: must lie in \[0, 1\], got 1.5"):
        PipelineConfig.load(write_config(tmp_path, BODY.format(linking="[linking]\nmin_score = 1.5\n")))
    with pytest.raises(DataError, match=r"kgwise.toml:11: linking.embedding: unknown key; \[linking\] has "
                                        r"fuzzy, fuzzy_min_score, min_score"):
        PipelineConfig.load(write_config(tmp_path, BODY.format(linking="[linking]\nembedding = true\n")))
    with pytest.raises(DataError, match=r"kgwise.toml:11: linking.fuzzy: must be true or false"):
        PipelineConfig.load(write_config(tmp_path, BODY.format(linking='[linking]\nfuzzy = "yes"\n')))
