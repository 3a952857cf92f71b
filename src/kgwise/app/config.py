"""``PipelineConfig``: the whole system in one TOML file (``kgwise.toml``), validated strictly.

Tables:

* ``[kg]`` — one of ``graph = FILE`` (a built ``.npz``, a ``.tsv``/``.nt`` triple file, RoG data),
  ``source = PATH`` with ``format = NAME`` (built on load by :func:`kgwise.kg.loaders.load_graph`), or
  ``sparql = URL``; optionally ``index = FILE``, a label index of the KG (``kgwise kg index build``) that
  free text is grounded over (an endpoint without one gets one built from its labels and cached);
* ``[[arms]]`` — each ``name``, ``kind`` (``kgm``: a trained KG model file ``model``; ``llm``: an LLM
  ``spec``, optionally behind an OpenAI-compatible ``base_url``; ``inject``: an LLM ``spec`` with KnowGPT's
  knowledge injection, optional ``policy``/``bandit``/``combo``, or ``combos``: the combinations — a list,
  or ``"all"`` — whose prompt bandit ``kgwise fit`` learns on the dev log), ``cluster`` (``KGM``/``LLM``,
  default by kind), ``price`` (cost of one call in the budget's unit; default: the price table's token
  prices for ``openai:MODEL`` arms in dollars, one per LLM call in calls, nothing for local models and KG
  models); ``external``: a model the caller runs itself (:meth:`kgwise.app.Pipeline.route` picks it,
  :meth:`~kgwise.app.Pipeline.settle` pays what it cost), with ``price`` the most one call may cost — the
  bound its decision holds (required with ``budget_usd``; one call with ``budget_calls``) — and only
  ``cluster`` and ``reported_accuracy`` besides;
* ``[router]`` — ``budget_usd`` or ``budget_calls`` (> 0), ``horizon`` (questions the budget is paced
  over), ``seed``, ``observe_free``, ``context`` (``"question"``: the router's LinUCB context is the
  question embedding; ``"question+free"``: the free arms — ``observe`` arms with no price — answer every
  question before routing and what they say is joined to it, :func:`kgwise.route.table.free_context`;
  ``"free"``: what they say alone, a few numbers that a router learns from few questions; ``kgwise fit``
  may choose another by cross-fitting), ``pin_single_arm`` and ``routing_gain_z`` (default ``true``,
  ``1.0``: ``kgwise fit`` answers with the best affordable single arm unless routing beats it, out of
  fold, by more than that many standard errors — or, against a dearer arm, is not worse by more),
  ``external_ttl_s`` (default 3600; 0: never): how long an external arm's decision holds its cost bound
  waiting for its ``settle`` before it is called off; Coke's
  own values in ``[coke]`` (the table of
  ``kgwise config show coke``, checked by :mod:`kgwise.settings`' rules);
* ``[answer_sets]`` — ``alpha`` in (0, 1), ``delta`` in (0, 1) (the live coverage bound's level, and the
  calibration's confidence with ``guarantee = "pac"``), ``kind`` (``lac`` or ``aps``), ``guarantee``
  (``pac``, the default: training-conditional, coverage ≥ 1 − α with probability ≥ 1 − δ over the dev
  log, the kind of guarantee UAG's open sets carry; ``marginal``: split conformal, coverage ≥ 1 − α on
  average over dev logs — smaller sets, but a given log's sets fall short of 1 − α about half the time;
  ``pac_all_arms``: ``pac`` for every arm at once, δ split evenly over the arms — larger sets),
  ``calibration_share`` in (0, 1) (the part of the graded multiple-choice dev questions held out of the
  router's learning to calibrate the sets, :mod:`kgwise.app.calibration`; default 0.5), ``uag_llm`` (a
  local LLM: open
  questions get UAG's sets, calibrated by ``kgwise fit`` on the graded open dev questions with this model
  writing Φ(P), :mod:`kgwise.app.open_sets`; without it open answers carry no set) and ``uag_tune_share``
  in (0, 1) (the part of those questions that tunes UAG's grid and teaches the router; the rest is held
  out of the router's learning and calibrates UAG per routed arm; default 0.4), ``open_uncertified``
  (an open answer's set when the held-out questions routed to its arm certify no λ: ``largest``, UAG's
  largest set — every candidate its retrieval keeps, the most it can cover, as a multiple-choice arm with
  too few questions gets every choice — or ``pooled``, the set certified on all held-out open questions,
  smaller but under-covering an arm that gets the harder questions; either way without guarantee),
  ``abstain`` (default ``false``; ``true``: a multiple-choice answer is given only when its confidence
  clears the threshold certified for its routed arm — accuracy ≥ 1 − α among the answers given, with
  probability ≥ 1 − δ over the held-out dev questions — else "not sure" with the set,
  :mod:`kgwise.app.abstain`);
* ``[state]`` — where the router, budget, decisions and calibrations live: absent, the journalled state
  folder (``--state``, default ``.kgwise-state/`` beside the config); ``url = "postgresql://…"``, a
  PostgreSQL database that several ``kgwise serve`` replicas share (:mod:`kgwise.app.state_pg`), with
  ``timeout_s`` (> 0, default 2): how long a database call may take before the answer fails with
  :class:`kgwise.errors.StateUnavailableError`.

Every fault raises ``DataError`` naming the file, the line (where the key stands) and the key.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import TypeAdapter, ValidationError

from kgwise.errors import ConfigError, DataError
from kgwise.llm.local_models import LOCAL_MODELS, ladder_comment
from kgwise.llm.prices import default_prices
from kgwise.route.arms import CLUSTERS, Cluster
from kgwise.route.coke import CokeConfig

__all__ = ["ARM_KINDS", "CONTEXTS", "PACED_COKE", "AnswerSetConfig", "ArmConfig", "ArmKind", "Context",
           "KGConfig", "PipelineConfig", "RouterConfig", "StateConfig", "paced_coke", "reads_free",
           "starter_toml"]

ArmKind = Literal["kgm", "llm", "inject", "external"]
Context = Literal["question", "question+free", "free", "predicted"]
CONTEXTS: tuple[Context, ...] = ("question", "question+free", "free", "predicted")
"""``predicted``: ``[1, p_1(x) … p_m(x)]``, each arm's success predicted from what the free arms say, the
question's form and embedding by the predictor a fit learns (:mod:`kgwise.route.features`)."""


