"""KnowGPT knowledge injection: the (extractor × format) prompt bandit and the injector pipeline."""

from kgwise.inject.bandit import ARMS, BanditConfig, PromptBandit, arm_name
from kgwise.inject.build import DEFAULT_COMBO, build_injector
from kgwise.inject.injector import WITHOUT_KG, Injection, InjectorConfig, KnowledgeInjector

__all__ = [
    "ARMS",
    "DEFAULT_COMBO",
    "WITHOUT_KG",
    "BanditConfig",
    "Injection",
    "InjectorConfig",
    "KnowledgeInjector",
    "PromptBandit",
    "arm_name",
    "build_injector",
]
