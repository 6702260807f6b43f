"""Tool calls on servers whose native tool calling is broken, over real HTTP.

FakeOpenAIServer plays the quirks of llama-cpp-python's server (each call in both
``tool_calls`` and the legacy ``function_call``; phantom names; HTTP 500 on
``"content": null``; tools left out of the prompt) and checks prompted tool calling
(``Settings.tool_calling``): what goes on the wire, what comes back, and that the
transcript keeps the standard shape.
"""

from __future__ import annotations

# -- the local server's chat format and install hint --------------------------------------


def test_gemma3_format_keeps_system_text_and_tool_results_and_alternates() -> None:
    from agentkit.local.server import gemma3_prompt

    prompt = gemma3_prompt(
        [
            {"role": "system", "content": "SYS"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "", "tool_calls": []},
            {"role": "tool", "tool_call_id": "c1", "content": "RESULT"},
            {"role": "user", "content": "more"},
        ]
    )
    assert prompt == (
        "<start_of_turn>user\nSYS\n\ntask<end_of_turn>\n"
        "<start_of_turn>model\n<end_of_turn>\n"
        "<start_of_turn>user\nRESULT\n\nmore<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
