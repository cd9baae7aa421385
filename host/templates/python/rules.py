"""The rules of {{name}}, in plain Python so they can be unit-tested without wasm."""

from typing import Optional

DEFAULT_DENY = ["rm -rf /"]


def decide(event_name: str, tool_name: Optional[str], tool_input, config) -> Optional[str]:
    """The deny reason for one event, or None for no opinion. Raises ValueError on bad input."""
    if event_name != "PreToolUse" or tool_name != "Bash":
        return None
    deny = DEFAULT_DENY
    if config is not None:
        deny = config.get("deny", DEFAULT_DENY) if isinstance(config, dict) else None
        if not isinstance(deny, list) or not all(isinstance(d, str) for d in deny):
            raise ValueError("hook config: `deny` must be a list of strings")
    if not isinstance(tool_input, dict):
        raise ValueError("tool_input: expected an object")
    command = tool_input.get("command", "")
    for phrase in deny:
        if phrase in command:
            return f"{{name}}: `{phrase}` is not allowed"
    return None
