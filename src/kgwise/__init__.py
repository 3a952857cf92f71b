"""kgwise: knowledge-graph-grounded question answering with large language models."""

from kgwise.types import Answer, Choice, Path, Question, Subgraph, Triple, Usage

__version__ = "0.1.0"

__all__ = ["Answer", "Choice", "Path", "Question", "Subgraph", "Triple", "Usage", "__version__"]