def reads_free(context: Context) -> bool:
    """Whether a router context reads what the free arms say (their answers are needed before routing)."""
    return context != "question"
ARM_KINDS: tuple[ArmKind, ...] = ("kgm", "llm", "inject", "external")
SetKind = Literal["lac", "aps"]
Guarantee = Literal["marginal", "pac", "pac_all_arms"]
OpenUncertified = Literal["largest", "pooled"]
Unit = Literal["usd", "calls"]

_TABLES = ("kg", "arms", "router", "coke", "answer_sets", "state")
_ARM_KEYS = {"name", "kind", "spec", "model", "data", "cluster", "price", "base_url", "api_key_env",
             "scoring", "policy", "bandit", "combo", "combos", "observe", "max_tokens", "reported_accuracy"}
_EXTERNAL_KEYS = {"name", "kind", "cluster", "price", "reported_accuracy"}
EXTERNAL_TTL_S = 3600.0
"""Default ``[router] external_ttl_s``: an hour, the decision lifetime the external router had before it
joined the pipeline."""


@dataclass(frozen=True, slots=True)
class KGConfig:
    """The KG: a graph file, a source to build with ``format``, or a SPARQL endpoint."""

    graph: Path | None = None
    source: Path | None = None
    format: str | None = None
    sparql: str | None = None
    index: Path | None = None

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
    """One arm. ``per_call``: cost of one call in the budget's unit; ``price_model``: a price-table model
    whose token fees are added (dollar budgets, ``openai:MODEL`` arms without an explicit ``price``);
    ``cost_from_usage``: the dollars the backend itself reports (``Usage.cost``) are added (dollar
    budgets, arms without a price of either kind: 0 for an in-process model, the recorded cost for a
    replayed one). ``reported_accuracy``: the arm's published accuracy, the mean of its cluster's
    Beta prior (Coke Eq. 3–4; None: no prior information). ``free``: it answers without cost (``observe``
    and no price), so a ``question+free`` router context can ask it before routing. ``combos`` (inject
    arms): the (extractor+format) combinations ``kgwise fit`` learns the arm's prompt bandit over
    (``("all",)``: every one the arm can build)."""

    name: str
    kind: ArmKind
    cluster: Cluster
    spec: str | None = None
    model: Path | None = None
    data: Path | None = None
    per_call: float = 0.0
    price_model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    scoring: str = "sum"
    policy: Path | None = None
    bandit: Path | None = None
    combo: str | None = None
    combos: tuple[str, ...] = ()
    observe: bool = False
    max_tokens: int = 64
    cost_from_usage: bool = False
    reported_accuracy: float | None = None

    @property
    def free(self) -> bool:
        return self.observe and self.per_call == 0 and self.price_model is None

    @property
    def external(self) -> bool:
        """Whether the caller runs this arm (``route``/``settle``); ``per_call`` is then its cost bound."""
        return self.kind == "external"

    def fingerprint(self) -> dict[str, Any]:
        """The fields as JSON values (resume logs key calls by them); ``combos`` only when set, so logs
        written before it existed stay valid."""
        out: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(self), default=str))
        if not self.combos:
            del out["combos"]
        return out

    @property
    def is_api(self) -> bool:
        """Whether the arm calls a server (concurrent calls help) rather than an in-process model."""
        return self.kind != "kgm" and (self.base_url is not None or str(self.spec).startswith("openai"))


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
    """Budget (in ``unit``: dollars or LLM calls), pacing horizon, seed, Coke's values, whether free arms
    marked ``observe`` answer every question so that feedback teaches the router their outcome too, and
    whether :func:`kgwise.app.fit.fit` pins the best affordable single arm where routing does not clear it
    by ``routing_gain_z`` standard errors (:meth:`kgwise.route.tuning.RoutingGain.pays`);
    ``external_ttl_s``: how long an external arm's decision waits for its settle (None: for ever)."""

    budget: float
    unit: Unit
    horizon: int | None = None
    seed: int = 0
    observe_free: bool = True
    coke: CokeConfig = dataclasses.field(default_factory=CokeConfig)
    context: Context = "question"
    pin_single_arm: bool = True
    routing_gain_z: float = 1.0
    external_ttl_s: float | None = EXTERNAL_TTL_S


