"""``Combination``: one (extractor × format) arm of KnowGPT's prompt construction (§3.2.1), spelled
``EXTRACTOR+FORMAT`` (``P_sub+F_s``) on the command line, in JSON and in saved bandits."""

from __future__ import annotations

from dataclasses import dataclass

from kgwise.errors import ConfigError
from kgwise.extract import EXTRACTORS
from kgwise.render.formats import FORMAT_NAMES, FORMATS

__all__ = ["PAPER_COMBINATIONS", "PAPER_EXTRACTORS", "Combination"]

PAPER_EXTRACTORS = ("P_sub", "P_RL")
"""The paper's two extractors, in its order (``kgwise.extract.EXTRACTORS`` holds every registered one)."""


@dataclass(frozen=True, slots=True, order=True)
class Combination:
    """An extractor and a knowledge format, each a registered name; ``str()`` gives ``P_sub+F_s``."""

    extractor: str
    format: str

    def __post_init__(self) -> None:
        if self.extractor not in EXTRACTORS:
            raise ConfigError(f"unknown extractor {self.extractor!r} in {str(self)!r}; registered: "
                              f"{', '.join(EXTRACTORS)}")
        if self.format not in FORMATS:
            raise ConfigError(f"unknown knowledge format {self.format!r} in {str(self)!r}; registered: "
                              f"{', '.join(FORMATS)}")

    def __str__(self) -> str:
        return f"{self.extractor}+{self.format}"

    @classmethod
    def parse(cls, text: str | Combination) -> Combination:
        """``"P_sub+F_s"`` → ``Combination("P_sub", "F_s")`` (a ``Combination`` is returned as is);
        ``ConfigError`` for another shape or an unregistered name."""
        if isinstance(text, Combination):
            return text
        extractor, plus, fmt = text.strip().partition("+")
        if not plus or not extractor or not fmt or "+" in fmt:
            raise ConfigError(f"bad combination {text!r}: write EXTRACTOR+FORMAT, e.g. P_sub+F_s")
        return cls(extractor, fmt)


PAPER_COMBINATIONS: tuple[Combination, ...] = tuple(Combination(p, f) for p in PAPER_EXTRACTORS
                                                    for f in FORMAT_NAMES)
"""The six combinations of §3.2.1, in the paper's order."""
