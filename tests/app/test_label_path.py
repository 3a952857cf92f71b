"""``label_path``: a chain of KG facts as a label path with each hop's direction (the real pipeline
through the server: ``tests/server/test_openai_api.py`` and ``test_web.py``, ``[real]``)."""

from __future__ import annotations

import pytest

from kgwise.app.evidence import label_path
from kgwise.errors import KgwiseError
from kgwise.types import Triple


def test_a_chain_becomes_nodes_relations_and_directions() -> None:
    p = label_path([Triple("lisinopril", "treats", "hypertension"),
                    Triple("hypertension", "is a", "cardiovascular disease")])
    assert p.nodes == ("lisinopril", "hypertension", "cardiovascular disease")
    assert p.relations == ("treats", "is a") and p.inverse == (False, False)
    back = label_path([Triple("insulin", "treats", "diabetes"), Triple("insulin", "is a", "hormone")])
    assert back.nodes == ("diabetes", "insulin", "hormone") and back.inverse == (True, False)
    assert label_path([Triple("a", "r", "b")]).nodes == ("a", "b")


def test_a_broken_or_empty_chain_is_an_error() -> None:
    with pytest.raises(KgwiseError, match="not connected at 'b'"):
        label_path([Triple("a", "r", "b"), Triple("c", "r", "d")])
    with pytest.raises(KgwiseError, match="empty"):
        label_path([])
