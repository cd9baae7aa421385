"""{{name}}: a hookhost plugin in Python (componentize-py).

It denies Bash commands that contain one of the phrases in the hook's `config.deny`
(default: `rm -rf /`). The rules are in rules.py (plain Python, unit-tested);
this file adapts them to the `hookhost:hook` world.
"""

import json

import componentize_py_types
from wit_world import exports
from wit_world.imports import types

import rules


class Hook(exports.Hook):
    def describe(self) -> types.PluginInfo:
        return types.PluginInfo(
            name="{{name}}",
            version="0.1.0",
            events=["PreToolUse"],
            capabilities=types.Capabilities(dirs=[], env=[], http=[]),
        )

    def handle(self, event: types.Event) -> types.Response:
        try:
            config = json.loads(event.config_json) if event.config_json else None
            tool_input = json.loads(event.input_json).get("tool_input")
            reason = rules.decide(event.name, event.tool_name, tool_input, config)
        except ValueError as e:
            # An Err is a failure of the hook, never a decision.
            raise componentize_py_types.Err(f"{{name}}: {e}")
        return types.Response(
            permission=types.Permission.DENY if reason else None,
            block=False,
            reason=reason,
            continue_=None,
            stop_reason=None,
            system_message=None,
            additional_context=None,
            updated_input_json=None,
            updated_output_json=None,
            extras_json=None,
        )
