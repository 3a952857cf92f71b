"""The prompt-construction bandit of KnowGPT (§3.2, Eq. 5–8): which (extractor × format) per question.

Arms are the combinations ``P+F`` (e.g. ``P_RL+F_s``). The context of a question is its sentence
embedding ``c`` with a constant 1 appended (a per-arm intercept). Each arm keeps a ridge regression of
the reward on the context (Eq. 7, weight ``ridge`` = λ^i) and is scored ``c·α(i) + β(i)`` (Eq. 6) with the
exploration term ``β(i) = γ √(c (CᵀC + λI)⁻¹ cᵀ)`` (Eq. 8), ``γ = 1 + √(ln(2/δ)/2)``. The reward is the
LLM's correctness on the question with that combination's prompt (Eq. 5). The ridge/UCB arithmetic is
:class:`kgwise.bandit.LinUCB`'s (Sherman–Morrison updates); the bandit speaks
:class:`kgwise.bandit.Policy`'s verbs with the combination names as arms (``pull`` → ``"P_RL+F_s"``).

Training runs over the training questions in a seeded random order (``epochs`` passes). With
``feedback="bandit"`` (the paper) each step pulls one arm by UCB and learns only that arm's reward. With
``feedback="full"`` each step asks every arm and updates them all, the same ridge regressions on six times
the observations: the choice when training calls are affordable (a local LLM), since a few dozen pulls per
arm cannot tell arms a few points apart. The paper leaves λ^i open ("a regularization factor that
controls the complexity of the model"); after the passes each arm gets its own λ^i, chosen on the rewards it
received by leave-one-out error with the one-standard-error rule (:func:`kgwise.bandit.select_ridge`), and
is refitted with it, the intercept left unpenalised. A 384-dimensional context seen a few dozen times per
arm is otherwise fitted to noise: where the question embedding does not predict an arm's reward, the rule
shrinks that arm to its mean training reward. At test time the bandit exploits (``c·α(i)`` alone) unless
``explore_at_test`` is set.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
import numpy.typing as npt

from kgwise.arrays import decode_array
from kgwise.bandit import LinUCB, Policy
from kgwise.bandit.linucb import gamma_from_delta
from kgwise.bandit.ridge_cv import select_ridge
from kgwise.errors import ConfigError, DataError
from kgwise.files import savez_atomic
from kgwise.inject.combination import PAPER_COMBINATIONS, Combination
from kgwise.settings import table

__all__ = ["ARMS", "BanditConfig", "BanditHistory", "PromptBandit", "arm_name"]

Feedback = Literal["bandit", "full"]


def arm_name(extractor: str, fmt: str) -> str:
    """``"P_RL+F_s"``: the arm of a :class:`Combination` of registered names."""
    return str(Combination(extractor, fmt))


ARMS: tuple[str, ...] = tuple(str(c) for c in PAPER_COMBINATIONS)
"""The six combinations of §3.2.1, in the paper's order."""


@table("prompt_bandit")
@dataclass(frozen=True)
class BanditConfig:
    """``delta``: confidence of the UCB width γ (Eq. 8); ``ridge``: λ^i of Eq. 7 while training;
    ``ridge_grid``: the weights each arm's own λ^i is chosen from after training (empty: keep ``ridge``);
    ``epochs`` over the training questions; ``feedback``: ``bandit`` (the pulled arm's reward only, the
    paper) or ``full`` (every arm's reward on every training question); ``explore_at_test``: keep the UCB
    bonus on new questions."""

    delta: float = 0.05
    ridge: float = 1.0
    ridge_grid: tuple[float, ...] = tuple(float(f"{x:.3g}") for x in np.logspace(-1, 4, 11))
    epochs: int = 1
    feedback: Feedback = "bandit"
    explore_at_test: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.delta < 1.0:
            raise ConfigError(f"BanditConfig.delta must lie in (0, 1), got {self.delta}")
        if self.feedback not in ("bandit", "full"):
            raise ConfigError(f"BanditConfig.feedback must be 'bandit' or 'full', got {self.feedback!r}")
        if self.ridge <= 0 or self.epochs < 1 or any(g <= 0 for g in self.ridge_grid):
            raise ConfigError("BanditConfig: ridge and every ridge_grid weight must be > 0, epochs ≥ 1")
        object.__setattr__(self, "ridge_grid", tuple(float(g) for g in self.ridge_grid))

    @property
    def gamma(self) -> float:
        """``γ = 1 + √(ln(2/δ)/2)`` (§3.2)."""
        return gamma_from_delta(self.delta)


