"""KnowGPT knowledge injection: the (extractor × format) prompt bandit and the injector pipeline."""

from kgwise.inject.bandit import ARMS, BanditConfig, PromptBandit, arm_name
from kgwise.inject.build import DEFAULT_COMBO, build_injector
from kgwise.inject.combination import PAPER_COMBINATIONS, Combination
from kgwise.inject.injector import WITHOUT_KG, Injection, InjectorConfig, KnowledgeInjector

__all__ = [
    "ARMS",
    "DEFAULT_COMBO",
    "PAPER_COMBINATIONS",
    "WITHOUT_KG",
    "BanditConfig",
    "Combination",
    "Injection",
    "InjectorConfig",
    "KnowledgeInjector",
    "PromptBandit",
    "arm_name",
    "build_injector",
]
