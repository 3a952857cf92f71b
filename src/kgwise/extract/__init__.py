"""Knowledge extraction strategies behind one protocol: ``extract(question, grounding) -> Subgraph``."""

from kgwise.extract.base import Extractor
from kgwise.extract.neighbourhood import CappedNeighbours
from kgwise.extract.subgraph import SubgraphConfig, SubgraphExtractor

__all__ = ["CappedNeighbours", "Extractor", "SubgraphConfig", "SubgraphExtractor"]
