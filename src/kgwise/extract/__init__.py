"""Knowledge extraction strategies behind one protocol: ``extract(question, grounding) -> Subgraph``.

P_sub is :class:`SubgraphExtractor`; P_RL is ``kgwise.extract.path_agent.PathAgent``, imported from its
module so that PyTorch (the ``ml`` extra) loads only when it is used.
"""

from kgwise.extract.base import Extractor
from kgwise.extract.neighbourhood import CappedNeighbours, LazyCappedNeighbours
from kgwise.extract.subgraph import SubgraphConfig, SubgraphExtractor

__all__ = ["CappedNeighbours", "Extractor", "LazyCappedNeighbours", "SubgraphConfig", "SubgraphExtractor"]