@dataclass
class BanditHistory:
    """Training trace: the question, the arm (name) pulled and the reward received at each step."""

    questions: list[int] = field(default_factory=list)
    arms: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)

    @property
    def mean_reward(self) -> float:
        return float(np.mean(self.rewards)) if self.rewards else 0.0


class PromptBandit(Policy[str]):
    """LinUCB over (extractor × format) arms, named, with the question embedding as context."""

    def __init__(self, dim: int, arms: Sequence[str] = ARMS, config: BanditConfig | None = None) -> None:
        if isinstance(arms, str) or any(not isinstance(a, str) for a in arms):
            raise ConfigError(f"PromptBandit's arms must be combination names, got {arms!r}")
        super().__init__(arms)
        self.dim = dim
        self.config = config or BanditConfig()
        self.policy = LinUCB(self.n_arms, dim + 1, alpha=self.config.gamma, ridge=self.config.ridge,
                             seed=self.config.seed)
        """The arithmetic, its arms the positions of :attr:`arms`."""
        self.ridges = [self.config.ridge] * len(self.arms)
        """λ^i per arm (``config.ridge`` until :meth:`tune_ridges`)."""
        self.scoring: str | None = None
        """The LLM's choice-scoring rule (``kgwise.llm.SCORING_RULES``) its rewards were measured with, if
        known."""

    def context(self, embedding: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """``[c, 1]``: the question embedding with the intercept feature."""
        c = np.asarray(embedding, dtype=np.float64).reshape(-1)
        if c.shape[0] != self.dim:
            raise ConfigError(f"context has dimension {c.shape[0]}, the bandit expects {self.dim}")
        return np.append(c, 1.0)

    def scores(self, embedding: npt.ArrayLike, explore: bool) -> npt.NDArray[np.float64]:
        """``c·α(i) + β(i)`` (Eq. 6 with Eq. 8) when ``explore``, else ``c·α(i)``."""
        x = self.context(embedding)
        return self.policy.scores(x) if explore else self.policy.expected(x)

    def pull(self, embedding: npt.ArrayLike, explore: bool | None = None) -> str:
        """The combination to use for a question (Eq. 6); ``explore`` defaults to
        ``config.explore_at_test``."""
        explore = self.config.explore_at_test if explore is None else explore
        return self.arms[self.policy.argmax(self.scores(embedding, explore))]

    def training_means(self) -> npt.NDArray[np.float64]:
        """Mean reward each arm (in :attr:`arms` order) received so far (NaN for an arm never pulled): the
        intercept feature is 1,
        so its entry of ``b`` is the arm's reward sum."""
        counts = self.policy.counts.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, self.policy.b[:, -1] / counts, np.nan)

    def update(self, arm: str, embedding: npt.ArrayLike, reward: float) -> None:
        """Learn ``reward`` (Eq. 5: 1 correct, 0 wrong) of combination ``arm`` on this context (Eq. 7)."""
        self.policy.update(self.index(arm), self.context(embedding), reward)

    def fit(
        self,
        embeddings: npt.ArrayLike,
        reward: Callable[[int, str], float],
        progress: Callable[[int, int], None] | None = None,
    ) -> BanditHistory:
        """Training: for each question ``i`` (shuffled, ``epochs`` passes) pull an arm by UCB, ask
        ``reward(i, arm)`` (the LLM's correctness with combination ``arm``) and update that arm only, or,
        with ``feedback="full"``, ask and update every arm; then :meth:`tune_ridges`."""
        E = np.asarray(embeddings, dtype=np.float64)
        rng = np.random.default_rng(self.config.seed)
        hist = BanditHistory()
        total = self.config.epochs * len(E)
        step = 0
        for _ in range(self.config.epochs):
            for i in rng.permutation(len(E)).tolist():
                asked = self.arms if self.config.feedback == "full" else (self.pull(E[i], explore=True),)
                for arm in asked:
                    r = float(reward(i, arm))
                    self.update(arm, E[i], r)
                    hist.questions.append(i)
                    hist.arms.append(arm)
                    hist.rewards.append(r)
                step += 1
                if progress is not None:
                    progress(step, total)
        if self.config.ridge_grid:
            self.tune_ridges(E, hist)
        return hist

    def tune_ridges(self, embeddings: npt.ArrayLike, history: BanditHistory, min_pulls: int = 5) -> None:
        """Choose each arm's λ^i from ``config.ridge_grid`` by leave-one-out error on the rewards it got in
        ``history`` (one-standard-error rule) and refit the arm with it (Eq. 7), the intercept unpenalised
        (weight ``1e-6``). Arms pulled fewer than ``min_pulls`` times keep their λ^i."""
        E = np.asarray(embeddings, dtype=np.float64)
        arms = np.asarray([self.index(a) for a in history.arms], dtype=np.int64)
        rows = np.asarray(history.questions, dtype=np.int64)
        rewards = np.asarray(history.rewards, dtype=np.float64)
        for a in range(self.n_arms):
            mine = arms == a
            if mine.sum() < min_pulls:
                continue
            C = E[rows[mine]]
            lam = select_ridge(C, rewards[mine], self.config.ridge_grid).ridge
            X = np.column_stack([C, np.ones(len(C))])  # the contexts [c, 1]
            self.policy.refit(a, X, rewards[mine], np.append(np.full(self.dim, lam), 1e-6))
            self.ridges[a] = lam

    # ------------------------------------------------------------------------------------- persistence
    def state_dict(self) -> dict[str, Any]:
        """Arms, config, per-arm λ^i, scoring rule and the LinUCB state (generator included)."""
        return {"kind": "PromptBandit", "arms": list(self.arms), "dim": self.dim,
                "config": asdict(self.config), "linucb": self.policy.state_dict(), "ridges": self.ridges,
                "scoring": self.scoring}

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> Self:
        """Inverse of :meth:`state_dict`; ``ConfigError`` saying what is wrong with a malformed state."""
        if state.get("kind", "PromptBandit") != "PromptBandit":  # files saved by save() carry no kind
            raise ConfigError(f"not a PromptBandit state (kind={state.get('kind')!r})")
        try:
            out = cls(int(state["dim"]), state["arms"], BanditConfig(**state["config"]))
            out.policy = LinUCB.from_state_dict(state["linucb"])
            out.ridges = [float(x) for x in state.get("ridges", out.ridges)]
            out.scoring = state.get("scoring")
        except (KeyError, TypeError, ValueError) as exc:
            what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ConfigError(f"not a valid PromptBandit state: {what}") from exc
        if (out.policy.n_arms, out.policy.dim) != (out.n_arms, out.dim + 1) or len(out.ridges) != out.n_arms:
            raise ConfigError(f"not a valid PromptBandit state: its LinUCB or ridges do not match "
                              f"{out.n_arms} arms of dimension {out.dim}")
        return out

    def save(self, path: str | Path) -> Path:
        """Write :meth:`state_dict` to one ``.npz`` file (the LinUCB arrays as arrays, the rest as JSON)."""
        state = self.state_dict()
        linucb = state.pop("linucb")
        arrays = {k: decode_array(linucb.pop(k)) for k in ("A_inv", "b", "theta")}
        arrays["counts"] = np.asarray(linucb.pop("counts"))
        del state["kind"]
        arrays["meta"] = np.frombuffer(json.dumps(state | {"linucb": linucb}).encode(), dtype=np.uint8)
        return savez_atomic(path, arrays)

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """A bandit saved by :meth:`save`; raises ``DataError`` naming the file otherwise."""
        path = Path(path)
        if not path.is_file():
            raise DataError("prompt-bandit file not found", path)
        try:
            with np.load(path, allow_pickle=False) as z:
                meta: dict[str, Any] = json.loads(z["meta"].tobytes().decode())
                state = dict(meta["linucb"])
                for k in ("A_inv", "b", "theta", "counts"):
                    state[k] = z[k]
            return cls.from_state_dict(meta | {"linucb": state})
        except (KeyError, ValueError, OSError, ConfigError) as exc:
            raise DataError(f"not a prompt-bandit file: {exc}", path) from exc
