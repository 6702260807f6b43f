"""The local model's server process: llama-cpp-python's server plus Gemma 3's own chat format.

llama-cpp-python 0.3 has no faithful Gemma 3 format: its ``gemma`` format drops
system messages and ``role: tool`` messages, and the Gemma 3 GGUF carries no chat
template it can read, so it falls back to ``llama-2``. This module registers
``agentkit-gemma3``, which renders what Gemma 3's official template renders (the
system text opens the first user turn; ``assistant`` is ``model``), and keeps every
message: ``tool`` results become user turns, and consecutive turns of one role
are joined (Gemma's template requires strict alternation). Run as
``python -m agentkit.local.server <llama_cpp.server arguments>``.
"""

from __future__ import annotations

from typing import Any

CHAT_FORMAT = "agentkit-gemma3"
_TURN = "<start_of_turn>{role}\n{text}<end_of_turn>\n"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def gemma3_prompt(messages: list[dict[str, Any]]) -> str:
    """Render ``messages`` (OpenAI shape) as Gemma 3's prompt, ending with the model's turn.

    System messages open the next user turn; ``tool`` messages count as user turns;
    consecutive turns of one role are joined with a blank line. Returns the prompt
    text (the tokenizer adds ``<bos>``).
    """
    turns: list[tuple[str, list[str]]] = []
    pending_system: list[str] = []
    for message in messages:
        role = message.get("role")
        text = _text(message.get("content"))
        if role == "system":
            pending_system.append(text)
            continue
        speaker = "model" if role == "assistant" else "user"
        if speaker == "user" and pending_system:
            text = "\n\n".join([*pending_system, text])
            pending_system = []
        if turns and turns[-1][0] == speaker:
            turns[-1][1].append(text)
        else:
            turns.append((speaker, [text]))
    if pending_system:  # a system message with no user turn after it
        turns.append(("user", pending_system))
    prompt = "".join(_TURN.format(role=r, text="\n\n".join(t).strip()) for r, t in turns)
    return prompt + "<start_of_turn>model\n"


def register() -> None:
    """Register the ``agentkit-gemma3`` chat format with llama-cpp-python."""
    from llama_cpp import llama_chat_format as formats

    @formats.register_chat_format(CHAT_FORMAT)
    def _format(messages: list[Any], **_: Any) -> Any:
        return formats.ChatFormatterResponse(
            prompt=gemma3_prompt(messages), stop=["<end_of_turn>", "<eos>"]
        )


def main() -> None:
    """Register the format, then run llama-cpp-python's server with ``sys.argv``."""
    register()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
