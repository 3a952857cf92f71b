"""``PipelineConfig``: the whole system in one TOML file (``kgwise.toml``), validated strictly.

The tables ``[kg]``, ``[[arms]]``, ``[router]``, ``[coke]``, ``[answer_sets]``, ``[linking]`` and ``[state]``
are the frozen classes below (``[coke]``: :class:`kgwise.route.coke.CokeConfig`). Each key is one field,
which holds its default, its unit and a one-line comment (:func:`_doc`); the reader's key lists and
``kgwise init``'s starter file (:func:`starter_toml`) are made from those fields, so a default is written
once. What every key means: ``docs/configuration.md``. Every fault raises ``DataError`` naming the file,
the line (where the key stands) and the key.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from types import UnionType
from typing import Any, Literal, get_args, get_type_hints

import tomli_w
from pydantic import TypeAdapter, ValidationError

from kgwise.errors import ConfigError, DataError
from kgwise.inject.injector import KNOWLEDGE_RATIO, KNOWLEDGE_TOKENS
from kgwise.kg.linking import LinkingConfig
from kgwise.llm.base import SCORING_RULES
from kgwise.llm.local_models import DEFAULT_SCORING, LOCAL_MODELS, default_scoring, ladder_comment
from kgwise.llm.prices import default_prices
from kgwise.route.arms import Cluster
from kgwise.route.coke import CokeConfig

__all__ = ["ARM_KINDS", "CONTEXTS", "PACED_COKE", "STARTER_BUDGET_USD", "AnswerSetConfig", "ArmConfig",
           "ArmKind", "Context", "KGConfig", "LinkTable", "PipelineConfig", "RouterConfig", "StateConfig",
           "arm_default", "field_default", "file_fields", "file_key", "paced_coke", "reads_free",
           "reads_predictor", "starter_toml"]

ArmKind = Literal["kgm", "llm", "inject", "external"]
Context = Literal["question", "question+free", "free", "predicted", "cascade", "predicted-free"]
CONTEXTS: tuple[Context, ...] = ("question", "question+free", "free", "predicted", "cascade",
                                 "predicted-free")
"""``predicted``: ``[1, p_1(x) … p_m(x)]``, each arm's success predicted from what the free arms say, the
question's form and embedding by the predictor a fit learns (:mod:`kgwise.route.features`); ``cascade``:
the same context, the arm picked by a learned cascade from the free arm to the strong one
(:mod:`kgwise.route.cascade`); ``predicted-free``: ``predicted`` with a predictor that reads the free arms'
confidence alone (:data:`kgwise.route.features.FREE_ONLY`)."""


def reads_free(context: Context) -> bool:
    """Whether a router context reads what the free arms say (their answers are needed before routing)."""
    return context != "question"


def reads_predictor(context: Context | str) -> bool:
    """Whether a router context is read from a fitted success predictor (``predicted``, ``cascade``,
    ``predicted-free``)."""
    return context in ("predicted", "cascade", "predicted-free")


ARM_KINDS: tuple[ArmKind, ...] = ("kgm", "llm", "inject", "external")
SetKind = Literal["lac", "aps"]
Guarantee = Literal["marginal", "pac", "pac_all_arms"]
OpenUncertified = Literal["largest", "pooled"]
SmallDataFallback = Literal["held_out", "all_dev"]
CalibrateOn = Literal["routed", "arm"]
Unit = Literal["usd", "calls"]

_TABLES = ("kg", "arms", "router", "coke", "answer_sets", "linking", "state")
_LLM_KINDS = ("llm", "inject")
STARTER_BUDGET_USD = 1.0
"""The dollar budget ``kgwise init`` writes when given neither ``--budget-usd`` nor ``--budget-calls``."""


def _doc(doc: str, *, example: Any = None, kinds: tuple[str, ...] = ARM_KINDS, key: str | None = None,
         alias: str | None = None, derived: str | None = None, bounds: str | None = None) -> dict[str, Any]:
    """A config field's metadata, from which the starter file (:func:`starter_toml`) and the reader's key
    lists are made: ``doc``, the one-line comment (with the unit) beside its key; ``example``, the value a
    commented line shows for a field without a default; ``kinds``, the arm kinds that take the key;
    ``key``, its name in the file when that is not the field's, ``alias`` the other name it may take;
    ``derived``, how the reader computes a field that no key of the file sets; ``bounds``, the range a
    number must lie in (a key of :data:`_BOUNDS`)."""
    return {"doc": doc, "example": example, "kinds": kinds, "key": key, "alias": alias, "derived": derived,
            "bounds": bounds}


_BOUNDS: dict[str, Callable[[float], bool]] = {
    "(0, 1)": lambda v: 0 < v < 1, "[0, 1]": lambda v: 0 <= v <= 1, "> 0": lambda v: v > 0,
    "≥ 0": lambda v: v >= 0, "≥ 1": lambda v: v >= 1, "(0, 1]": lambda v: 0 < v <= 1}
"""The ranges a number of the file may be held to, by the words its error message says."""


def file_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of config ``cls`` that a key of the file sets (not ``derived``), in order."""
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("derived")]


def file_key(f: dataclasses.Field[Any]) -> str:
    """The key of field ``f`` in the file."""
    return f.metadata.get("key") or f.name


