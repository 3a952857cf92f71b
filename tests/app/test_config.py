"""``PipelineConfig``: one TOML file, strictly validated; each fault names file, line and key."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from kgwise.app.config import (
    STARTER_BUDGET_USD,
    AnswerSetConfig,
    ArmConfig,
    KGConfig,
    LinkTable,
    PipelineConfig,
    RouterConfig,
    StateConfig,
    arm_default,
    file_fields,
    file_key,
    paced_coke,
    starter_toml,
)
from kgwise.errors import DataError
from kgwise.route.coke import CokeConfig

from .conftest import write_config, write_kg

GOOD = """\
[kg]
graph = "kg.tsv"

[[arms]]
name = "small"
kind = "llm"
spec = "smollm2-135m"

[[arms]]
name = "api"
kind = "llm"
spec = "openai:gpt-4o-mini"

[[arms]]
name = "mine"
kind = "llm"
spec = "openai:smollm2"
base_url = "http://127.0.0.1:8080/v1"
price = 0.0005

[router]
budget_usd = 2.5
horizon = 100

[coke]
lam = 0.5

[answer_sets]
alpha = 0.2
kind = "aps"
"""


def test_a_good_config_reads_with_prices_from_the_table_by_default(tmp_path: Path) -> None:
    write_kg(tmp_path)
    cfg = PipelineConfig.load(write_config(tmp_path, GOOD))
    assert cfg.kg.graph == tmp_path / "kg.tsv"
    assert cfg.names == ("small", "api", "mine")
    small, api, mine = cfg.arms
    assert (small.per_call, small.price_model, small.cluster) == (0.0, None, "LLM")  # a local model
    assert (api.per_call, api.price_model, api.is_api) == (0.0, "gpt-4o-mini", True)  # token prices
    assert (mine.per_call, mine.price_model, mine.is_api) == (0.0005, None, True)  # overridden
    assert cfg.router.budget == 2.5 and cfg.router.unit == "usd" and cfg.router.horizon == 100
    # paced over a horizon: the pipeline's defaults (price pacing), the file's [coke] keys win
    assert cfg.router.coke == CokeConfig(lam=0.5, pacing="price", gamma_override=0.25, decomposed_reward=True)
    assert (cfg.answer_sets.alpha, cfg.answer_sets.kind) == (0.2, "aps")


def test_without_a_horizon_the_router_keeps_the_coke_defaults(tmp_path: Path) -> None:
    write_kg(tmp_path)
    cfg = PipelineConfig.load(write_config(tmp_path, GOOD.replace("horizon = 100\n", "")))
    assert cfg.router.horizon is None and cfg.router.coke == CokeConfig(lam=0.5)


def test_a_horizon_defaults_to_price_pacing_without_cost_regret(tmp_path: Path) -> None:
    write_kg(tmp_path)
    cfg = PipelineConfig.load(write_config(tmp_path, GOOD.replace("lam = 0.5\n", "")))
    assert cfg.router.coke == paced_coke(CokeConfig()) and cfg.router.coke.lam == 0.0


def test_a_call_budget_prices_one_per_llm_call_and_kg_models_free(tmp_path: Path) -> None:
    write_kg(tmp_path)
    (tmp_path / "m.pt").write_bytes(b"")
    body = ('[kg]\ngraph = "kg.tsv"\n[[arms]]\nname = "k"\nkind = "kgm"\nmodel = "m.pt"\n'
            '[[arms]]\nname = "l"\nkind = "inject"\nspec = "gemma3-270m"\n[router]\nbudget_calls = 50\n')
    cfg = PipelineConfig.load(write_config(tmp_path, body))
    k, ll = cfg.arms
    assert (k.cluster, k.per_call, k.observe) == ("KGM", 0.0, True)
    assert (ll.cluster, ll.per_call, ll.observe) == ("LLM", 1.0, False)
    assert cfg.router.unit == "calls"


def _fault(tmp_path: Path, old: str, new: str) -> str:
    write_kg(tmp_path)
    body = GOOD.replace(old, new, 1)
    assert body != GOOD
    path = write_config(tmp_path, body)
    with pytest.raises(DataError) as info:
        PipelineConfig.load(path)
    return str(info.value)


@pytest.mark.parametrize("old, new, where", [
    ('kind = "llm"\nspec = "openai:gpt', 'kind = "llmx"\nspec = "openai:gpt',
     ":11: arms[1].kind: unknown arm kind 'llmx'"),
    ('price = 0.0005', 'price = -1', ":19: arms[2].price: a price must be ≥ 0"),
    ('budget_usd = 2.5', 'budget_usd = 0', ":22: router.budget_usd: the budget must be > 0"),
    ('budget_usd = 2.5', 'budget_usd = -3', ":22: router.budget_usd: the budget must be > 0"),
    ('alpha = 0.2', 'alpha = 1.0', ":29: answer_sets.alpha: must lie in (0, 1)"),
    ('alpha = 0.2', 'alpha = 0', ":29: answer_sets.alpha: must lie in (0, 1)"),
    ('alpha = 0.2', 'alpha = 0.2\ncalibration_share = 1',
     ":30: answer_sets.calibration_share: must lie in (0, 1)"),
    ('lam = 0.5', 'lam = -0.5', ":26: coke.lam: lambda must be a finite number ≥ 0"),
    ('lam = 0.5', 'lamb = 0.5', ":26: coke.lamb: unknown key"),
    ('graph = "kg.tsv"', 'graph = "nowhere.tsv"', ":2: kg.graph: graph file"),
    ('spec = "openai:gpt-4o-mini"', 'spec = "openai:no-such-model"',
     ":12: arms[1].spec: model 'no-such-model' is not in the price table"),
    ('horizon = 100', 'horizon = "100"', ":23: router.horizon: must be a whole number"),
    ('[answer_sets]', '[answer-sets]', ":28: unknown table(s) [answer-sets]"),
    ('price = 0.0005', 'price = 0.0005\ntemperature = 1', ":20: arms[2].temperature: unknown key"),
    ('horizon = 100', 'horizon = 100\ncontext = "kgm"', ":24: router.context: must be question, "
     "question+free, free, predicted, cascade or predicted-free, got 'kgm'"),
    ('horizon = 100', 'horizon = 100\ncontext = "free"', ":24: router.context: 'free' needs a free arm"),
    ('horizon = 100', 'horizon = 100\npin_single_arm = "yes"', ":24: router.pin_single_arm: must be true or "
     "false"),
    ('horizon = 100', 'horizon = 100\nrouting_gain_z = -1', ":24: router.routing_gain_z: must be a number "
     "≥ 0, got -1"),
    ('horizon = 100', 'horizon = 100\ncontext = "question+free"', ":24: router.context: 'question+free' "
     "needs a free arm"),
    ('kind = "aps"', 'kind = "aps"\nguarantee = "always"',
     ":31: answer_sets.guarantee: must be marginal, pac or pac_all_arms"),
    ('kind = "aps"', 'kind = "aps"\nopen_uncertified = "all"',
     ":31: answer_sets.open_uncertified: must be largest or pooled, got 'all'"),
    ('kind = "aps"', 'kind = "aps"\nfallback = "routed"',
     ":31: answer_sets.fallback: must be held_out or all_dev, got 'routed'"),
    ('price = 0.0005', 'price = 0.0005\nreported_accuracy = 1.5', ":20: arms[2].reported_accuracy: must lie "
     "in [0, 1]"),
    ('kind = "llm"\nspec = "smollm2-135m"', 'kind = "llm"\nspec = "smollm2-135m"\ncombos = "all"',
     ":8: arms[0].combos: combos is for inject arms"),
    ('kind = "llm"\nspec = "smollm2-135m"', 'kind = "inject"\nspec = "smollm2-135m"\ncombos = ["P_sub+F_t"]',
     ":8: arms[0].combos: must be \"all\" or a list of two or more distinct combinations"),
    ('kind = "llm"\nspec = "smollm2-135m"', 'kind = "inject"\nspec = "smollm2-135m"\ncombos = ["P_sub+F_t", '
     '"P_sub+F_t"]', ":8: arms[0].combos: must be \"all\" or a list"),
    ('kind = "llm"\nspec = "smollm2-135m"', 'kind = "inject"\nspec = "smollm2-135m"\ncombos = ["P_sub+F_t", '
     '"P_sub+F_x"]', ":8: arms[0].combos: "),
    ('kind = "llm"\nspec = "smollm2-135m"', 'kind = "inject"\nspec = "smollm2-135m"\ncombos = ["P_sub+F_t", '
     '"P_RL+F_t"]', ":8: arms[0].combos: 'P_RL+F_t' needs a trained P_RL policy"),
    ('kind = "llm"\nspec = "smollm2-135m"', 'kind = "inject"\nspec = "smollm2-135m"\ncombo = "P_sub+F_t"\n'
     'combos = "all"', ":9: arms[0].combos: give combo (fixed) or combos (learnt by `kgwise fit`), not both"),
    ('kind = "llm"\nspec = "smollm2-135m"', 'kind = "llm"\nspec = "smollm2-135m"\nknowledge_tokens = 32',
     ":8: arms[0].knowledge_tokens: knowledge_tokens is for inject arms"),
    ('kind = "llm"\nspec = "smollm2-135m"', 'kind = "inject"\nspec = "smollm2-135m"\nknowledge_tokens = 0',
     ':8: arms[0].knowledge_tokens: must be a whole number ≥ 1 or "full", got 0'),
    ('kind = "llm"\nspec = "smollm2-135m"',
     'kind = "inject"\nspec = "smollm2-135m"\nknowledge_tokens = "all"',
     ':8: arms[0].knowledge_tokens: must be a whole number ≥ 1 or "full", got \'all\''),
    ('kind = "llm"\nspec = "smollm2-135m"', 'kind = "inject"\nspec = "smollm2-135m"\nknowledge_ratio = 0',
     ':8: arms[0].knowledge_ratio: must be a number > 0 or "off", got 0'),
    ('kind = "llm"\nspec = "smollm2-135m"', 'kind = "llm"\nspec = "smollm2-135m"\nknowledge_ratio = 1.5',
     ":8: arms[0].knowledge_ratio: knowledge_ratio is for inject arms"),
])
def test_bad_values_are_named_by_file_line_and_key(tmp_path: Path, old: str, new: str, where: str) -> None:
    message = _fault(tmp_path, old, new)
    assert message.startswith(str(tmp_path / "kgwise.toml")), message
    assert where in message, message


def test_an_inject_arm_s_knowledge_budget_reads_as_tokens_or_full(tmp_path: Path) -> None:
    write_kg(tmp_path)
    base = GOOD.replace('kind = "llm"\nspec = "smollm2-135m"', 'kind = "inject"\nspec = "smollm2-135m"')
    assert PipelineConfig.load(write_config(tmp_path, base)).arms[0].knowledge_tokens == 48
    ranked = base.replace('spec = "smollm2-135m"', 'spec = "smollm2-135m"\nknowledge_tokens = 100')
    assert PipelineConfig.load(write_config(tmp_path, ranked)).arms[0].knowledge_tokens == 100
    full = base.replace('spec = "smollm2-135m"', 'spec = "smollm2-135m"\nknowledge_tokens = "full"')
    arms = PipelineConfig.load(write_config(tmp_path, full)).arms
    assert arms[0].knowledge_tokens is None and arms[0].knowledge_ratio == 2.0
    # only an inject arm's fingerprint (which resume logs key calls by) holds them
    for key in ("knowledge_tokens", "knowledge_ratio"):
        assert key in arms[0].fingerprint() and key not in arms[1].fingerprint()
    ratio = base.replace('spec = "smollm2-135m"', 'spec = "smollm2-135m"\nknowledge_ratio = 1')
    assert PipelineConfig.load(write_config(tmp_path, ratio)).arms[0].knowledge_ratio == 1.0
    off = base.replace('spec = "smollm2-135m"', 'spec = "smollm2-135m"\nknowledge_ratio = "off"')
    assert PipelineConfig.load(write_config(tmp_path, off)).arms[0].knowledge_ratio is None


def test_a_missing_model_file_is_named(tmp_path: Path) -> None:
    write_kg(tmp_path)
    body = ('[kg]\ngraph = "kg.tsv"\n[[arms]]\nname = "k"\nkind = "kgm"\nmodel = "gone.pt"\n'
            '[router]\nbudget_calls = 5\n')
    with pytest.raises(DataError, match=r"kgwise.toml:6: arms\[0\].model: model file .*gone.pt does not "):
        PipelineConfig.load(write_config(tmp_path, body))
    body = body.replace('kind = "kgm"\nmodel = "gone.pt"', 'kind = "llm"\nspec = "gguf:gone.gguf"')
    with pytest.raises(DataError, match=r"kgwise.toml:6: arms\[0\].spec: model file .*gone.gguf does not"):
        PipelineConfig.load(write_config(tmp_path, body))


def test_missing_tables_and_both_budgets_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="config file not found"):
        PipelineConfig.load(tmp_path / "none.toml")
    write_kg(tmp_path)
    with pytest.raises(DataError, match=r"missing table \[router\]"):
        PipelineConfig.load(write_config(tmp_path, GOOD.split("[router]")[0]))
    both = GOOD.replace("budget_usd = 2.5", "budget_usd = 2.5\nbudget_calls = 3")
    with pytest.raises(DataError, match=r":23: router.budget_calls: give exactly one of budget_usd or"):
        PipelineConfig.load(write_config(tmp_path, both))
    twice = GOOD.replace('name = "mine"', 'name = "small"')
    with pytest.raises(DataError, match=r":15: arms\[2\].name: arm name 'small' is used twice"):
        PipelineConfig.load(write_config(tmp_path, twice))


def test_the_starter_file_reads_back(tmp_path: Path) -> None:
    write_kg(tmp_path)
    text = starter_toml("kg.tsv", [("small", "llm", "smollm2-135m", None),
                                   ("small-kg", "inject", "smollm2-135m", 0.01)], budget_usd=3.0, alpha=0.2)
    assert text.count("\n# ") > 5  # commented
    cfg = PipelineConfig.load(write_config(tmp_path, text))
    assert cfg.names == ("small", "small-kg")
    assert cfg.arm("small-kg").per_call == 0.01
    assert cfg.router.budget == 3.0 and cfg.answer_sets.alpha == 0.2
    assert cfg.answer_sets.guarantee == "pac"  # training-conditional, as UAG's open sets


STARTER_ARMS = [("g", "kgm", "m.pt", None), ("s", "inject", "smollm2-135m", None),
                ("o", "llm", "openai:gpt-4o-mini", None), ("e", "external", "", 0.2)]


def test_the_starter_file_is_the_default_config_and_names_every_key(tmp_path: Path) -> None:
    write_kg(tmp_path)
    (tmp_path / "m.pt").write_bytes(b"")
    text = starter_toml("kg.tsv", STARTER_ARMS)
    cfg = PipelineConfig.load(write_config(tmp_path, text))
    assert cfg.kg == KGConfig(graph=tmp_path / "kg.tsv")
    assert cfg.router == RouterConfig(STARTER_BUDGET_USD, "usd")
    assert (cfg.answer_sets, cfg.linking, cfg.state) == (AnswerSetConfig(), LinkTable(), StateConfig())
    for arm in cfg.arms:  # the defaults by kind, and the model's measured scoring rule
        assert arm.cluster == arm_default("cluster", arm.kind, arm.spec)
        if arm.kind != "external":
            assert arm.observe == arm_default("observe", arm.kind, arm.spec)
            assert arm.scoring == arm_default("scoring", arm.kind, arm.spec)
    assert cfg.arm("s").scoring == "pmi" and cfg.arm("o").scoring == "sum"
    lines = text.splitlines()
    for cls in (KGConfig, ArmConfig, RouterConfig, AnswerSetConfig, LinkTable, StateConfig, CokeConfig):
        fields = file_fields(cls) if cls is not CokeConfig else list(dataclasses.fields(CokeConfig))
        for f in fields:
            key = file_key(f) if cls is not CokeConfig else f.name
            shown = [ln for ln in lines if ln.removeprefix("# ").startswith(f"{key} = ")]
            assert shown, f"{cls.__name__}.{f.name} ({key}) is not in the starter file"
            default = f.default if cls is not ArmConfig else None
            if ln := next((x for x in shown if x.startswith("# ") and default not in (None, ())), None):
                value = tomllib.loads(ln.removeprefix("# ").split("  # ")[0])[key]  # a commented default
                assert value == default, f"{key}: the starter shows {value!r}, the default is {default!r}"
    for cls in (ArmConfig, RouterConfig):  # a value no key sets says how the reader computes it
        assert all(f.metadata["derived"] for f in dataclasses.fields(cls) if f not in file_fields(cls))
    docs = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [f.name for f in dataclasses.fields(CokeConfig) if f"`{f.name}`" not in docs]
    assert not missing, f"[coke] keys (advanced) missing from docs/configuration.md: {missing}"


def test_an_arm_without_scoring_gets_its_models_measured_rule(tmp_path: Path) -> None:
    write_kg(tmp_path)
    cfg = PipelineConfig.load(write_config(tmp_path, GOOD))
    assert [a.scoring for a in cfg.arms] == ["pmi", "sum", "sum"]  # smollm2-135m measured; the others not
    body = GOOD.replace('spec = "smollm2-135m"\n', 'spec = "smollm2-135m"\nscoring = "mean"\n', 1)
    assert PipelineConfig.load(write_config(tmp_path, body)).arm("small").scoring == "mean"


def test_kg_takes_a_label_index_beside_a_graph_or_an_endpoint(tmp_path: Path) -> None:
    write_kg(tmp_path)
    (tmp_path / "kg.idx").write_bytes(b"")
    body = ('[kg]\nsparql = "http://127.0.0.1:7878/query"\nindex = "kg.idx"\n[[arms]]\nname = "s"\n'
            'kind = "llm"\nspec = "smollm2-135m"\n[router]\nbudget_calls = 5\n')
    kg = PipelineConfig.load(write_config(tmp_path, body)).kg
    assert (kg.sparql, kg.index) == ("http://127.0.0.1:7878/query", tmp_path / "kg.idx")
    kg = PipelineConfig.load(write_config(tmp_path, body.replace('sparql = "http://127.0.0.1:7878/query"',
                                                                 'graph = "kg.tsv"'))).kg
    assert (kg.graph, kg.index) == (tmp_path / "kg.tsv", tmp_path / "kg.idx")
    with pytest.raises(DataError, match=r"kgwise.toml:3: kg.index: label index .*gone.idx does not exist"):
        PipelineConfig.load(write_config(tmp_path, body.replace("kg.idx", "gone.idx")))


def test_a_free_arm_and_the_question_plus_free_context_read_back(tmp_path: Path) -> None:
    write_kg(tmp_path)
    free = 'spec = "smollm2-135m"\nprice = 0\nobserve = true\nreported_accuracy = 0.4\n'
    body = GOOD.replace('spec = "smollm2-135m"\n', free, 1).replace(
        "horizon = 100\n", 'horizon = 100\ncontext = "question+free"\n')
    cfg = PipelineConfig.load(write_config(tmp_path, body))
    assert cfg.router.context == "question+free" and cfg.free_arms == ("small",)
    assert cfg.arm("small").reported_accuracy == 0.4 and cfg.arm("api").reported_accuracy is None
    assert PipelineConfig.load(write_config(tmp_path, GOOD)).router.context == "question"
