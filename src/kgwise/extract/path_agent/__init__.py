"""P_RL: reinforcement-learned reasoning paths from question concepts to choice concepts (KnowGPT §3.1).

MDP (§3.1): the state of a walk at entity ``e_t`` heading for target ``e_target`` is
``s_t = (e_t, e_target − e_t)`` (Eq. 1); actions are the current entity's neighbours (either edge
direction), transitions are deterministic. Rewards:

* reachability ``r_reach`` = +1 when a target concept is reached within ``K = max_steps`` actions, −1
  otherwise (Eq. 2), given at the end of the walk;
* context relatedness ``r_cr`` (Eq. 3): after every step, ``cos(W·P_t, c)`` where ``P_t`` is the mean of
  the embeddings of the entities and relations walked so far and ``c`` the question's embedding, divided by
  ``K`` so that a walk of K steps earns the average (a shorter one earns less). Node, relation and
  question embeddings all come from the same sentence encoder (all-MiniLM-L6-v2), so they already share
  one space and ``W = I``;
* conciseness ``r_cs = 1/|P|`` (Eq. 4), given when the walk reaches a target (a failed walk earns none,
  otherwise dead ends would be rewarded for being short).

The total is ``λ1 r_reach + λ2 r_cr + λ3 r_cs``. Node embeddings encode a node's verbalised triples
(Feng et al. 2020): its label and its first ``node_text_edges`` edges as template clauses (kept short:
the encoder's cost grows with the text); they are computed lazily and cached per graph on disk.

Action pruning (the action space is every neighbour, which is thousands at hub nodes): neighbours
already on the walk are removed; target concepts are always kept; up to ``max_actions // 2`` neighbours
that still lie within the remaining step budget of a target ("on the way", from a bounded backward
breadth-first ball around the targets; the targets are the choices, known at inference too) are kept,
most target-similar first; the remaining slots go to the other neighbours most similar to the target
embedding, among the ``prefilter`` of highest degree (ties by id) when a node has more.

Each action carries one bit the paper does not name: ``ahead``, set when the neighbour is a target or on
the way to one. Without it the policy must discover reachability from embeddings alone, and on a sparse
KG (WordNet: about 3 % of OBQA's (source, choice) pairs are within K = 3 hops) a walk almost never earns
``r_reach``, so nothing is learnt (training reach stayed at 0.2 %). The policy learns how much to trust the
bit; which of the actions ahead to take (context relatedness, conciseness) is still its choice. For the same
reason training walks only from sources that can reach their target within K steps: the others earn −1
whatever the policy does, and add variance but no signal.

The policy ``π_θ(a|s)`` scores each action bilinearly between an MLP of the state and a projection of the
action's features (neighbour embedding, relation embedding, cosine of neighbour and target, direction,
ahead);
it is trained by REINFORCE with a learned value baseline (Xiong et al. 2017's policy gradient). No gold
answers are used: every choice concept is a target.

The subpackage holds the five jobs apart: :mod:`.config` (the ``[path_agent]`` table, no PyTorch),
:mod:`.embeddings` (node embeddings, cached on disk), :mod:`.policy` (π_θ, PyTorch), :mod:`.environment`
(the MDP), :mod:`.agent` (the extractor) and :mod:`.training` (REINFORCE). The names below are
re-exported here; all but :class:`PathAgentConfig` and :class:`NodeEmbeddings` load PyTorch (the ``ml``
extra) on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kgwise.errors import ConfigError
from kgwise.extract.path_agent.config import PathAgentConfig
from kgwise.extract.path_agent.embeddings import NodeEmbeddings
from kgwise.extract.registry import ExtractorOptions, register_extractor
from kgwise.kg.base import KnowledgeGraph
from kgwise.lazy import lazy_exports

if TYPE_CHECKING:
    from kgwise.extract.path_agent.agent import PathAgent
    from kgwise.extract.path_agent.policy import PathPolicy
    from kgwise.extract.path_agent.training import TrainingLog, train_path_policy

__all__ = [
    "NodeEmbeddings",
    "PathAgent",
    "PathAgentConfig",
    "PathPolicy",
    "TrainingLog",
    "train_path_policy",
]

_LAZY = {"PathAgent": "agent", "PathPolicy": "policy", "TrainingLog": "training",
         "train_path_policy": "training"}

__getattr__ = lazy_exports(__name__, _LAZY)


def _trained_agent(kg: KnowledgeGraph, options: ExtractorOptions) -> PathAgent:
    """P_RL from a trained policy file (loads PyTorch)."""
    if options.policy is None:
        raise ConfigError("P_RL needs a trained policy (--policy path_policy.pt, from `kgwise eval knowgpt "
                          "--out-dir`)")
    from kgwise.extract.path_agent.agent import PathAgent

    return PathAgent.load(kg, options.policy, options.encoder)


register_extractor("P_RL", _trained_agent)