def field_default(cls: type, name: str) -> Any:
    """The default of field ``name`` of config ``cls`` (its class is the one place it is written)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise KeyError(f"{cls.__name__}.{name} has no default")


@cache
def _value_type(cls: type, name: str) -> Any:
    """The type of field ``name`` of config ``cls``, without ``None``."""
    kind = get_type_hints(cls)[name]
    if isinstance(kind, UnionType):
        kind = next(k for k in get_args(kind) if k is not type(None))
    return kind


def _keys_of(cls: type, kind: str | None = None) -> set[str]:
    """The keys a table of config ``cls`` may hold (of an arm of ``kind``: those its kinds take)."""
    fields = [f for f in file_fields(cls) if kind is None or kind in f.metadata["kinds"]]
    return {file_key(f) for f in fields} | {f.metadata["alias"] for f in fields if f.metadata["alias"]}


@dataclass(frozen=True, slots=True)
class KGConfig:
    """The KG: exactly one of a graph file, a source to build with ``format``, or a SPARQL endpoint."""

    graph: Path | None = field(default=None, metadata=_doc(
        "a built graph (.npz), a triple file (.tsv, .nt) or RoG data", example="kg.npz"))
    source: Path | None = field(default=None, metadata=_doc(
        "or a KG source built on load, with format", example="triples.tsv"))
    format: str | None = field(default=None, metadata=_doc(
        "the source's format: conceptnet-csv, conceptnet-slice, ddb, wordnet, tsv, …", example="tsv"))
    sparql: str | None = field(default=None, metadata=_doc(
        "or a SPARQL endpoint's URL", example="http://127.0.0.1:7878/query"))
    index: Path | None = field(default=None, metadata=_doc(
        "label index that free text is grounded over (`kgwise kg index build`)", example="kg.idx"))

    @property
    def is_endpoint(self) -> bool:
        return self.sparql is not None

    def describe(self) -> str:
        if self.sparql is not None:
            return f"sparql:{self.sparql}"
        if self.graph is not None:
            return str(self.graph)
        return f"{self.source} ({self.format})"


@dataclass(frozen=True, slots=True)
class ArmConfig:
    """One arm (``[[arms]]``; each field's metadata says what it is). A call costs ``per_call`` plus, with a
    dollar budget, the token fees of ``price_model`` or, with ``cost_from_usage``, the dollars the backend
    reports (``Usage.cost``). ``cluster``, ``observe`` and ``scoring`` default by arm
    (:func:`arm_default`)."""

    name: str = field(metadata=_doc("what answers, feedback and the router call the arm"))
    kind: ArmKind = field(metadata=_doc("kgm (a KG model), llm, inject (an LLM with KG knowledge) or "
                                        "external (a model the caller runs)"))
    cluster: Cluster = field(metadata=_doc("KGM or LLM: whose prior the arm shares (Coke Eq. 3–4); default "
                                           "by kind"))
    spec: str | None = field(default=None, metadata=_doc(
        "the LLM: a shipped model's name, gguf:PATH or openai:MODEL", kinds=_LLM_KINDS))
    model: Path | None = field(default=None, metadata=_doc(
        "trained KG model file (`kgwise kg model train`)", example="kgm.pt", kinds=("kgm",)))
    data: Path | None = field(default=None, metadata=_doc(
        "the data directory its KG is built from (default: $KGWISE_DATA)", example="data",
        kinds=("kgm",)))
    per_call: float = field(default=0.0, metadata=_doc(
        "per call, in the budget's unit (default: the price table, 1 per LLM call, or 0; external: the "
        "most one call may cost)", example=0.001, key="price"))
    price_model: str | None = field(default=None, metadata=_doc(
        "", derived="spec's model when the price table prices it (dollar budgets, no price given)"))
    base_url: str | None = field(default=None, metadata=_doc(
        "an OpenAI-compatible server (with spec = openai:MODEL)", example="http://127.0.0.1:8080/v1",
        kinds=_LLM_KINDS))
    api_key_env: str | None = field(default=None, metadata=_doc(
        "environment variable holding the server's API key", example="OPENAI_API_KEY", kinds=_LLM_KINDS))
    scoring: str = field(default=DEFAULT_SCORING, metadata=_doc(
        "choice scoring: sum, mean or pmi; default: the model's measured best (sum for unmeasured ones)",
        kinds=_LLM_KINDS))
    policy: Path | None = field(default=None, metadata=_doc(
        "a trained P_RL path policy", example="path_policy.pt", kinds=("inject",)))
    bandit: Path | None = field(default=None, metadata=_doc(
        "a learnt prompt bandit (instead of combo or combos)", example="bandit.npz", kinds=("inject",)))
    combo: str | None = field(default=None, metadata=_doc(
        "a fixed extractor+format combination", example="P_sub+F_s", kinds=("inject",)))
    combos: tuple[str, ...] = field(default=(), metadata=_doc(
        'combinations `kgwise fit` learns per question: "all" or a list', example="all", kinds=("inject",)))
    knowledge_tokens: int | None = field(default=KNOWLEDGE_TOKENS, metadata=_doc(
        'token budget of the ranked question→choice paths in the prompt; "full": the whole subgraph',
        kinds=("inject",)))
    knowledge_ratio: float | None = field(default=KNOWLEDGE_RATIO, metadata=_doc(
        'at most this many knowledge tokens per token of the question (never below 12); "off": '
        "knowledge_tokens alone", kinds=("inject",), bounds="> 0"))
    observe: bool = field(default=False, metadata=_doc(
        "answers every question so feedback teaches its outcome (free arms); default: true for kgm",
        kinds=("kgm", "llm", "inject")))
    max_tokens: int = field(default=64, metadata=_doc("longest open answer, in tokens", kinds=_LLM_KINDS,
                                                      bounds="≥ 1"))
    cost_from_usage: bool = field(default=False, metadata=_doc(
        "", derived="dollar budgets, no price of either kind: the cost the backend reports is paid"))
    reported_accuracy: float | None = field(default=None, metadata=_doc(
        "published accuracy in [0, 1], the mean of the cluster's prior", example=0.5, bounds="[0, 1]"))

    @property
    def free(self) -> bool:
        """It answers without cost (``observe``, no price): a ``question+free`` context asks it first."""
        return self.observe and self.per_call == 0 and self.price_model is None

    @property
    def external(self) -> bool:
        """Whether the caller runs this arm (``route``/``settle``); ``per_call`` is then its cost bound."""
        return self.kind == "external"

    def fingerprint(self) -> dict[str, Any]:
        """The fields as JSON values (resume logs key calls by them); ``combos`` only when set and
        ``knowledge_tokens`` and ``knowledge_ratio`` only for an inject arm, so logs written before they
        existed stay valid (an inject arm's calls logged before the ratio are made again: its prompts
        changed)."""
        out: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(self), default=str))
        if not self.combos:
            del out["combos"]
        if self.kind != "inject":  # only an inject arm renders knowledge
            del out["knowledge_tokens"], out["knowledge_ratio"]
        return out

    @property
    def is_api(self) -> bool:
        """Whether the arm calls a server (concurrent calls help) rather than an in-process model."""
        return self.kind != "kgm" and (self.base_url is not None or str(self.spec).startswith("openai"))


def arm_default(name: str, kind: str, spec: str | None) -> Any:
    """The default of arm key ``name`` for an arm of ``kind`` answering with LLM ``spec``: ``cluster`` by
    kind (a KG model is ``KGM``), ``observe`` true for a KG model (free: it answers every question),
    ``scoring`` the model's measured best (:func:`kgwise.llm.local_models.default_scoring`); any other
    key, :class:`ArmConfig`'s default."""
    if name == "cluster":
        return "KGM" if kind == "kgm" else "LLM"
    if name == "observe":
        return kind == "kgm"
    if name == "scoring":
        return default_scoring(spec) if kind in _LLM_KINDS else DEFAULT_SCORING
    return field_default(ArmConfig, name)


PACED_COKE: dict[str, Any] = {"lam": 0.0, "pacing": "price", "gamma_override": 0.25,
                              "decomposed_reward": True}
"""The pipeline's ``[coke]`` defaults when the budget is paced over a ``[router] horizon`` (a ``[coke]``
key given in the file wins). The paper's cost regret (Eq. 14, λ = 1) is a fixed penalty that does not
depend on the budget: an arm's error rate is charged against it however much money is left, so beside a
free KG model that is nearly as accurate the router leaves a large budget unspent (5.6 % of it spent on
WebQSP's replay while the dearest arm was more accurate). With ``pacing="price"`` and λ = 0 the price of
cost is set from the budget left per question left, so the router spends what it is given where a costly
arm's expected gain is largest; γ = 0.25 and the decomposed reward are the settings under which
``kgwise eval route`` reached the best arm's accuracy at 60 % of its cost on WebQSP
(docs/measurements/coke.md)."""


def paced_coke(base: CokeConfig) -> CokeConfig:
    """``base`` with :data:`PACED_COKE`'s values."""
    return dataclasses.replace(base, **PACED_COKE)


@dataclass(frozen=True, slots=True)
class RouterConfig:
    """The router and its budget (``[router]``, Coke's values from ``[coke]``); ``pin_single_arm`` and
    ``routing_gain_z``: :meth:`kgwise.route.tuning.RoutingGain.pays`; ``external_ttl_s`` None: for ever."""

    budget: float = field(metadata=_doc(
        "hard spending limit: budget_usd (dollars) or budget_calls (LLM calls; a KG model is free)",
        key="budget_usd", alias="budget_calls"))
    unit: Unit = field(metadata=_doc("", derived="usd with budget_usd, calls with budget_calls"))
    horizon: int | None = field(default=None, metadata=_doc(
        "questions the budget is paced over (Coke then defaults to paced values)", example=1000,
        bounds="≥ 1"))
    seed: int = field(default=0, metadata=_doc("seed of the router's random choices"))
    observe_free: bool = field(default=True, metadata=_doc(
        "free arms (observe, no price) answer every question; feedback teaches their outcome"))
    coke: CokeConfig = field(default_factory=CokeConfig, metadata=_doc(
        "", derived="the [coke] table (advanced: `kgwise eval config show coke`, docs/configuration.md)"))
    context: Context = field(default="question", metadata=_doc(
        "the router's context: question, question+free, free, predicted, cascade or predicted-free (`kgwise "
        "fit` may choose by cross-fitting)"))
    pin_single_arm: bool = field(default=True, metadata=_doc(
        "`kgwise fit` answers with the best affordable single arm unless routing beats it"))
    routing_gain_z: float = field(default=1.0, metadata=_doc(
        "by how many standard errors (out of fold) routing must beat that arm", bounds="≥ 0"))
    external_ttl_s: float | None = field(default=3600.0, metadata=_doc(
        "seconds an external arm's decision holds its cost bound waiting for settle (0: never expires)",
        bounds="≥ 0"))


@dataclass(frozen=True, slots=True)
class AnswerSetConfig:
    """The calibrated answer sets (``[answer_sets]``; the guarantees: ``docs/configuration.md``): multiple
    choice by :mod:`kgwise.app.calibration`, open questions by :mod:`kgwise.app.open_sets`, abstention by
    :mod:`kgwise.app.abstain`."""

    alpha: float = field(default=0.1, metadata=_doc(
        "in (0, 1): the sets miss the truth at most this often, per arm", bounds="(0, 1)"))
    delta: float = field(default=0.05, metadata=_doc(
        "in (0, 1): level of the live coverage bound (`kgwise status`) and of the pac guarantee",
        bounds="(0, 1)"))
    kind: SetKind = field(default="lac", metadata=_doc("non-conformity score of the sets: lac or aps"))
    guarantee: Guarantee = field(default="pac", metadata=_doc(
        "pac: coverage ≥ 1 − alpha w.p. ≥ 1 − delta over the dev log; marginal: on average; pac_all_arms"))
    calibration_share: float = field(default=0.5, metadata=_doc(
        "in (0, 1): part of the dev questions held out of the router's learning to calibrate the sets",
        bounds="(0, 1)"))
    uag_llm: str | None = field(default=None, metadata=_doc(
        "a local LLM: open questions get UAG's sets, calibrated by `kgwise fit`", example="smollm2-135m"))
    uag_tune_share: float = field(default=0.4, metadata=_doc(
        "in (0, 1): part of the open dev questions that tunes UAG; the rest calibrates it per arm",
        bounds="(0, 1)"))
    open_uncertified: OpenUncertified = field(default="largest", metadata=_doc(
        "an open answer's set where nothing is certified: largest (UAG's largest set) or pooled"))
    abstain: bool = field(default=False, metadata=_doc(
        "answer only when the arm's certified confidence promises accuracy ≥ 1 − alpha, else \"not sure\""))
    fallback: SmallDataFallback = field(default="held_out", metadata=_doc(
        "a multiple-choice set whose routed held-out questions are too few: calibrated on all held-out "
        "questions the arm answered (held_out) or on all graded dev questions it answered (all_dev)"))
    calibrate_on: CalibrateOn = field(default="routed", metadata=_doc(
        "multiple-choice sets calibrated on the held-out questions the router sends the arm (routed, pac per "
        "routed arm) or on all graded dev questions the arm answered, ties split by a seeded coin (arm: pac "
        "per arm over questions like the dev log, not conditional on routing; smaller at 40-60 questions)"))


@dataclass(frozen=True, slots=True)
class LinkTable:
    """How the pipeline links the question and its choices to KG nodes (``[linking]``): the keys of
    :class:`kgwise.kg.linking.LinkingConfig` (what `kgwise kg ground --config` reads from its ``[linking]``
    table) that the pipeline takes, with its thresholds' defaults. The misspelling fallback is off unless
    asked for, as the pipeline linked before the table existed (exact, alias, folded, reordered, partial,
    contained and derived names, :mod:`kgwise.kg.grounding`); ``min_score`` drops every link below it,
    whatever its method."""

    min_score: float = field(default=field_default(LinkingConfig, "min_score"), metadata=_doc(
        "in [0, 1]: links scoring below it are dropped (exact, alias 1; partial, derived 0.9; contained its "
        "share; fuzzy its edit similarity)", bounds="[0, 1]"))
    fuzzy: bool = field(default=False, metadata=_doc(
        "link a mention no name matches by edit distance (misspellings: \"Swizerland\")"))
    fuzzy_min_score: float = field(default=field_default(LinkingConfig, "fuzzy_min_score"), metadata=_doc(
        "in (0, 1]: the least edit similarity of a fuzzy link (the precise rules ask ≥ 0.8 in running text)",
        bounds="(0, 1]"))

    def grounding(self) -> LinkingConfig | None:
        """The grounder's :class:`~kgwise.kg.linking.LinkingConfig`; ``None`` (exact names only, no
        threshold) at the defaults."""
        if self == LinkTable():
            return None
        return LinkingConfig(fuzzy=self.fuzzy, fuzzy_min_score=self.fuzzy_min_score, embedding=False,
                             min_score=self.min_score)


@dataclass(frozen=True, slots=True)
class StateConfig:
    """Where the pipeline's state lives: the state folder, or the PostgreSQL database at ``url``
    (:mod:`kgwise.app.state_pg`), whose calls (connect, statement, lock wait) fail after ``timeout_s``."""

    url: str | None = field(default=None, metadata=_doc(
        "a PostgreSQL database that several replicas share (default: the state folder)",
        example="postgresql://kgwise@127.0.0.1/kgwise"))
    timeout_s: float = field(default=2.0, metadata=_doc("seconds one database call may take", bounds="> 0"))


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """The whole pipeline, read by :meth:`load` from one TOML file (``path``)."""

    path: Path
    kg: KGConfig
    arms: tuple[ArmConfig, ...]
    router: RouterConfig
    answer_sets: AnswerSetConfig
    state: StateConfig = StateConfig()
    linking: LinkTable = LinkTable()

    def arm(self, name: str) -> ArmConfig:
        for a in self.arms:
            if a.name == name:
                return a
        raise ConfigError(f"no arm named {name!r}; arms: {', '.join(a.name for a in self.arms)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arms)

    @property
    def free_arms(self) -> tuple[str, ...]:
        """The arms whose answers a ``question+free`` context reads (:attr:`ArmConfig.free`), in order."""
        return tuple(a.name for a in self.arms if a.free)

    def fingerprint(self) -> dict[str, Any]:
        """The config as plain JSON data (what fit logs and states are checked against), without where the
        state lives (a database URL may hold a password, and moving the state changes no answer);
        ``linking`` only when set, so logs written before it existed stay valid."""
        out = json.loads(json.dumps(dataclasses.asdict(self), default=str))
        del out["state"]
        if self.linking == LinkTable():
            del out["linking"]
        return out

    @classmethod
    def load(cls, path: str | Path) -> PipelineConfig:
        """Read and validate ``path``; ``DataError`` naming file, line and key of the first fault."""
        return _Reader(Path(path)).read()


_INJECT_ONLY_KEYS = _keys_of(ArmConfig, "inject") - _keys_of(ArmConfig, "llm")
"""Keys of an arm table only an ``inject`` arm takes."""


class _Reader:
    """Reads one config file, remembering its text to name the line of a faulty key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise DataError("config file not found", path) from None
        except IsADirectoryError:
            raise DataError("is a directory, not a config file", path) from None
        try:
            self.doc = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            if _router_file(self.text):
                raise DataError(ROUTER_FILE_REFUSED, path) from None
            raise DataError(f"not valid TOML: {exc}", path, getattr(exc, "lineno", None)) from exc

    # ------------------------------------------------------------------ errors
    def line(self, table: str, key: str | None = None, index: int | None = None) -> int | None:
        """The line of ``key`` in table ``table`` (the ``index``-th ``[[table]]`` for arrays), or of the
        table's header when ``key`` is None or not found; None when the table is not written."""
        header = None
        count = -1
        current = False
        for n, raw in enumerate(self.text.splitlines(), 1):
            s = raw.strip()
            if s.startswith("["):
                name = s.strip("[] \t").split("#")[0].strip().strip("[]").strip()
                if s.startswith("[[") and name == table:
                    count += 1
                    current = index is not None and count == index
                else:
                    current = name == table and index is None
                if current:
                    header = n
                continue
            if current and key is not None and re.match(rf"^\s*{re.escape(key)}\s*=", raw):
                return n
        return header

    def fail(self, message: str, table: str, key: str | None = None, index: int | None = None) -> DataError:
        where = table if index is None else f"{table}[{index}]"
        label = f"{where}.{key}" if key is not None else f"[{where}]"
        return DataError(f"{label}: {message}", self.path, self.line(table, key, index))

    def resolve(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else (self.path.parent / p)

    # ------------------------------------------------------------------ tables
    def read(self) -> PipelineConfig:
        unknown = [k for k in self.doc if k not in _TABLES]
        if unknown:
            raise DataError(f"unknown table(s) {', '.join(f'[{k}]' for k in unknown)}; the tables are "
                            f"{', '.join(_TABLES)}", self.path, self.line(unknown[0]))
        for name in ("kg", "router", "coke", "answer_sets", "linking", "state"):
            if name in self.doc and not isinstance(self.doc[name], dict):
                raise self.fail("must be a table", name)
        kg = self.kg(self.doc.get("kg"))
        router = self.router(self.doc.get("router"))
        arms = self.arms(self.doc.get("arms"), router.unit)
        if reads_free(router.context) and not any(a.free for a in arms):
            raise self.fail(f"{router.context!r} needs a free arm (observe = true, no price: a kgm arm), and "
                            "no arm is free", "router", "context")
        sets = self.answer_sets(self.doc.get("answer_sets", {}))
        return PipelineConfig(self.path, kg, arms, router, sets, self.state(self.doc.get("state", {})),
                              self.linking(self.doc.get("linking", {})))

    def linking(self, data: dict[str, Any]) -> LinkTable:
        self._keys(data, _keys_of(LinkTable), "linking")
        return LinkTable(**{f.name: self._scalar(data, LinkTable, f.name, "linking")
                            for f in file_fields(LinkTable)})

    def state(self, data: dict[str, Any]) -> StateConfig:
        self._keys(data, _keys_of(StateConfig), "state")
        url = self._str(data, "url", "state")
        if url is not None and not url.startswith(("postgresql://", "postgres://")):
            raise self.fail(f"must be a postgresql:// URL (without it the state is the folder), got {url!r}",
                            "state", "url")
        return StateConfig(url, self._scalar(data, StateConfig, "timeout_s", "state"))

    def _scalar(self, data: dict[str, Any], cls: type, name: str, table: str, index: int | None = None,
                default: Any = None) -> Any:
        """Field ``name`` of config ``cls`` from ``data``, checked against the field's type (a boolean, a
        whole number, a finite number, one of a ``Literal``'s values) and ``bounds``; absent: ``default``,
        else the field's default."""
        f = next(f for f in dataclasses.fields(cls) if f.name == name)
        key = file_key(f)
        if key not in data:
            return default if default is not None else field_default(cls, name)
        value, kind = data[key], _value_type(cls, name)
        if kind is bool:
            ok, need = isinstance(value, bool), "true or false"
        elif kind is int:
            ok, need = isinstance(value, int) and not isinstance(value, bool), "a whole number"
        elif kind is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            need = "a finite number"
        else:
            options = get_args(kind)
            ok, need = value in options, f"{', '.join(options[:-1])} or {options[-1]}"
        bounds = f.metadata["bounds"]
        if ok and bounds is not None and not _BOUNDS[bounds](value):
            interval = bounds.startswith(("(", "["))
            ok, need = False, f"in {bounds}" if interval else f"{need.replace('finite ', '')} {bounds}"
        if not ok:
            raise self.fail(f"must {'lie' if need.startswith('in ') else 'be'} {need}, got {value!r}", table,
                            key, index)
        return float(value) if kind is float else value

    def _keys(self, data: dict[str, Any], allowed: set[str], table: str, index: int | None = None) -> None:
        for key in data:
            if key not in allowed:
                raise self.fail(f"unknown key; [{table}] has {', '.join(sorted(allowed))}", table, key, index)

    def _str(self, data: dict[str, Any], key: str, table: str, index: int | None = None) -> str | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(f"must be a non-empty string, got {value!r}", table, key, index)
        return value.strip()

    def _number(self, data: dict[str, Any], key: str, table: str, index: int | None = None) -> float | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.fail(f"must be a finite number, got {value!r}", table, key, index)
        return float(value)

    def _file(self, data: dict[str, Any], key: str, table: str, index: int | None = None,
              what: str = "file") -> Path | None:
        value = self._str(data, key, table, index)
        if value is None:
            return None
        p = self.resolve(value)
        if not p.exists():
            raise self.fail(f"{what} {p} does not exist", table, key, index)
        return p

    def kg(self, data: dict[str, Any] | None) -> KGConfig:
        if data is None:
            raise DataError("missing table [kg]: give graph = FILE, source = PATH with format = NAME, or "
                            "sparql = URL", self.path)
        self._keys(data, _keys_of(KGConfig), "kg")
        index = self._file(data, "index", "kg", what="label index")
        given = [k for k in ("graph", "source", "sparql") if k in data]
        if len(given) != 1:
            raise self.fail("give exactly one of graph, source (with format) or sparql"
                            + (f", not {' and '.join(given)}" if given else ""), "kg",
                            given[1] if len(given) > 1 else None)
        if "sparql" in data:
            url = self._str(data, "sparql", "kg") or ""
            if not url.startswith(("http://", "https://")):
                raise self.fail(f"must be an http(s) URL, got {url!r}", "kg", "sparql")
            return KGConfig(sparql=url, index=index)
        if "graph" in data:
            if "format" in data:
                raise self.fail("format goes with source, not with graph", "kg", "format")
            return KGConfig(graph=self._file(data, "graph", "kg", what="graph file"), index=index)
        fmt = self._str(data, "format", "kg")
        from kgwise.kg.loaders import FORMATS

        if fmt not in FORMATS:
            raise self.fail(f"must be one of {', '.join(FORMATS)}, got {fmt!r}", "kg", "format")
        return KGConfig(source=self._file(data, "source", "kg", what="source"), format=fmt, index=index)

    def router(self, data: dict[str, Any] | None) -> RouterConfig:
        if data is None:
            raise DataError("missing table [router]: give budget_usd or budget_calls", self.path)
        self._keys(data, _keys_of(RouterConfig), "router")
        given = [k for k in ("budget_usd", "budget_calls") if k in data]
        if len(given) != 1:
            raise self.fail("give exactly one of budget_usd or budget_calls"
                            + (", not both" if len(given) > 1 else ""), "router",
                            given[1] if len(given) > 1 else None)
        key = given[0]
        budget = self._number(data, key, "router")
        if budget is None or budget <= 0:
            raise self.fail(f"the budget must be > 0, got {data[key]!r}", "router", key)
        values = {f.name: self._scalar(data, RouterConfig, f.name, "router")
                  for f in file_fields(RouterConfig) if f.name != "budget"}
        coke = self.coke(self.doc.get("coke", {}), PACED_COKE if values["horizon"] is not None else None)
        if coke.pacing == "price" and values["horizon"] is None:
            raise self.fail("pacing = 'price' needs [router] horizon", "coke", "pacing")
        values["external_ttl_s"] = values["external_ttl_s"] or None  # 0: never
        return RouterConfig(budget, "usd" if key == "budget_usd" else "calls", coke=coke, **values)

    def coke(self, data: dict[str, Any], defaults: dict[str, Any] | None = None) -> CokeConfig:
        """``[coke]`` checked as :func:`kgwise.settings.read_section` checks it (strict types, the config's
        own range checks), starting from the commands' default overlaid with ``defaults``."""
        from kgwise import settings

        cls = settings.section_class("coke")
        names = {f.name for f in dataclasses.fields(cls)}
        self._keys(data, names, "coke")
        base = {**dataclasses.asdict(settings.default("coke")), **(defaults or {})}
        full = {k: v for k, v in {**base, **data}.items() if v is not None}
        try:
            cfg = TypeAdapter(cls).validate_json(json.dumps(full), strict=True)
        except ValidationError as exc:
            err = exc.errors()[0]
            msg = err["msg"]
            named = [k for k in data if k in msg or (k == "lam" and "lambda" in msg)]
            key = str(err["loc"][0]) if err["loc"] else (named[0] if named else None)
            raise self.fail(err["msg"].removeprefix("Value error, "), "coke", key) from exc
        assert isinstance(cfg, CokeConfig)
        return cfg

    def arms(self, data: Any, unit: Unit) -> tuple[ArmConfig, ...]:
        if data is None:
            raise DataError("no [[arms]]: give at least one arm (name, kind, spec or model)", self.path)
        if not isinstance(data, list) or not all(isinstance(a, dict) for a in data) or not data:
            raise DataError("arms must be an array of tables ([[arms]])", self.path, self.line("arms"))
        out: list[ArmConfig] = []
        for i, raw in enumerate(data):
            arm = self.arm(raw, i, unit)
            if arm.name in {a.name for a in out}:
                raise self.fail(f"arm name {arm.name!r} is used twice", "arms", "name", i)
            out.append(arm)
        return tuple(out)

    def arm(self, data: dict[str, Any], i: int, unit: Unit) -> ArmConfig:
        self._keys(data, _keys_of(ArmConfig), "arms", i)
        name = self._str(data, "name", "arms", i)
        if name is None:
            raise self.fail("every arm needs a name", "arms", None, i)
        kind = self._str(data, "kind", "arms", i)
        if kind not in ARM_KINDS:
            raise self.fail(f"unknown arm kind {kind!r}; use one of {', '.join(ARM_KINDS)}", "arms",
                            "kind", i)
        cluster = self._scalar(data, ArmConfig, "cluster", "arms", i, arm_default("cluster", kind, None))
        reported = self._scalar(data, ArmConfig, "reported_accuracy", "arms", i)
        if kind == "external":
            return self.external_arm(data, i, name, cluster, unit, reported)
        spec = self._str(data, "spec", "arms", i)
        model: Path | None = None
        if kind == "kgm":
            if spec is not None:
                raise self.fail("a kgm arm names its trained model file with model = FILE, not spec",
                                "arms", "spec", i)
            if "model" not in data:
                raise self.fail("a kgm arm needs model = FILE (from `kgwise kg model train`)", "arms", None,
                                i)
            model = self._file(data, "model", "arms", i, "model file")
        else:
            if spec is None:
                raise self.fail(f"an {kind} arm needs spec = LLM (e.g. smollm2-135m, gguf:PATH, "
                                "openai:MODEL)", "arms", None, i)
            if "model" in data:
                raise self.fail("model = FILE is for kgm arms; an LLM arm names its model with spec",
                                "arms", "model", i)
            if spec.startswith("gguf:") and not self.resolve(spec[5:]).is_file():
                raise self.fail(f"model file {self.resolve(spec[5:])} does not exist", "arms", "spec", i)
            if spec.startswith("gguf:"):
                spec = f"gguf:{self.resolve(spec[5:])}"
            else:
                from kgwise.llm import backend_for

                try:  # names the backend without loading a model: an unknown name fails here, not at ask
                    backend_for(spec)
                except ConfigError as exc:
                    raise self.fail(str(exc), "arms", "spec", i) from exc
        base_url = self._str(data, "base_url", "arms", i)
        if base_url is not None:
            if kind == "kgm":
                raise self.fail("base_url is for LLM arms", "arms", "base_url", i)
            if not base_url.startswith(("http://", "https://")):
                raise self.fail(f"must be an http(s) URL, got {base_url!r}", "arms", "base_url", i)
            if spec is not None and not spec.startswith("openai:"):
                raise self.fail("an arm behind base_url needs spec = openai:MODEL (the served model's "
                                "name)", "arms", "spec", i)
        stray = [k for k in data if k in _INJECT_ONLY_KEYS]
        if stray and kind != "inject":
            raise self.fail(f"{stray[0]} is for inject arms", "arms", stray[0], i)
        combos = self.combos(data, i)
        budget = data.get("knowledge_tokens", KNOWLEDGE_TOKENS)
        if budget != "full" and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise self.fail(f'must be a whole number ≥ 1 or "full", got {budget!r}', "arms",
                            "knowledge_tokens", i)
        ratio = data.get("knowledge_ratio", KNOWLEDGE_RATIO)
        if ratio != "off" and (isinstance(ratio, bool) or not isinstance(ratio, int | float)
                               or not ratio > 0):
            raise self.fail(f'must be a number > 0 or "off", got {ratio!r}', "arms", "knowledge_ratio", i)
        scoring = self._str(data, "scoring", "arms", i) or arm_default("scoring", kind, spec)
        if scoring not in SCORING_RULES:
            raise self.fail(f"must be sum, mean or pmi, got {scoring!r}", "arms", "scoring", i)
        observe = self._scalar(data, ArmConfig, "observe", "arms", i, arm_default("observe", kind, spec))
        max_tokens = self._scalar(data, ArmConfig, "max_tokens", "arms", i)
        per_call, price_model = self.price(data, i, kind, spec, base_url, unit)
        from_usage = unit == "usd" and "price" not in data and price_model is None and kind != "kgm"
        return ArmConfig(
            name=name, kind=kind, cluster=cluster, spec=spec, model=model,
            data=self._file(data, "data", "arms", i, "data directory"), per_call=per_call,
            price_model=price_model, base_url=base_url, api_key_env=self._str(data, "api_key_env", "arms", i),
            scoring=scoring, policy=self._file(data, "policy", "arms", i, "P_RL policy"),
            bandit=self._file(data, "bandit", "arms", i, "prompt bandit"),
            combo=self._str(data, "combo", "arms", i), combos=combos, observe=observe, max_tokens=max_tokens,
            cost_from_usage=from_usage, reported_accuracy=reported,
            knowledge_tokens=None if budget == "full" else budget,
            knowledge_ratio=None if ratio == "off" else float(ratio))

    def external_arm(self, data: dict[str, Any], i: int, name: str, cluster: Cluster, unit: Unit,
                     reported: float | None) -> ArmConfig:
        """An arm the caller runs: its ``price`` is the cost bound its decisions hold (module docstring)."""
        allowed = _keys_of(ArmConfig, "external")
        for key in data:
            if key not in allowed:
                raise self.fail(f"not for an external arm (the caller runs its model); an external arm has "
                                f"{', '.join(sorted(allowed))}", "arms", key, i)
        price = self._number(data, "price", "arms", i)
        if price is None and unit == "usd":
            raise self.fail("an external arm needs price = USD, the most one call may cost (the bound its "
                            "decision holds)", "arms", None, i)
        if price is not None and price < 0:
            raise self.fail(f"a price must be ≥ 0, got {data['price']!r}", "arms", "price", i)
        return ArmConfig(name=name, kind="external", cluster=cluster,
                         per_call=1.0 if price is None else price, reported_accuracy=reported)

    def combos(self, data: dict[str, Any], i: int) -> tuple[str, ...]:
        """An inject arm's ``combos``: ``"all"`` or a list of ≥ 2 distinct combinations, without ``combo``
        or ``bandit`` (which fix the choice), P_RL ones only with a ``policy``."""
        from kgwise.inject.combination import Combination

        raw = data.get("combos")
        if raw is None:
            return ()
        for other in ("combo", "bandit"):
            if other in data:
                raise self.fail(f"give {other} (fixed) or combos (learnt by `kgwise fit`), not both", "arms",
                                "combos", i)
        if raw == "all":
            return ("all",)
        if (not isinstance(raw, list) or len(raw) < 2 or not all(isinstance(c, str) for c in raw)
                or len(set(raw)) != len(raw)):
            raise self.fail(f'must be "all" or a list of two or more distinct combinations such as '
                            f'["P_sub+F_t", "P_sub+F_s"], got {raw!r}', "arms", "combos", i)
        for c in raw:
            try:
                parsed = Combination.parse(c)
            except ConfigError as exc:
                raise self.fail(str(exc), "arms", "combos", i) from None
            if parsed.extractor == "P_RL" and "policy" not in data:
                raise self.fail(f"{c!r} needs a trained P_RL policy (policy = FILE)", "arms", "combos", i)
        return tuple(raw)

    def price(self, data: dict[str, Any], i: int, kind: str, spec: str | None, base_url: str | None,
              unit: Unit) -> tuple[float, str | None]:
        """``(per-call cost, price-table model)`` of an arm in the budget's unit (see the module doc)."""
        given = self._number(data, "price", "arms", i)
        if given is not None:
            if given < 0:
                raise self.fail(f"a price must be ≥ 0, got {data['price']!r}", "arms", "price", i)
            return given, None
        if kind == "kgm":
            return 0.0, None
        if unit == "calls":
            return 1.0, None
        assert spec is not None
        if spec.startswith("openai"):
            model = spec.split(":", 1)[1] if ":" in spec else ""
            if not model or default_prices().lookup(model) is None:
                raise self.fail(f"model {model or spec!r} is not in the price table; give price = USD per "
                                "call", "arms", "spec", i)
            if base_url is not None:
                raise self.fail("an arm on your own server (base_url) has no list price; give price = USD "
                                "per call (0 for a free local server)", "arms", "base_url", i)
            return 0.0, model
        return 0.0, None  # an in-process local model: no dollars

    def answer_sets(self, data: dict[str, Any]) -> AnswerSetConfig:
        self._keys(data, _keys_of(AnswerSetConfig), "answer_sets")
        values = {f.name: self._scalar(data, AnswerSetConfig, f.name, "answer_sets")
                  for f in file_fields(AnswerSetConfig) if f.name != "uag_llm"}
        uag_llm = self._str(data, "uag_llm", "answer_sets")
        if uag_llm is not None:
            if uag_llm.startswith("openai:"):
                raise self.fail("must be a local model (smollm2-135m, gemma3-270m, gguf:PATH): the budget "
                                "does not pay for the calls that write UAG's Φ(P)", "answer_sets", "uag_llm")
            if uag_llm.startswith("gguf:"):
                if not self.resolve(uag_llm[5:]).is_file():
                    raise self.fail(f"model file {self.resolve(uag_llm[5:])} does not exist", "answer_sets",
                                    "uag_llm")
                uag_llm = f"gguf:{self.resolve(uag_llm[5:])}"
        return AnswerSetConfig(uag_llm=uag_llm, **values)


ROUTER_FILE_REFUSED = (
    "a Coke router state file (written by `kgwise route init` before external routing joined the pipeline), "
    "not a pipeline config: it is neither read nor migrated. Write a kgwise.toml whose [[arms]] have "
    "kind = \"external\" (its price: the arm's largest cost bound, the file's max_costs; see "
    "docs/external-routing.md), then `kgwise serve --config kgwise.toml`; the router starts from its priors "
    "(settle the file's waiting decisions with the kgwise that wrote it first: their spending is not "
    "carried over)")
"""Why a router state file of the previous version is refused, and what to do instead."""


def _router_file(text: str) -> bool:
    """Whether ``text`` is a JSON router state file (``"kind": "CokeRouter"``)."""
    try:
        body = json.loads(text)
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("kind") == "CokeRouter"


def _price_of(name: str, text: str) -> float:
    """An external arm's ``--arm NAME=external:PRICE`` price."""
    try:
        price = float(text)
    except ValueError:
        raise ConfigError(f"arm {name!r}: an external arm is NAME=external:PRICE (the most one call may "
                          f"cost), got {text!r}") from None
    if not (math.isfinite(price) and price >= 0):
        raise ConfigError(f"arm {name!r}: a price must be ≥ 0, got {price}")
    return price


def _toml_value(value: Any) -> str:
    """``value`` as a TOML value (a path as its text, a tuple as an array)."""
    plain = str(value) if isinstance(value, Path) else list(value) if isinstance(value, tuple) else value
    return tomli_w.dumps({"v": plain}).split("=", 1)[1].strip()


def _table(cls: type, given: dict[str, Any], kind: str | None = None,
           default: Callable[[str], Any] | None = None,
           notes: dict[str, tuple[Any, str]] | None = None) -> list[str]:
    """The lines of a table of config ``cls`` (an arm of ``kind``: the keys that kind takes), one key a
    line with its field's one-line comment: a ``given`` value as a key, any other as a comment showing
    its default (``default(name)``, else the field's), or its example where it has none; ``notes``: a
    key's own comment, and the value it shows commented."""
    lines = []
    for f in file_fields(cls):
        if kind is not None and kind not in f.metadata["kinds"]:
            continue
        key = next((k for k in (f.metadata.get("alias"), file_key(f)) if k in given), file_key(f))
        note = (notes or {}).get(key)
        if key in given:
            value, doc, active = given[key], note[1] if note else f.metadata["doc"], True
        elif note:
            (value, doc), active = note, False
        else:
            value = default(f.name) if default is not None else field_default(cls, f.name)
            if value in (None, ()):
                value = f.metadata["example"]
            doc, active = f.metadata["doc"], False
        line = f"{key} = {_toml_value(value)}  # {doc}"
        lines.append(line if active else f"# {line}")
    return lines


def starter_toml(kg: str, arms: list[tuple[str, str, str, float | None]], budget_usd: float | None = None,
                 budget_calls: int | None = None, alpha: float | None = None) -> str:
    """A commented ``kgwise.toml`` for ``kg`` and ``arms`` (``(name, kind, spec-or-model, price)``), made
    from the config classes: every key of every table, the given ones set, the others commented out at
    their default with their field's one-line comment (:func:`_table`)."""
    if not arms:
        raise ConfigError("give at least one arm (--arm name=kind:spec[:price])")
    for name, kind, _, price in arms:
        if kind not in ARM_KINDS:
            raise ConfigError(f"arm {name!r}: unknown kind {kind!r}; use one of {', '.join(ARM_KINDS)}")
        if price is not None and not (math.isfinite(price) and price >= 0):
            raise ConfigError(f"arm {name!r}: a price must be ≥ 0, got {price}")
    if budget_usd is not None and budget_calls is not None:
        raise ConfigError("give --budget-usd or --budget-calls, not both")
    endpoint = kg.startswith(("sparql:", "http://", "https://"))
    lines = ["# kgwise pipeline: one KG, routed arms, calibrated answer sets (`kgwise ask --config FILE`).",
             "# A commented key shows its default; docs/configuration.md describes every table.", "",
             "# The KG: exactly one of graph, source (with format) or sparql.", "[kg]",
             *_table(KGConfig, {"sparql": kg.removeprefix("sparql:")} if endpoint else {"graph": kg}),
             "", *ladder_comment()]
    for name, kind, target, price in arms:
        given: dict[str, Any] = {"name": name, "kind": kind, "cluster": arm_default("cluster", kind, None)}
        notes: dict[str, tuple[Any, str]] = {}
        if kind == "external":  # NAME=external:PRICE — the caller runs it; PRICE bounds one call
            given["price"] = price if price is not None else _price_of(name, target)
        else:
            given["model" if kind == "kgm" else "spec"] = target
            if price is not None:
                given["price"] = price
            local = LOCAL_MODELS.get(target) if kind != "kgm" else None
            if local is not None:
                given["scoring"] = local.scoring
                others = ", ".join(r for r in SCORING_RULES if r != local.scoring)
                notes["scoring"] = (None, f"measured best for {target} on dev questions; or {others}")
                notes["price"] = (local.seconds_per_question, "its seconds per question (above): price each "
                                  "arm so, and budget_calls counts machine seconds")
        defaults = partial(arm_default, kind=kind, spec=target)
        lines += ["", "[[arms]]", *_table(ArmConfig, given, kind, defaults, notes)]
    budget = {"budget_calls": budget_calls} if budget_calls is not None else {
        "budget_usd": budget_usd if budget_usd is not None else STARTER_BUDGET_USD}
    sets = {"alpha": alpha} if alpha is not None else {}
    lines += ["", "# The router (Coke) and its budget.", "[router]", *_table(RouterConfig, budget), "",
              "# Coke's hyper-parameters (the paper's; paced values with a horizon): advanced, see",
              "# `kgwise eval config show coke` and docs/configuration.md.", "[coke]",
              *(f"# {k} = {_toml_value(v)}" for k, v in _plain_coke().items()), "",
              "# Calibrated answer sets.", "[answer_sets]", *_table(AnswerSetConfig, sets), "",
              "# How the question and choices link to KG nodes (`kgwise kg ground` shows each link's score).",
              "[linking]", *_table(LinkTable, {}), "",
              "# Where the router, budget, decisions and calibrations live (default: the state folder).",
              "[state]", *_table(StateConfig, {}), ""]
    return "\n".join(lines)


def _plain_coke() -> dict[str, Any]:
    """Coke's defaults as the ``[coke]`` keys, an unset one (TOML has no null) at its paced value."""
    return {k: PACED_COKE[k] if v is None else v for k, v in dataclasses.asdict(CokeConfig()).items()}
