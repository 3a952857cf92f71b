"""Knowledge extraction strategies behind one protocol: ``extract(question, grounding) -> Subgraph``.

P_sub is :class:`SubgraphExtractor`; P_RL is ``kgwise.extract.path_agent.PathAgent`` (PyTorch, the ``ml``
extra, loads only when it is used). Both are registered by name (:func:`make_extractor`).
"""

from kgwise.extract.base import Extractor
from kgwise.extract.evidence import EvidenceBudget, RankedEvidence, RankedPath, rank_evidence
from kgwise.extract.neighbourhood import CappedNeighbours, LazyCappedNeighbours
from kgwise.extract.registry import EXTRACTORS, ExtractorOptions, make_extractor, register_extractor
from kgwise.extract.subgraph import SubgraphConfig, SubgraphExtractor

# registers P_RL after P_sub, without loading PyTorch
from kgwise.extract import path_agent as _path_agent  # noqa: F401  isort: skip

__all__ = [
           "EXTRACTORS",
           "CappedNeighbours",
           "EvidenceBudget",
           "Extractor",
           "ExtractorOptions",
           "LazyCappedNeighbours",
           "RankedEvidence",
           "RankedPath",
           "SubgraphConfig",
           "SubgraphExtractor",
           "make_extractor",
           "rank_evidence",
           "register_extractor",
]
