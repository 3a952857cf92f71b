"""kgwise's own chat templates, used instead of the Jinja template a GGUF file carries.

A template renders messages as segments ``(text, special)``: the template's control text (``special``:
tokenised with the model's special tokens, e.g. ``<|im_start|>``) and the messages' contents (tokenised
as plain text, so a message that contains ``<|im_start|>`` cannot open a turn of its own).

* ``chatml`` — ChatML as Qwen2.5 uses it: ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message,
  then ``<|im_start|>assistant\\n``; a conversation without a system message gets
  :data:`CHATML_SYSTEM` first, as Qwen2.5's own template does (Qwen2.5 model cards, "Quickstart").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kgwise.errors import ConfigError
from kgwise.llm.base import Message

__all__ = ["CHATML_SYSTEM", "TEMPLATES", "Segment", "render", "render_chatml"]

Segment = tuple[str, bool]
CHATML_SYSTEM = "You are a helpful assistant."
"""The system message of a ChatML conversation that has none."""


def render_chatml(messages: Sequence[Message]) -> list[Segment]:
    """The ChatML segments of ``messages``, ending with the assistant's turn opened."""
    msgs = list(messages)
    if not msgs or msgs[0].role != "system":
        msgs.insert(0, Message("system", CHATML_SYSTEM))
    out: list[Segment] = []
    for m in msgs:
        out += [(f"<|im_start|>{m.role}\n", True), (m.content, False), ("<|im_end|>\n", True)]
    out.append(("<|im_start|>assistant\n", True))
    return out


TEMPLATES: dict[str, Callable[[Sequence[Message]], list[Segment]]] = {"chatml": render_chatml}


def render(template: str, messages: Sequence[Message]) -> list[Segment]:
    """``messages`` rendered by the template named ``template``."""
    if template not in TEMPLATES:
        raise ConfigError(f"unknown chat template {template!r}; use one of {', '.join(TEMPLATES)}")
    return TEMPLATES[template](messages)
