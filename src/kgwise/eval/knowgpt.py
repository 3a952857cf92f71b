"""The KnowGPT evaluation (the structure of Tables 3 and 4) on kgwise's real data.

Per data set: the KG, the training questions (for P_RL and the prompt bandit; no gold labels for P_RL)
and the test splits are as below; WordNet keeps each word's frequent senses only
(``load_wordnet(senses="frequent")``):

* ``csqa``: WordNet + the ConceptNet CSQA-choice slice; train on ``ihtrain``; test on ``ihdev`` (the
  official dev set, where the slice covers every choice) and ``ihtest`` (WordNet only, the slice has no
  triples for it);
* ``obqa``: WordNet, plus the two open-book facts most similar to the question (all-MiniLM-L6-v2) as
  extra evidence in every knowledge prompt; train ``train``, test ``test``; a "facts only" row shows
  what the facts alone do;
* ``medqa``: the DDB graph; MedQA has only a test set here, so it is split 50/50 by a seeded permutation
  (``split_seed``, default 0): the first half trains, the second half is tested.

Rows: w/o KG; P_sub × {F_t, F_s, F_g}; P_RL × {F_t, F_s, F_g} (``combos``: a subset of them, the bandit's
arms; without a P_RL one P_RL is not trained); full KnowGPT (the bandit's pick per question);
and, with no LLM, the choice with the most KG links to the question (:mod:`kgwise.eval.links`), which
says whether the KG's links single out the answer at all.
The bandit is trained with full feedback by default (every combination's correctness on every training
question); ``full_bandit_feedback`` is the paper's regime (the pulled combination's only), replayed on the
same recorded outcomes at no extra LLM cost. The LLM ranks the choices by one of
:data:`kgwise.llm.SCORING_RULES` (the sum of their tokens' log-probabilities, the per-token mean, or PMI:
the sum minus the choice's context-free log-probability); ``scoring="auto"`` chooses a rule per setting on
the bandit's training questions (:func:`choose_rules`): for w/o KG the rule that answers most of them right
without knowledge, for the settings with knowledge (the combinations, full KnowGPT, OBQA's facts) the rule
that answers most of them right with each combination's knowledge, pooled over the combinations. One rule
for both may read knowledge badly: under the rule chosen without knowledge (PMI) the 1.5B Qwen-Coder's gap
on CSQA ihdev was −7.0 points, under ``sum`` +6.0 on the same outcomes (docs/measurements/knowgpt.md).
A tiny model's sum favours short, frequent choices (on OBQA it is below chance). Every outcome records the
correctness under all three rules. The LLM is deterministic (temperature 0, log-probability scoring), so
full KnowGPT's correctness on a question is that of the combination it picks, measured once.
``scoring="letter"`` answers instead with every option lettered in one chat prompt (the knowledge above
the question) and reads the reply's first token's top log-probabilities
(:func:`kgwise.llm.answering.letter_reply`): one LLM call a question and setting; its outcomes record
``correct_letter`` and where the letter came from (``letter_from``), and each setting's report counts and
names the questions whose reply named no option (``no_letter``: counted wrong). Every LLM
outcome is appended to ``outcomes.jsonl`` as it arrives, and a rerun resumes from there; the P_RL policy
and the bandit are saved next to it and reloaded.

The knowledge a prompt renders is ranked to the question and cut to ``knowledge_tokens``
(:mod:`kgwise.inject.injector`; ``None``: the whole P_sub / P_RL subgraph, as the formats select from it);
each combination's row reports its mean prompt tokens (as the LLM counted them; a response-cache hit counts
none), knowledge characters, and ``gold_path_when_correct``: the share of the questions it answered right
whose given knowledge holds a path to the gold answer. ``against``, a run directory of the same data set,
LLM and settings but for ``knowledge_tokens`` (ranked against full), adds ``against`` to the report: each
combination's accuracy in both runs on the questions both answered, the paired difference with its
standard error, and the prompt and KG-knowledge characters both spent (:func:`compare_runs`).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import sem

from kgwise.config import data_dir
from kgwise.embed import MiniLM
from kgwise.errors import ConfigError
from kgwise.eval.links import link_baseline
from kgwise.extract.path_agent import NodeEmbeddings, PathAgentConfig
from kgwise.files import ResumeLog, short_hash, write_text_atomic
from kgwise.inject.bandit import ARMS, BanditConfig, PromptBandit
from kgwise.inject.build import build_injector
from kgwise.inject.combination import PAPER_COMBINATIONS, PAPER_EXTRACTORS, Combination
from kgwise.inject.injector import KNOWLEDGE_RATIO, KNOWLEDGE_TOKENS, WITHOUT_KG, Injection, KnowledgeInjector
from kgwise.kg.benchmarks import benchmark_kg
from kgwise.kg.csr import CSRGraph
from kgwise.kg.grounding import Grounder, GrounderConfig
from kgwise.llm.base import SCORING_RULES, ChoiceScores, ScoringRule, scoring_rule
from kgwise.progress import bar as progress_bar
from kgwise.progress import duration, estimate_steps, interactive
from kgwise.settings import command_default
from kgwise.types import Question, Usage

__all__ = [
    "DATASETS",
    "PROMPT_BANDIT",
    "RL_AGENT",
    "KnowGPTData",
    "KnowGPTExperimentConfig",
    "SettingRules",
    "against_table",
    "benchmark_data",
    "best_rule",
    "choose_rules",
    "compare_runs",
    "markdown_table",
    "questions_to_test",
    "run_experiment",
    "split_questions",
    "user_data",
]

DATASETS = ("csqa", "obqa", "medqa")
LETTER = "letter"
SCORING = (*SCORING_RULES, "auto", LETTER)
FACTS_ONLY = "facts only"
BUDGET_KEYS = ("knowledge_tokens", "knowledge_ratio")
"""The settings an ``against`` run may differ in (a run recorded before ``knowledge_ratio`` lacks it)."""


RL_AGENT = PathAgentConfig(max_actions=16, prefilter=16)
"""P_RL sized for 2 shared cores: fewer actions per step means fewer node embeddings to compute."""
PROMPT_BANDIT = BanditConfig(feedback="full")
"""Full feedback: the LLM is local, so every combination is tried on every training question."""
command_default("path_agent", RL_AGENT)
command_default("prompt_bandit", PROMPT_BANDIT)


@dataclass(frozen=True)
class KnowGPTExperimentConfig:
    """Sizes of one run: ``limit`` test questions per split (None: all), ``train_limit`` bandit-training
    questions, P_RL training ``rl_iterations``/``rl_time_limit_s``, the MedQA ``split_seed``; ``scoring``:
    ``sum``, ``mean``, ``pmi``, ``auto`` or ``letter`` (see the module docstring); graphs of at most
    ``pre_encode_max_nodes`` nodes get all node embeddings computed before testing; ``knowledge_tokens``:
    the token cap of the ranked knowledge (``None``: the whole subgraph), ``knowledge_ratio`` its tokens per
    question token (:class:`~kgwise.inject.injector.InjectorConfig`); ``splits``: only these test
    splits (``None``: all); ``facts_only``: measure OBQA's "facts only" row. Neither ``limit``, ``splits``
    nor ``facts_only`` changes an outcome, so a rerun may change them and resume."""

    limit: int | None = 200
    train_limit: int = 200
    rl_iterations: int = 300
    rl_time_limit_s: float = 1500.0
    rl_train_questions: int = 2000
    split_seed: int = 0
    facts_k: int = 2
    scoring: str = "auto"
    pre_encode_max_nodes: int = 50_000
    agent: PathAgentConfig = RL_AGENT
    bandit: BanditConfig = PROMPT_BANDIT
    combos: tuple[str, ...] = ARMS
    knowledge_tokens: int | None = KNOWLEDGE_TOKENS
    knowledge_ratio: float | None = KNOWLEDGE_RATIO
    splits: tuple[str, ...] | None = None
    facts_only: bool = True

    def __post_init__(self) -> None:
        if self.scoring not in SCORING:
            raise ConfigError(f"scoring must be one of {', '.join(SCORING)}, got {self.scoring!r}")
        unknown = [c for c in self.combos if c not in ARMS]
        if unknown or not self.combos:
            raise ConfigError(f"combos must be some of {', '.join(ARMS)}, got "
                              f"{', '.join(self.combos) or 'none'}")

    @property
    def needs_rl(self) -> bool:
        """Whether a combination uses P_RL (else its policy is neither trained nor loaded)."""
        return any(c.startswith("P_RL+") for c in self.combos)


@dataclass(frozen=True)
class SettingRules:
    """The choice-scoring rule of each setting: ``without_kg`` for the answers without knowledge,
    ``knowledge`` for every setting whose prompt carries knowledge (the combinations, full KnowGPT, facts
    only); :meth:`key` is the outcome field a setting is read by."""

    without_kg: str
    knowledge: str

    @classmethod
    def same(cls, rule: str) -> SettingRules:
        return cls(rule, rule)

    def rule(self, setting: str) -> str:
        return self.without_kg if setting == WITHOUT_KG else self.knowledge

    def key(self, setting: str) -> str:
        return f"correct_{self.rule(setting)}"


def best_rule(rows: Sequence[dict[str, Any]]) -> tuple[ScoringRule, dict[str, float]]:
    """The rule under which most of ``rows`` (outcomes with ``correct_<rule>``) are right, first of
    :data:`SCORING_RULES` among equals, and every rule's accuracy (NaN where a row has no value: PMI of
    a letter reply; such a rule is not chosen). ``ConfigError`` when there are no rows."""
    if not rows:
        raise ConfigError("no training outcomes to choose a scoring rule on (train_limit questions with "
                          "choices are needed)")
    acc: dict[str, float] = {r: _acc(rows, f"correct_{r}") for r in SCORING_RULES}
    return max((r for r in SCORING_RULES if np.isfinite(acc[r])), key=lambda r: acc[r]), acc


def choose_rules(without_kg: Sequence[dict[str, Any]], with_knowledge: Sequence[dict[str, Any]]
                 ) -> tuple[SettingRules, dict[str, Any]]:
    """``scoring="auto"``: each setting's rule chosen on training outcomes (:func:`best_rule`), the w/o KG
    rule on ``without_kg`` (the training questions answered without knowledge), the knowledge rule on
    ``with_knowledge`` (the same questions answered with each combination's knowledge, pooled). Returns the
    rules and the report's ``scoring`` entry: the chosen rules and every rule's training accuracy."""
    plain, plain_acc = best_rule(without_kg)
    known, known_acc = best_rule(with_knowledge)
    return SettingRules(plain, known), {
        "rule": "auto", "chosen": {"without_kg": plain, "knowledge": known},
        "train_accuracy": {"without_kg": plain_acc, "knowledge": known_acc},
        "train_outcomes": {"without_kg": len(without_kg), "knowledge": len(with_knowledge)}}


# ---------------------------------------------------------------------------------------------- data
def split_questions(
    dataset: str, data: Path, seed: int = 0
) -> tuple[list[Question], dict[str, list[Question]]]:
    """``(training questions, {test split: questions})`` of the dataset (see the module docstring)."""
    from kgwise.datasets import load

    if dataset == "csqa":
        return load("csqa", "ihtrain", data), {"ihdev": load("csqa", "ihdev", data),
                                               "ihtest": load("csqa", "ihtest", data)}
    if dataset == "obqa":
        return load("obqa", "train", data), {"test": load("obqa", "test", data)}
    if dataset == "medqa":
        return _halves(load("medqa", "test", data), seed)
    raise ConfigError(f"unknown data set {dataset!r}; choose one of {', '.join(DATASETS)}")


def _halves(qs: list[Question], seed: int) -> tuple[list[Question], dict[str, list[Question]]]:
    """``qs`` split 50/50 by a seeded permutation: the first half trains, the second (``test-half``) is
    tested."""
    order = np.random.default_rng(seed).permutation(len(qs))
    half = len(qs) // 2
    return [qs[i] for i in order[:half]], {"test-half": [qs[i] for i in order[half:]]}


@dataclass(frozen=True)
class KnowGPTData:
    """What one evaluation runs on: its ``name`` (a benchmark's, or the questions file's), the ``kg``, the
    ``train`` questions (P_RL and the prompt bandit) and the ``tests`` by split name, the grounder's
    options, OBQA's open-book ``facts`` (or ``None``) and ``stamp``: what identifies the inputs in the run
    directory's record (a benchmark's name, the files' stamps)."""

    name: str
    kg: CSRGraph
    train: list[Question]
    tests: dict[str, list[Question]]
    grounder: GrounderConfig
    facts: Sequence[str] | None = None
    stamp: Any = None


def benchmark_data(dataset: str, data: Path, seed: int = 0) -> KnowGPTData:
    """The benchmark ``dataset``'s KG and questions (see the module docstring) under the data directory."""
    if dataset not in DATASETS:
        raise ConfigError(f"unknown data set {dataset!r}; choose one of {', '.join(DATASETS)}, or give your "
                          "own: --questions FILE --kg GRAPH")
    train, tests = split_questions(dataset, data, seed)
    facts = None
    if dataset == "obqa":
        from kgwise.datasets import load_openbook_facts

        facts = load_openbook_facts(data)
    return KnowGPTData(dataset, benchmark_kg(dataset, data), train, tests,
                       GrounderConfig(wordnet_dir=data / "wordnet" if dataset != "medqa" else None), facts,
                       dataset)


def user_data(kg: str | Path, questions: str | Path, train_questions: str | Path | None = None,
              seed: int = 0) -> KnowGPTData:
    """A user's graph file and multiple-choice questions files (:func:`kgwise.datasets.user.read_questions`):
    ``train_questions`` train P_RL and the bandit and ``questions`` are tested; without a training file the
    questions are split 50/50 by a seeded permutation (the first half trains), as MedQA is. ``ConfigError``
    names a question without choices or (among the tested and bandit-trained ones) without a gold answer."""
    from kgwise.datasets.user import read_labelled_mc
    from kgwise.files import file_stamp
    from kgwise.kg.loaders import open_graph_file

    qs = read_labelled_mc(questions, "KnowGPT's evaluation needs both")
    train = read_labelled_mc(train_questions, "KnowGPT's evaluation needs both") if train_questions else None
    if train is None:
        if len(qs) < 2:
            raise ConfigError(f"{questions}: at least two questions are needed to split into training and "
                              "test halves (or give --train-questions FILE)")
        train, tests = _halves(qs, seed)
    else:
        tests = {"test": qs}
    name = Path(questions).stem
    stamp = {"kg": file_stamp(kg), "questions": file_stamp(questions),
             "train_questions": file_stamp(train_questions) if train_questions is not None else None}
    return KnowGPTData(name, open_graph_file(kg), train, tests, GrounderConfig(), None, stamp)


class FactRetriever:
    """The ``k`` open-book facts most similar to a question (its text and choices), for OBQA."""

    def __init__(self, facts: Sequence[str], encoder: MiniLM, k: int = 2) -> None:
        self.facts = list(facts)
        self.encoder = encoder
        self.k = k
        self.vecs = encoder.encode(self.facts)

    def __call__(self, q: Question) -> str:
        query = q.text + " " + " ".join(q.choice_texts)
        sims = self.vecs @ self.encoder.encode([query])[0]
        top = np.argsort(-sims, kind="stable")[: self.k]
        return "\n".join(self.facts[i].strip().strip('"') + "." for i in top)


# ---------------------------------------------------------------------------------------------- outcomes
class OutcomeStore:
    """LLM outcomes keyed by ``(question id, setting)`` in a :class:`~kgwise.files.ResumeLog` of the run's
    ``fingerprint`` (:func:`_claim_run_dir`); reloaded on resume."""

    def __init__(self, path: Path, fingerprint: str) -> None:
        self.log = ResumeLog(path, fingerprint)

    @staticmethod
    def _key(qid: str, setting: str) -> str:
        return f"{qid}\t{setting}"

    def get(self, qid: str, setting: str) -> dict[str, Any] | None:
        row: dict[str, Any] | None = self.log.get(self._key(qid, setting))
        return row

    def need(self, qid: str, setting: str) -> dict[str, Any]:
        """The stored outcome, which must be there (``KeyError`` naming it otherwise)."""
        row = self.get(qid, setting)
        if row is None:
            raise KeyError(f"no outcome of question {qid!r} under {setting!r}")
        return row

    def put(self, row: dict[str, Any]) -> None:
        self.log.put(self._key(row["qid"], row["setting"]), row)

    def rows(self) -> list[dict[str, Any]]:
        """Every stored outcome."""
        return [row for _, row in self.log.items()]


def _row(q: Question, setting: str, inj: Injection, prior: ChoiceScores | None) -> dict[str, Any]:
    """One outcome: correctness under every scoring rule (``correct_<rule>``; ``correct_pmi`` is None
    without a ``prior``, for a backend that answers by letter; every rule's is None, and ``correct_letter``
    and ``letter_from`` are set, for an injector answering by letter), the knowledge's size, the preparation
    time, the seconds of the LLM's scoring call (``score_s``; ``None`` when the response cache answered it)
    and the machine's 1-minute load average when it was measured."""

    def correct(rule: ScoringRule) -> int | None:
        if (rule == "pmi" and prior is None) or inj.letter is not None:
            return None
        return int(inj.scores.best(rule, prior) == q.gold_index)

    letter = inj.letter
    by_letter = {} if letter is None else {
        f"correct_{LETTER}": int(bool(letter.prediction) and letter.prediction in q.gold),
        "letter_from": letter.source}
    return {
        "qid": q.id,
        "setting": setting,
        **{f"correct_{rule}": correct(rule) for rule in SCORING_RULES},
        **by_letter,
        "prediction": inj.answer.prediction,
        "knowledge_chars": len(inj.answer.knowledge),
        "prompt_chars": inj.prompt_chars,
        "empty_knowledge": int(not inj.answer.knowledge.strip()),
        "kg_edges": len(inj.subgraph.edges),
        "given_paths": len(inj.given.paths),
        "gold_path": int(q.gold_index is not None and bool(inj.given.support(q.gold_index))),
        "prep_ms": inj.prep_ms,
        "timings_ms": dict(inj.timings_ms),
        "usage": inj.answer.usage.to_dict(),
        "score_s": inj.scores.usage.latency_s if inj.scores.usage.calls else None,
        "load_1min": os.getloadavg()[0],
    }


# ---------------------------------------------------------------------------------------------- runner
def _progress(desc: str, total: int) -> Any:
    return progress_bar(total=total, desc=desc, dynamic_ncols=True)


def run_experiment(
    dataset: str | KnowGPTData,
    llm_spec: str,
    out_dir: Path,
    config: KnowGPTExperimentConfig | None = None,
    data: Path | None = None,
    log: Callable[[str], None] = print,
    against: Path | None = None,
) -> dict[str, Any]:
    """Run (or resume) the KnowGPT evaluation of ``dataset`` (a benchmark's name, or
    :class:`KnowGPTData`) with ``llm_spec``; returns the report (``against``: see the module docstring).
    Before the LLM work it says how many outcomes (KnowGPT answers) and LLM calls the run still needs and,
    from a measured warm-up, how long they will take (through ``log``)."""
    import torch

    from kgwise.extract.path_agent import PathAgent, PathPolicy, train_path_policy
    from kgwise.llm import get_llm

    cfg = config or KnowGPTExperimentConfig()
    inputs = dataset if isinstance(dataset, KnowGPTData) else benchmark_data(dataset, data_dir(data),
                                                                             cfg.split_seed)
    name = inputs.name
    fingerprint = _claim_run_dir(out_dir, inputs.stamp, llm_spec, cfg)
    other = _other_run(against, out_dir) if against is not None else None
    torch.set_num_threads(1)
    t_start = time.perf_counter()

    kg = inputs.kg
    log(f"{name}: {kg!r}")
    train_qs, tests = inputs.train, inputs.tests
    grounder = Grounder(kg, inputs.grounder)
    encoder = MiniLM()
    llm = get_llm(llm_spec, cache=True)

    # --- P_RL: train (resumable) or load
    agent_cfg = cfg.agent
    emb = NodeEmbeddings(kg, encoder, agent_cfg.node_text_edges)
    policy_path = out_dir / "path_policy.pt"
    rl_report: dict[str, Any]
    policy: PathPolicy | None
    if not cfg.needs_rl:
        policy, rl_report = None, {"skipped": "no P_RL combination in combos"}
    elif policy_path.is_file():
        policy, agent_cfg, rl_report = PathPolicy.load(policy_path)
        log(f"loaded P_RL policy from {policy_path}")
    else:
        items = [(q, grounder.ground(q)) for q in train_qs[: cfg.rl_train_questions]]
        log(f"P_RL training: {cfg.rl_iterations} gradient updates on {len(items)} questions, at most "
            f"{duration(cfg.rl_time_limit_s)}")

        started: list[float] = []

        def said(it: int, tl: Any) -> None:  # what the rest will take, timed after the first updates (which
            if it + 1 == 3:                  # also embed the node labels the walks first meet)
                started.append(tl.seconds)
            if it + 1 == 6 and started and cfg.rl_iterations > 6:  # (a resumed run may start later)
                per = (tl.seconds - started[0]) / 3
                rest = duration(per * (cfg.rl_iterations - 6))
                log(f"P_RL training: 6 of {cfg.rl_iterations} gradient updates took {tl.seconds:.1f} s, "
                    f"updates 4–6 {per:.2f} s each: about {rest} for the rest "
                    f"(capped at {duration(cfg.rl_time_limit_s)} in all)")

        policy, tlog = train_path_policy(
            kg, items, agent_cfg, embeddings=emb, iterations=cfg.rl_iterations,
            time_limit_s=cfg.rl_time_limit_s, checkpoint=out_dir / "path_policy.ckpt", on_iteration=said,
            progress=interactive(),
        )
        r = tlog.reach_rate
        w = max(1, min(20, len(r) // 4))
        rl_report = {"iterations": len(r), "seconds": round(tlog.seconds, 1),
                     "reach_rate_first": float(np.mean(r[:w])), "reach_rate_last": float(np.mean(r[-w:])),
                     "reachable_share": float(np.mean(tlog.reachable_share)), "train_questions": len(items)}
        policy.save(policy_path, agent_cfg, rl_report)
    if cfg.needs_rl and kg.num_nodes <= cfg.pre_encode_max_nodes:
        # one-off: every node's embedding (cached on disk), so per-question latency is not encoder time
        ids, size = np.arange(kg.num_nodes), 1024
        chunks = [ids[i:i + size] for i in range(0, kg.num_nodes, size)]
        est = estimate_steps(len(chunks), lambda i: emb.get(chunks[i]), min_items=1, max_items=2)
        log(f"{name}: " + est.describe(f"chunks of {size} node labels to embed (once; kept on disk)"))
        emb.get(ids)
        emb.save()
    agent = PathAgent(kg, policy, agent_cfg, embeddings=emb) if policy is not None else None

    evidence = FactRetriever(inputs.facts, encoder, cfg.facts_k) if inputs.facts is not None else None
    rule: str = cfg.scoring if cfg.scoring in (LETTER, *SCORING_RULES) else "sum"  # auto: chosen below
    injector = build_injector(kg, llm, grounder, encoder, scoring=rule, default_combo=None, agent=agent,
                              evidence=evidence, knowledge_tokens=cfg.knowledge_tokens,
                              knowledge_ratio=cfg.knowledge_ratio, name=f"KnowGPT on {name}")
    store = OutcomeStore(out_dir / "outcomes.jsonl", fingerprint)

    def outcome(q: Question, setting: str) -> dict[str, Any]:
        row = store.get(q.id, setting)
        if row is None or "correct_pmi" not in row:  # new, or recorded before every rule was kept
            if setting == WITHOUT_KG:
                inj = injector.answer_without_knowledge(q)
            elif setting == FACTS_ONLY:
                inj = injector.answer_with_evidence_only(q)
            else:
                inj = injector.inject(q, setting)
            row = _row(q, setting, inj, injector.prior(q) if inj.scores.method == "logprob" else None)
            store.put(row)
        return row

    bandit_qs = [q for q in train_qs[: cfg.train_limit] if q.choices]
    bandit_path = out_dir / "bandit.npz"
    settings = [WITHOUT_KG, *([FACTS_ONLY] if evidence is not None and cfg.facts_only else []), *cfg.combos]
    test_qs = questions_to_test(name, tests, cfg)
    needed = _needed(bandit_qs, test_qs, settings, cfg, retrain=not bandit_path.is_file())
    todo = [(q, s) for q, s in needed if store.get(q.id, s) is None]
    if todo:  # a measured warm-up (its outcomes are kept) says what the rest will take
        calls: list[int] = []
        def used(row: dict[str, Any]) -> int:  # requests to the LLM, those its response cache served too
            return int(row["usage"].get("calls", 0)) + int(row["usage"].get("cached_calls", 0))

        est = estimate_steps(len(todo), lambda i: calls.append(used(outcome(*todo[i]))))
        log(f"{name}: " + est.describe("outcomes to measure (KnowGPT answers; up to 8 per test question)",
                                       calls_per_item=sum(calls) / max(len(calls), 1)))
    rules = SettingRules.same(rule)
    scoring_report: dict[str, Any] = {"rule": cfg.scoring, "chosen": asdict(rules)}
    if cfg.scoring == "auto":
        plain = [outcome(q, WITHOUT_KG)
                 for q in progress_bar(bandit_qs, desc=f"{name} scoring rule (w/o KG on training questions)")]
        known = [outcome(q, s) for q in progress_bar(bandit_qs, desc=f"{name} scoring rule (with knowledge)")
                 for s in cfg.combos]
        rules, scoring_report = choose_rules(plain, known)
        priors = _prior_seconds(plain)
        scoring_report["train_seconds"] = {"without_kg": _seconds(plain, priors),
                                           "knowledge": _seconds(known, priors)}
        rule = rules.knowledge  # the bandit's reward and the injector's answers read knowledge
        injector.config = replace(injector.config, scoring=scoring_rule(rule))
        log(f"scoring: {scoring_report}")

    # --- bandit: train on training questions (LLM correctness as reward), or load
    E = encoder.encode([q.text for q in bandit_qs])

    def reward(i: int, arm: str) -> float:
        return float(outcome(bandit_qs[i], arm)[f"correct_{rule}"])

    bandit_report: dict[str, Any]
    saved = PromptBandit.load(bandit_path) if bandit_path.is_file() else None
    if saved is not None and saved.scoring == rule:
        bandit = saved
        bandit_report = {"loaded": str(bandit_path)}
    else:
        if saved is not None:
            log(f"{bandit_path} was trained with {saved.scoring!r} scoring, not {rule!r}: training anew")
        bandit = PromptBandit(encoder.dim, cfg.combos, cfg.bandit)
        bar = _progress(f"{name} bandit training ({cfg.bandit.feedback} feedback)",
                        len(bandit_qs) * bandit.config.epochs)
        hist = bandit.fit(E, reward, progress=lambda s, t: bar.update(1))
        bar.close()
        bandit.scoring = rule
        bandit.save(bandit_path)
        bandit_report = {"questions": len(bandit_qs), "feedback": cfg.bandit.feedback,
                         "mean_reward": hist.mean_reward, "pulls": dict(Counter(hist.arms)),
                         "ridges": dict(zip(cfg.combos, bandit.ridges, strict=True))}
    injector.bandit = bandit
    bandits = {"full": bandit}
    if cfg.bandit.feedback == "full":  # the paper's regime, replayed on the outcomes just measured
        paper = PromptBandit(encoder.dim, cfg.combos, replace(cfg.bandit, feedback="bandit"))
        paper.fit(E, reward)
        bandits["full_bandit_feedback"] = paper

    # --- test splits: every setting on every question (so rows compare on the same questions)
    splits: dict[str, Any] = {}
    for split, qs in test_qs.items():
        bar = _progress(f"{name}/{split}", len(qs))
        for q in qs:
            for s in settings:
                outcome(q, s)
            bar.update(1)
        bar.close()
        C = encoder.encode([q.text for q in qs])  # one batch, not one encoder call per question
        picks = {name: [b.pull(c) for c in C] for name, b in bandits.items()}
        splits[split] = _split_report(qs, settings, picks, store, bandit, rules)
        splits[split]["latency_ms"] = _latency(injector, qs)
        splits[split]["kg_links"] = link_baseline(kg, grounder, qs)
    emb.save()

    first = next(iter(splits.values()))
    usage = Usage.total([Usage.from_dict(r["usage"]) for r in store.rows()])
    report = {
        "dataset": name,
        "questions_file": None if isinstance(dataset, str) else inputs.stamp,
        "llm": llm_spec,
        "kg": {"name": kg.name, "nodes": kg.num_nodes, "edges": kg.num_edges},
        "config": asdict(cfg),
        "p_rl_training": rl_report,
        "bandit_training": bandit_report,
        "scoring": scoring_report,
        "without_kg": first["without_kg"],
        "combos": first["combos"],
        "full": first["full"],
        "splits": splits,
        "usage": usage.to_dict(),
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    if other is not None:
        report["against"] = {"run": str(against), "knowledge_tokens": other[1],
                             "splits": compare_runs(store, other[0], test_qs, cfg.combos,
                                                    f"correct_{rules.knowledge}")}
    (out_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out_dir / "table.md").write_text(markdown_table({name: report}) + "\n", encoding="utf-8")
    return report


def questions_to_test(name: str, tests: dict[str, list[Question]], cfg: KnowGPTExperimentConfig
                   ) -> dict[str, list[Question]]:
    """The first ``cfg.limit`` questions with choices of each test split ``cfg.splits`` names (all when
    ``None``); ``ConfigError`` naming a split ``name`` does not have."""
    unknown = sorted(set(cfg.splits or ()) - set(tests))
    if unknown:
        raise ConfigError(f"{name} has no test split {', '.join(unknown)}; its splits: {', '.join(tests)}")
    return {split: [q for q in qs if q.choices][: cfg.limit] for split, qs in tests.items()
            if cfg.splits is None or split in cfg.splits}


def _needed(bandit_qs: Sequence[Question], tests: dict[str, list[Question]], settings: Sequence[str],
            cfg: KnowGPTExperimentConfig, retrain: bool) -> list[tuple[Question, str]]:
    """Every (question, setting) outcome the run needs, in the order it measures them: w/o KG and every
    combination on the bandit's questions (``scoring="auto"`` chooses the rules on them), every combination
    on them for a bandit to train (full feedback; with the paper's bandit feedback only the pulled ones,
    fewer), every setting on every test question."""
    out: list[tuple[Question, str]] = []
    if cfg.scoring == "auto":
        out += [(q, s) for q in bandit_qs for s in (WITHOUT_KG, *cfg.combos)]
    if retrain:
        out += [(q, s) for q in bandit_qs for s in cfg.combos]
    out += [(q, s) for qs in tests.values() for q in qs for s in settings]
    first: dict[tuple[str, str], tuple[Question, str]] = {}
    for q, s in out:
        first.setdefault((q.id, s), (q, s))
    return list(first.values())


def _claim_run_dir(out_dir: Path, dataset: Any, llm_spec: str, cfg: KnowGPTExperimentConfig) -> str:
    """Record what ``out_dir`` holds (``run.json``: data set, LLM and every setting but the test ``limit``,
    which a rerun may raise) and refuse to resume a run of something else there: its saved outcomes,
    policy and bandit would be mixed into this one. Returns the fingerprint of those settings."""
    settings = asdict(cfg)
    for free in ("limit", "splits", "facts_only"):  # they choose outcomes, change none
        settings.pop(free)
    want = json.loads(json.dumps({"dataset": dataset, "llm": llm_spec, "config": settings}, default=str))
    path = out_dir / "run.json"
    if path.is_file():
        have = json.loads(path.read_text(encoding="utf-8"))
        if have != want:
            diff = sorted(k for k in {*have, *want} if have.get(k) != want.get(k))
            if "config" in diff:
                diff.remove("config")
                old = have.get("config", {})
                diff += sorted(k for k, v in want["config"].items() if old.get(k) != v)
            raise ConfigError(f"{out_dir} holds a run with other settings ({', '.join(diff)}); "
                              "choose another --out-dir or delete it")
        return short_hash(want)
    saved = ("outcomes.jsonl", "path_policy.pt", "path_policy.ckpt", "bandit.npz")
    if any((out_dir / f).exists() for f in saved):
        raise ConfigError(f"{out_dir} holds results of an unrecorded run; choose another --out-dir or "
                          "delete it")
    write_text_atomic(path, json.dumps(want, indent=2) + "\n")
    return short_hash(want)


def _other_run(run_dir: Path, out_dir: Path) -> tuple[OutcomeStore, int | None]:
    """The outcomes of the run in ``run_dir`` and its ``knowledge_tokens``; ``ConfigError`` unless it ran
    the same data set, LLM and settings as ``out_dir``'s run but for the knowledge budget and the limit."""
    mine, theirs = (json.loads((d / "run.json").read_text(encoding="utf-8")) if (d / "run.json").is_file()
                    else None for d in (out_dir, run_dir))
    if theirs is None or not (run_dir / "outcomes.jsonl").is_file():
        raise ConfigError(f"--against {run_dir}: not a `kgwise eval knowgpt` run directory (no run.json and "
                          "outcomes.jsonl)")
    assert mine is not None  # written by _claim_run_dir
    differ = sorted(k for k in {*mine["config"], *theirs["config"]}
                    if k not in BUDGET_KEYS and mine["config"].get(k) != theirs["config"].get(k))
    differ += [k for k in ("dataset", "llm") if mine[k] != theirs[k]]
    if differ:
        raise ConfigError(f"--against {run_dir}: that run differs in {', '.join(differ)}; only the "
                          "knowledge budget may differ")
    store = OutcomeStore(run_dir / "outcomes.jsonl", short_hash(theirs))
    return store, theirs["config"].get("knowledge_tokens")


def compare_runs(here: OutcomeStore, there: OutcomeStore, tests: dict[str, list[Question]],
                 combos: Sequence[str], key: str) -> dict[str, Any]:
    """Per split and combination, on the questions both stores answered: accuracy here and there (under
    ``key``), the paired difference (here − there) and its standard error, the mean prompt and KG
    knowledge characters (the knowledge less the open-book facts, where a run has them) and how many
    fewer here, and the share of the correct answers whose given knowledge holds a path to the gold
    answer; ``difference_by_rule``: the paired difference and its standard error under every scoring
    rule both runs recorded (a knowledge budget may suit one rule and not another)."""
    out: dict[str, Any] = {}
    for split, qs in tests.items():
        out[split] = {}
        for combo in combos:
            both = [q for q in qs if here.get(q.id, combo) is not None and there.get(q.id, combo) is not None]
            if not both:
                continue
            a, b = _side(here, both, combo, key), _side(there, both, combo, key)
            gap = _gap(here, there, both, combo, key)
            by_rule = {r: _gap(here, there, both, combo, f"correct_{r}") for r in SCORING_RULES}
            out[split][combo] = {
                "n": len(both), "here": a, "there": b,
                "difference": float(gap.mean()), "difference_se": float(sem(gap)) if len(gap) > 1 else None,
                "prompt_chars_fewer": _fewer(a["prompt_chars"], b["prompt_chars"]),
                "kg_chars_fewer": _fewer(a["kg_chars"], b["kg_chars"]),
                "difference_by_rule": {r: [float(g.mean()), float(sem(g)) if len(g) > 1 else None]
                                       for r, g in by_rule.items() if len(g) == len(both)}}
    return out


def _gap(here: OutcomeStore, there: OutcomeStore, qs: Sequence[Question], combo: str, key: str
         ) -> npt.NDArray[np.float64]:
    """Per question of ``qs``, correctness here − there under ``key`` (questions either run recorded
    without it are left out)."""
    pairs = [(here.need(q.id, combo).get(key), there.need(q.id, combo).get(key)) for q in qs]
    return np.array([float(a) - float(b) for a, b in pairs if a is not None and b is not None])


def _side(store: OutcomeStore, qs: Sequence[Question], combo: str, key: str) -> dict[str, Any]:
    """One run's figures of :func:`compare_runs` on ``qs``."""
    rows = [store.need(q.id, combo) for q in qs]
    facts = [int(f["knowledge_chars"]) if (f := store.get(q.id, FACTS_ONLY)) is not None else 0 for q in qs]
    right = [r for r in rows if r[key]]
    gold = (float(np.mean([r["gold_path"] for r in right]))
            if right and all("gold_path" in r for r in right) else None)
    prompt = [r["prompt_chars"] for r in rows if "prompt_chars" in r]
    return {"accuracy": _acc(rows, key),
            "prompt_chars": float(np.mean(prompt)) if len(prompt) == len(rows) else None,
            "kg_chars": float(np.mean([r["knowledge_chars"] - f for r, f in zip(rows, facts, strict=True)])),
            "gold_path_when_correct": gold}


def _fewer(here: float | None, there: float | None) -> float | None:
    """``1 − here / there``: the share of ``there`` saved (None when there is nothing to save)."""
    return None if here is None or not there else 1.0 - here / there


def _latency(injector: KnowledgeInjector, qs: Sequence[Question]) -> dict[str, Any]:
    """Grounding + extraction + F_t and F_s rendering per question and extractor, measured afresh (no
    memo, no LLM), after the run's caches are warm; median and p95 in milliseconds."""
    out: dict[str, Any] = {}
    for name, extractor in injector.extractors.items():
        times: list[float] = []
        for q in qs:
            t0 = time.perf_counter()
            sub = extractor.extract(q, injector.grounder.ground(q))
            for f in ("F_t", "F_s"):
                injector.formats[f].render(injector.kg, sub, q)
            times.append((time.perf_counter() - t0) * 1e3)
        if times:
            out[name] = {"median": statistics.median(times), "p95": float(np.percentile(times, 95)),
                         "n": len(times)}
    return out


def _rules_recorded(rows: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """The scoring rules (and ``letter``) every one of ``rows`` has an outcome under: a letter run records
    no sum/mean/PMI, a scored run no letter, and a report leaves out what it cannot average."""
    return tuple(r for r in (*SCORING_RULES, LETTER)
                 if rows and all(row.get(f"correct_{r}") is not None for row in rows))


def _acc(rows: Sequence[dict[str, Any]], key: str) -> float:
    """Mean of ``key`` over ``rows`` (NaN when there is none, or a row has no value: PMI by letter)."""
    values = [r[key] for r in rows]
    return float(np.mean(values)) if values and None not in values else float("nan")


def _split_report(qs: Sequence[Question], settings: Sequence[str], picks: dict[str, list[str]],
                  store: OutcomeStore, bandit: PromptBandit, rules: str | SettingRules
                  ) -> dict[str, Any]:
    """Every setting's accuracy on ``qs`` under its scoring rule (``rules``: one for all, or per setting;
    and, as ``accuracy_by_rule``, under every rule); ``picks``: each bandit's combination per question
    (``full``: the trained ``bandit``)."""
    per = rules if isinstance(rules, SettingRules) else SettingRules.same(rules)
    key, plain_key = per.key(bandit.arms[0]), per.key(WITHOUT_KG)  # with knowledge, without

    def accuracies(rs: Sequence[dict[str, Any]], key: str = key) -> dict[str, Any]:
        return {"accuracy": _acc(rs, key),
                "accuracy_by_rule": {r: _acc(rs, f"correct_{r}") for r in _rules_recorded(rs)}}

    def rows(s: str) -> list[dict[str, Any]]:
        return [r for q in qs if (r := store.get(q.id, s)) is not None]

    def prep_times(rs: Sequence[dict[str, Any]]) -> dict[str, float | None]:
        prep = [r["prep_ms"] for r in rs]
        return {"prep_ms_median": statistics.median(prep) if prep else None,
                "prep_ms_p95": float(np.percentile(prep, 95)) if prep else None}

    def summary(s: str) -> dict[str, Any]:
        rs = rows(s)
        out: dict[str, Any] = {**accuracies(rs, per.key(s)), "n": len(rs), **_seconds(rs, priors)}
        if rs and all("letter_from" in r for r in rs):
            out["letter_from"] = dict(Counter(r["letter_from"] for r in rs))
            out["no_letter"] = [r["qid"] for r in rs if r["letter_from"] == "none"]
        if s in ARMS:
            out["empty_knowledge"] = int(sum(r["empty_knowledge"] for r in rs))
            # questions whose extractor found no KG edge (rows of older runs lack the count: None)
            out["no_kg_edges"] = (int(sum(r["kg_edges"] == 0 for r in rs))
                                  if all("kg_edges" in r for r in rs) else None)
            out |= prep_times(rs) | _knowledge_size(rs, key) | {"with_gold_path": with_gold_path(rs)}
        return out

    def with_gold_path(rs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
        """On the questions whose given knowledge holds a path to the gold answer: how many, and the
        accuracy with that knowledge and without KG (whether the LLM reads a fact it is given)."""
        if not all("gold_path" in r for r in rs):
            return None  # rows of older runs
        given = [r for r in rs if r["gold_path"]]
        plain = [p for r in given if (p := store.get(r["qid"], WITHOUT_KG)) is not None]
        if not given:
            return {"n": 0, "accuracy": None, "without_kg_accuracy": None}
        return {"n": len(given), "accuracy": _acc(given, key),
                "without_kg_accuracy": _acc(plain, plain_key) if len(plain) == len(given) else None}

    def picked(chosen: Sequence[str]) -> dict[str, Any]:
        ok = [r for q, p in zip(qs, chosen, strict=True) if (r := store.get(q.id, p)) is not None]
        return {**accuracies(ok), "combo_counts": dict(Counter(chosen)), **prep_times(ok)}

    priors = _prior_seconds([r for q in qs if (r := store.get(q.id, WITHOUT_KG)) is not None])
    combos = {s: summary(s) for s in bandit.arms}
    best = max(combos, key=lambda s: combos[s]["accuracy"])
    train_means = bandit.training_means()
    by_training = bandit.arms[int(np.nanargmax(train_means))] if np.isfinite(train_means).any() else best
    out: dict[str, Any] = {
        "n": len(qs),
        "without_kg": summary(WITHOUT_KG),
        "combos": combos,
        **{name: picked(chosen) for name, chosen in picks.items()},
        "best_single": {"combo": best, "accuracy": combos[best]["accuracy"]},
        # what a practitioner without the bandit would deploy: the combination that did best in training
        "best_single_by_training": {"combo": by_training, "accuracy": combos[by_training]["accuracy"],
                                    "train_mean_reward": float(train_means[bandit.arms.index(by_training)])},
        "oracle_any_combo": _acc([{key: max(store.need(q.id, s)[key] for s in bandit.arms)}
                                  for q in qs], key),
    }
    if FACTS_ONLY in settings:
        out["facts_only"] = summary(FACTS_ONLY)
    if "full" in picks and len(qs) > 1:
        out["targets"] = _targets(qs, picks["full"], best, store, key, plain_key)
    return out


def _prior_seconds(plain: Sequence[dict[str, Any]]) -> list[float]:
    """The prior call's seconds: what each w/o-KG answer of ``plain`` spent beyond its scoring call, where
    it made both calls."""
    return [r["usage"]["latency_s"] - r["score_s"] for r in plain
            if r.get("score_s") is not None and r["usage"].get("calls") == 2]


def _seconds(rows: Sequence[dict[str, Any]], priors: Sequence[float]) -> dict[str, Any]:
    """LLM seconds a question of this setting costs alone: the mean of its scoring calls the LLM made (not
    the response cache) plus the mean PMI prior call (one per question, shared by the settings; ``None``
    unless both were timed; none for answers by letter), and the 1-minute load averages those calls were
    made at (rows of older runs lack them: ``None``)."""
    timed = [r["score_s"] for r in rows if r.get("score_s") is not None]
    load = [r["load_1min"] for r in rows if r.get("score_s") is not None]
    score = float(np.mean(timed)) if timed else None
    prior = float(np.mean(priors)) if priors else None
    if rows and all("letter_from" in r for r in rows):  # by letter: one call, no prior
        prior = 0.0
    return {"llm_s_per_question": None if score is None or prior is None else score + prior,
            "score_s_mean": score, "score_s_timed": len(timed), "prior_s_mean": prior,
            "load_1min": ({"min": min(load), "median": statistics.median(load), "max": max(load)}
                          if load else None)}


def _knowledge_size(rows: Sequence[dict[str, Any]], key: str) -> dict[str, float | None]:
    """Mean prompt tokens (of the rows the LLM counted: not response-cache hits) and knowledge characters,
    and the share of the rows right under ``key`` whose given knowledge holds a path to the gold answer
    (rows of older runs lack it: None)."""
    counted = [r["usage"]["input_tokens"] for r in rows if r.get("usage", {}).get("input_tokens")]
    right = [r for r in rows if r[key]]
    return {"prompt_tokens_mean": float(np.mean(counted)) if counted else None,
            "prompt_tokens_counted": len(counted),
            "knowledge_chars_mean": (float(np.mean([r["knowledge_chars"] for r in rows]))
                                     if rows and all("knowledge_chars" in r for r in rows) else None),
            "prompt_chars_mean": (float(np.mean([r["prompt_chars"] for r in rows]))
                                  if rows and all("prompt_chars" in r for r in rows) else None),
            "gold_path_when_correct": (float(np.mean([r["gold_path"] for r in right]))
                                       if right and all("gold_path" in r for r in right) else None)}


def _targets(qs: Sequence[Question], full: Sequence[str], best: str, store: OutcomeStore,
             key: str, plain_key: str | None = None) -> dict[str, Any]:
    """The two checks on one split (≥ 2 questions): full KnowGPT ≥ the best single combination,
    and ≥ 5 points over w/o KG (full read by ``key``, w/o KG by ``plain_key``, the same by default); each
    gap is paired over the same questions, with its standard error and 95 % normal interval.
    ``full_minus_without_kg_by_rule``: the gap over w/o KG, ± its standard error, under every scoring rule
    (the outcomes record them all; the same picks): a rule chosen without knowledge may read it badly."""

    def right(chosen: Sequence[str], key: str = key) -> npt.NDArray[np.float64]:
        return np.array([_acc([store.need(q.id, s)], key) for q, s in zip(qs, chosen, strict=True)])

    picked = right(full)
    over_plain = picked - right([WITHOUT_KG] * len(qs), plain_key or key)
    over_best = picked - right([best] * len(qs))
    rows = [store.need(q.id, s) for q, s in zip(qs, full, strict=True)]
    rows += [store.need(q.id, WITHOUT_KG) for q in qs]
    by_rule = {r: right(full, f"correct_{r}") - right([WITHOUT_KG] * len(qs), f"correct_{r}")
               for r in _rules_recorded(rows)}
    return {
        "full_minus_without_kg_by_rule": {r: [float(g.mean()), float(sem(g))] for r, g in by_rule.items()},
        "full_minus_without_kg": float(over_plain.mean()),
        "full_minus_without_kg_se": float(sem(over_plain)),
        "full_minus_without_kg_95": [float(over_plain.mean() - 1.96 * sem(over_plain)),
                                     float(over_plain.mean() + 1.96 * sem(over_plain))],
        "full_minus_best_single": float(over_best.mean()),
        "full_minus_best_single_se": float(sem(over_best)),
        "at_least_best_single": bool(over_best.mean() >= 0),
        "five_points_over_without_kg": bool(over_plain.mean() >= 0.05 - 1e-9),
    }


def against_table(report: dict[str, Any]) -> str:
    """The ``against`` comparison of a report as a markdown table: per split and combination, accuracy
    here and there, the paired difference, prompt and KG characters, the gold-path share of the correct."""
    budget = report["config"].get("knowledge_tokens")
    theirs = report["against"]["knowledge_tokens"]

    def name(b: int | None) -> str:
        return "full" if b is None else f"ranked {b} tok"

    def pct(v: float | None) -> str:
        return "–" if v is None or v != v else f"{100 * v:.0f} %"

    here, there = name(budget), name(theirs)
    lines = [f"| split | combination | n | accuracy {here} / {there} | difference ± SE (points) | "
             f"prompt chars {here} / {there} (fewer) | KG chars (fewer) | correct with a gold path |",
             "|---|---|---|---|---|---|---|---|"]
    for split, combos in report["against"]["splits"].items():
        for combo, c in combos.items():
            a, b = c["here"], c["there"]
            se = "–" if c["difference_se"] is None else f"{100 * c['difference_se']:.1f}"
            prompt = f"{a['prompt_chars'] or 0:.0f} / {b['prompt_chars'] or 0:.0f}"
            kg = f"{a['kg_chars']:.0f} / {b['kg_chars']:.0f}"
            gold = f"{pct(a['gold_path_when_correct'])} / {pct(b['gold_path_when_correct'])}"
            lines.append(f"| {split} | {combo} | {c['n']} | {a['accuracy']:.3f} / {b['accuracy']:.3f} | "
                         f"{100 * c['difference']:+.1f} ± {se} | {prompt} ({pct(c['prompt_chars_fewer'])}) | "
                         f"{kg} ({pct(c['kg_chars_fewer'])}) | {gold} |")
    return "\n".join(lines)


def markdown_table(reports: dict[str, dict[str, Any]]) -> str:
    """Tables 3/4 layout: one column per (data set, split), one row per setting (accuracy), and the choice
    scoring rule the run used."""
    cols: list[tuple[str, str, dict[str, Any]]] = [
        (d, s, sr) for d, rep in reports.items() for s, sr in rep["splits"].items()
    ]
    head = "| setting | " + " | ".join(f"{d} {s} (n={sr['n']})" for d, s, sr in cols) + " |"
    lines = [head, "|" + "---|" * (len(cols) + 1)]

    def cell(v: float | None) -> str:
        return "–" if v is None or v != v else f"{v:.3f}"

    def value(sr: dict[str, Any], key: str) -> float | None:
        if key == "by_training":
            found_t = sr.get("best_single_by_training")
            return None if found_t is None else float(found_t["accuracy"])
        if key in ARMS:
            combo = sr["combos"].get(key)  # None: not in the run's combos
            return None if combo is None else float(combo["accuracy"])
        found = sr.get(key)
        return None if found is None else float(found["accuracy"])

    rows = [("w/o KG", "without_kg"), ("facts only (OBQA)", "facts_only"),
            *[(f"{c.extractor} × {c.format}", str(c)) for c in PAPER_COMBINATIONS],
            ("best single by training reward", "by_training"),
            ("full KnowGPT", "full"), ("full KnowGPT, bandit feedback (the paper)", "full_bandit_feedback")]
    for name, key in rows:
        lines.append(f"| {name} | " + " | ".join(cell(value(sr, key)) for _, _, sr in cols) + " |")

    def gap(sr: dict[str, Any], name: str) -> str:
        t = sr.get("targets")
        return "–" if t is None else f"{100 * t[name]:+.1f} ± {100 * t[name + '_se']:.1f}"

    for label, name in (("full − w/o KG (points ± paired SE)", "full_minus_without_kg"),
                        ("full − best single (points ± paired SE)", "full_minus_best_single")):
        lines.append(f"| {label} | " + " | ".join(gap(sr, name) for _, _, sr in cols) + " |")
    def rules(scoring: dict[str, Any]) -> str:
        chosen = scoring.get("chosen", "–")  # a rule's name, or the rule of each setting
        if not isinstance(chosen, dict):
            return str(chosen)
        return (chosen["knowledge"] if chosen["knowledge"] == chosen["without_kg"]
                else f"w/o KG {chosen['without_kg']}, with knowledge {chosen['knowledge']}")

    lines.append("| choice scoring | " + " | ".join(rules(reports[d].get("scoring", {})) for d, _, _ in cols)
                 + " |")

    def with_paths(sr: dict[str, Any], extractor: str) -> str:
        empty = sr["combos"].get(str(Combination(extractor, "F_t")), {}).get("no_kg_edges")
        return "–" if empty is None else f"{1 - empty / max(sr['n'], 1):.3f}"

    links = [sr.get("kg_links", {}).get("accuracy") for _, _, sr in cols]
    lines.append("| most KG-linked choice (no LLM) | " + " | ".join(cell(v) for v in links) + " |")
    for extractor in PAPER_EXTRACTORS:
        lines.append(f"| questions with KG edges from {extractor} | "
                     + " | ".join(with_paths(sr, extractor) for _, _, sr in cols) + " |")
    return "\n".join(lines)