@dataclass(frozen=True, slots=True)
class AnswerSetConfig:
    """Target miscoverage ``alpha``, the level ``delta`` of the live coverage bound (and of the calibration
    with ``guarantee = "pac"`` or ``"pac_all_arms"``), the multiple-choice non-conformity score ``kind``,
    and the ``guarantee`` (see the module docstring), and the ``calibration_share`` of the graded
    multiple-choice dev questions that :func:`kgwise.app.fit.fit` holds out of the router's learning to
    calibrate the sets; ``uag_llm``: the local LLM that writes Φ(P) for UAG's sets on open questions
    (None: no set), ``uag_tune_share``: the part of the graded open dev questions that tunes UAG's grid
    (and teaches the router; the rest is held out of it to calibrate, :mod:`kgwise.app.open_sets`);
    ``open_uncertified``: an open answer's set when its arm's held-out questions certify nothing;
    ``abstain``: answer a multiple-choice question only when the arm's certified confidence threshold
    promises accuracy ≥ 1 − α among its answers with probability ≥ 1 − δ, else "not sure"
    (:mod:`kgwise.app.abstain`)."""

    alpha: float = 0.1
    delta: float = 0.05
    kind: SetKind = "lac"
    guarantee: Guarantee = "pac"
    calibration_share: float = 0.5
    uag_llm: str | None = None
    uag_tune_share: float = 0.4
    open_uncertified: OpenUncertified = "largest"
    abstain: bool = False


