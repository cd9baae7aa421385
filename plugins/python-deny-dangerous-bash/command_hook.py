"""The same rules as a Claude Code command hook (stdin JSON, stdout decision), for the
benchmark that compares a wasm plugin with a `python3` process per event."""

import json
import sys

import danger

event = json.load(sys.stdin)
reason = danger.decide(
    event.get("hook_event_name", ""), event.get("tool_name"), event.get("tool_input")
)
if reason:
    json.dump(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        },
        sys.stdout,
    )