@dataclass(frozen=True, slots=True)
class StateConfig:
    """Where the pipeline's state lives: ``url`` None, the state folder; a ``postgresql://`` URL, that
    database (:mod:`kgwise.app.state_pg`); ``timeout_s``: the most one database call may take (connect,
    statement, lock wait) before it fails fast."""

    url: str | None = None
    timeout_s: float = 2.0


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """The whole pipeline, read by :meth:`load` from one TOML file (``path``)."""

    path: Path
    kg: KGConfig
    arms: tuple[ArmConfig, ...]
    router: RouterConfig
    answer_sets: AnswerSetConfig
    state: StateConfig = StateConfig()

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
        state lives (a database URL may hold a password, and moving the state changes no answer)."""
        out = json.loads(json.dumps(dataclasses.asdict(self), default=str))
        del out["state"]
        return out

    @classmethod
    def load(cls, path: str | Path) -> PipelineConfig:
        """Read and validate ``path``; ``DataError`` naming file, line and key of the first fault."""
        return _Reader(Path(path)).read()


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
        for name in ("kg", "router", "coke", "answer_sets", "state"):
            if name in self.doc and not isinstance(self.doc[name], dict):
                raise self.fail("must be a table", name)
        kg = self.kg(self.doc.get("kg"))
        router = self.router(self.doc.get("router"))
        arms = self.arms(self.doc.get("arms"), router.unit)
        if reads_free(router.context) and not any(a.free for a in arms):
            raise self.fail(f"{router.context!r} needs a free arm (observe = true, no price: a kgm arm), and "
                            "no arm is free", "router", "context")
        sets = self.answer_sets(self.doc.get("answer_sets", {}))
        return PipelineConfig(self.path, kg, arms, router, sets, self.state(self.doc.get("state", {})))

    def state(self, data: dict[str, Any]) -> StateConfig:
        self._keys(data, {"url", "timeout_s"}, "state")
        url = self._str(data, "url", "state")
        if url is not None and not url.startswith(("postgresql://", "postgres://")):
            raise self.fail(f"must be a postgresql:// URL (without it the state is the folder), got {url!r}",
                            "state", "url")
        timeout = self._number(data, "timeout_s", "state")
        if timeout is not None and timeout <= 0:
            raise self.fail(f"must be > 0 seconds, got {data['timeout_s']!r}", "state", "timeout_s")
        return StateConfig(url, 2.0 if timeout is None else timeout)

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
        self._keys(data, {"graph", "source", "format", "sparql", "index"}, "kg")
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
        self._keys(data, {"budget_usd", "budget_calls", "horizon", "seed", "observe_free", "context",
                          "pin_single_arm", "routing_gain_z", "external_ttl_s"}, "router")
        given = [k for k in ("budget_usd", "budget_calls") if k in data]
        if len(given) != 1:
            raise self.fail("give exactly one of budget_usd or budget_calls"
                            + (", not both" if len(given) > 1 else ""), "router",
                            given[1] if len(given) > 1 else None)
        key = given[0]
        budget = self._number(data, key, "router")
        if budget is None or budget <= 0:
            raise self.fail(f"the budget must be > 0, got {data[key]!r}", "router", key)
        horizon = data.get("horizon")
        if horizon is not None and (isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1):
            raise self.fail(f"must be a whole number of questions ≥ 1, got {horizon!r}", "router", "horizon")
        seed = data.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise self.fail(f"must be a whole number, got {seed!r}", "router", "seed")
        observe = data.get("observe_free", True)
        if not isinstance(observe, bool):
            raise self.fail(f"must be true or false, got {observe!r}", "router", "observe_free")
        coke = self.coke(self.doc.get("coke", {}), PACED_COKE if horizon is not None else None)
        if coke.pacing == "price" and horizon is None:
            raise self.fail("pacing = 'price' needs [router] horizon", "coke", "pacing")
        context = data.get("context", "question")
        if context not in CONTEXTS:
            raise self.fail(f"must be one of {', '.join(map(repr, CONTEXTS))}, got {context!r}", "router",
                            "context")
        pin = data.get("pin_single_arm", True)
        if not isinstance(pin, bool):
            raise self.fail(f"must be true or false, got {pin!r}", "router", "pin_single_arm")
        z = self._number(data, "routing_gain_z", "router")
        if z is not None and not (math.isfinite(z) and z >= 0):
            raise self.fail(f"must be a number of standard errors ≥ 0, got {data['routing_gain_z']!r}",
                            "router", "routing_gain_z")
        ttl = self._number(data, "external_ttl_s", "router")
        if ttl is not None and ttl < 0:
            raise self.fail(f"must be seconds ≥ 0 (0: never), got {data['external_ttl_s']!r}", "router",
                            "external_ttl_s")
        unit: Unit = "usd" if key == "budget_usd" else "calls"
        return RouterConfig(budget, unit, horizon, seed, observe, coke, context, pin,
                            1.0 if z is None else z,
                            EXTERNAL_TTL_S if ttl is None else (ttl or None))

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
        self._keys(data, _ARM_KEYS, "arms", i)
        name = self._str(data, "name", "arms", i)
        if name is None:
            raise self.fail("every arm needs a name", "arms", None, i)
        kind = self._str(data, "kind", "arms", i)
        if kind not in ARM_KINDS:
            raise self.fail(f"unknown arm kind {kind!r}; use one of {', '.join(ARM_KINDS)}", "arms",
                            "kind", i)
        cluster = self._str(data, "cluster", "arms", i) or ("KGM" if kind == "kgm" else "LLM")
        if cluster not in CLUSTERS:
            raise self.fail(f"must be one of {', '.join(CLUSTERS)}, got {cluster!r}", "arms", "cluster", i)
        reported = self._number(data, "reported_accuracy", "arms", i)
        if reported is not None and not 0.0 <= reported <= 1.0:
            raise self.fail(f"must lie in [0, 1], got {data['reported_accuracy']!r}", "arms",
                            "reported_accuracy", i)
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
        for key in ("policy", "bandit", "combo", "combos"):
            if key in data and kind != "inject":
                raise self.fail(f"{key} is for inject arms", "arms", key, i)
        combos = self.combos(data, i)
        scoring = self._str(data, "scoring", "arms", i) or "sum"
        if scoring not in ("sum", "mean", "pmi"):
            raise self.fail(f"must be sum, mean or pmi, got {scoring!r}", "arms", "scoring", i)
        observe = data.get("observe", kind == "kgm")
        if not isinstance(observe, bool):
            raise self.fail(f"must be true or false, got {observe!r}", "arms", "observe", i)
        max_tokens = data.get("max_tokens", 64)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise self.fail(f"must be a whole number ≥ 1, got {max_tokens!r}", "arms", "max_tokens", i)
        per_call, price_model = self.price(data, i, kind, spec, base_url, unit)
        from_usage = unit == "usd" and "price" not in data and price_model is None and kind != "kgm"
        return ArmConfig(
            name=name, kind=kind, cluster=cluster, spec=spec, model=model,
            data=self._file(data, "data", "arms", i, "data directory"), per_call=per_call,
            price_model=price_model, base_url=base_url, api_key_env=self._str(data, "api_key_env", "arms", i),
            scoring=scoring, policy=self._file(data, "policy", "arms", i, "P_RL policy"),
            bandit=self._file(data, "bandit", "arms", i, "prompt bandit"),
            combo=self._str(data, "combo", "arms", i), combos=combos, observe=observe, max_tokens=max_tokens,
            cost_from_usage=from_usage, reported_accuracy=reported)

    def external_arm(self, data: dict[str, Any], i: int, name: str, cluster: Cluster, unit: Unit,
                     reported: float | None) -> ArmConfig:
        """An arm the caller runs: its ``price`` is the cost bound its decisions hold (module docstring)."""
        for key in data:
            if key not in _EXTERNAL_KEYS:
                raise self.fail(f"not for an external arm (the caller runs its model); an external arm has "
                                f"{', '.join(sorted(_EXTERNAL_KEYS))}", "arms", key, i)
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
        self._keys(data, {"alpha", "delta", "kind", "guarantee", "calibration_share", "uag_llm",
                          "uag_tune_share", "open_uncertified", "abstain"}, "answer_sets")
        given: dict[str, Any] = {}  # the keys the file sets; AnswerSetConfig holds the defaults
        for key in ("alpha", "delta", "calibration_share", "uag_tune_share"):
            value = self._number(data, key, "answer_sets")
            if value is not None:
                if not 0.0 < value < 1.0:
                    raise self.fail(f"must lie in (0, 1), got {data[key]!r}", "answer_sets", key)
                given[key] = value
        for key, allowed in (("kind", SetKind), ("guarantee", Guarantee),
                             ("open_uncertified", OpenUncertified)):
            text = self._str(data, key, "answer_sets")
            if text:
                options = get_args(allowed)
                if text not in options:
                    raise self.fail(f"must be {', '.join(options[:-1])} or {options[-1]}, got {text!r}",
                                    "answer_sets", key)
                given[key] = text
        if "abstain" in data:
            if not isinstance(data["abstain"], bool):
                raise self.fail(f"must be true or false, got {data['abstain']!r}", "answer_sets", "abstain")
            given["abstain"] = data["abstain"]
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
        return AnswerSetConfig(uag_llm=uag_llm, **given)


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


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def starter_toml(kg: str, arms: list[tuple[str, str, str, float | None]], budget_usd: float | None = None,
                 budget_calls: int | None = None, alpha: float = 0.1) -> str:
    """A commented ``kgwise.toml`` for ``kg`` and ``arms`` (``(name, kind, spec-or-model, price)``)."""
    if not arms:
        raise ConfigError("give at least one arm (--arm name=kind:spec[:price])")
    for name, kind, _, price in arms:
        if kind not in ARM_KINDS:
            raise ConfigError(f"arm {name!r}: unknown kind {kind!r}; use one of {', '.join(ARM_KINDS)}")
        if price is not None and not (math.isfinite(price) and price >= 0):
            raise ConfigError(f"arm {name!r}: a price must be ≥ 0, got {price}")
    if budget_usd is not None and budget_calls is not None:
        raise ConfigError("give --budget-usd or --budget-calls, not both")
    lines = ["# kgwise pipeline: one KG, routed arms, calibrated answer sets (`kgwise ask --config FILE`).",
             "", "[kg]"]
    if kg.startswith(("sparql:", "http://", "https://")):
        lines.append(f"sparql = {_toml_str(kg.removeprefix('sparql:'))}")
    else:
        lines += ["# a built graph (.npz), a triple file (.tsv, .nt) or RoG data;",
                  "# or source = PATH with format = NAME, or sparql = URL",
                  f"graph = {_toml_str(kg)}"]
    lines += ["", *ladder_comment()]
    for name, kind, target, price in arms:
        lines += ["", "[[arms]]", f"name = {_toml_str(name)}", f"kind = {_toml_str(kind)}"]
        if kind == "external":  # NAME=external:PRICE — the caller runs it; PRICE bounds one call
            bound = price if price is not None else _price_of(name, target)
            lines += [f"price = {bound!r}  # the most one call may cost: the bound a decision holds until "
                      "it is settled", "cluster = \"LLM\"  # or KGM"]
            continue
        if kind == "kgm":
            lines.append(f"model = {_toml_str(target)}  # from `kgwise kg model train`")
        else:
            lines.append(f"spec = {_toml_str(target)}  # {', '.join(LOCAL_MODELS)}, gguf:PATH, openai:MODEL")
            local = LOCAL_MODELS.get(target)
            if local is not None:
                others = ", ".join(r for r in ("sum", "mean", "pmi") if r != local.scoring)
                lines.append(f"scoring = {_toml_str(local.scoring)}  # measured best for {target} on dev "
                             f"questions; or {others}")
            lines.append("# base_url = \"http://127.0.0.1:8080/v1\"  # an OpenAI-compatible server (spec = "
                         "openai:MODEL)")
        if kind == "inject":
            lines.append("# policy = \"path_policy.pt\"  # P_RL")
            lines.append("# combos = \"all\"  # `kgwise fit` learns which (extractor+format) per question;")
            lines.append("# or bandit = \"bandit.npz\", or a fixed combo = \"P_sub+F_s\"")
        lines.append(f"cluster = {_toml_str('KGM' if kind == 'kgm' else 'LLM')}")
        if price is not None:
            lines.append(f"price = {price!r}  # per call, in the budget's unit")
        elif kind != "kgm" and target in LOCAL_MODELS:
            lines.append(f"# price = {LOCAL_MODELS[target].seconds_per_question!r}  # its seconds per "
                         "question (above): price each arm so, and budget_calls counts machine seconds")
        else:
            lines.append("# price = 0.001  # per call in the budget's unit; default: the price table")
    lines += ["", "[router]"]
    if budget_calls is not None:
        lines.append(f"budget_calls = {budget_calls}  # LLM calls; a KG model is free")
    else:
        lines.append(f"budget_usd = {budget_usd if budget_usd is not None else 1.0!r}  # hard limit, dollars")
    lines += ["# horizon = 1000  # questions the budget is paced over", "seed = 0",
              "observe_free = true  # free arms (kgm) answer every question; feedback teaches their outcome",
              "# context = \"question+free\"  # join what the free arms say to the question (`kgwise fit` "
              "chooses by cross-fitting)",
              "# pin_single_arm = true  # `kgwise fit` answers with the best affordable single arm when",
              "# routing_gain_z = 1.0   #   routing does not beat it by this many standard errors",
              "", "# Coke's values (see `kgwise config show coke`)", "[coke]", "lam = 1.0", "delta = 0.05",
              "", "[answer_sets]", f"alpha = {alpha!r}  # sets miss the truth at most this often, per arm",
              "delta = 0.05  # level of the live coverage bound (`kgwise status`)",
              "kind = \"lac\"  # or aps",
              "guarantee = \"pac\"  # coverage >= 1 - alpha with probability >= 1 - delta over the dev log;",
              "#   \"marginal\": on average over dev logs (smaller sets); \"pac_all_arms\": pac for "
              "every arm at once",
              "calibration_share = 0.5  # dev questions held out of the router's learning to calibrate sets",
              "# uag_llm = \"smollm2-135m\"  # open questions get UAG's sets, calibrated by `kgwise fit` on "
              "graded open dev questions",
              "# uag_tune_share = 0.4  # of those, the part that tunes UAG (and teaches the router); the "
              "rest calibrates it per arm",
              "# open_uncertified = \"largest\"  # an arm whose held-out open questions certify nothing: "
              "UAG's largest set, or \"pooled\"",
              ""]
    return "\n".join(lines)
