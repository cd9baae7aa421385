"""deny-dangerous-bash as a Python hookhost plugin (componentize-py, world `plugin`).

Build: componentize-py -d wit -w plugin componentize app -o deny_dangerous_bash.wasm
(see build.sh). The rules live in danger.py.
"""

import json

import componentize_py_types
from wit_world import exports
from wit_world.imports import types

import danger


class Hook(exports.Hook):
    def describe(self) -> types.PluginInfo:
        return types.PluginInfo(
            name="python-deny-dangerous-bash",
            version="0.1.0",
            events=["PreToolUse"],
            capabilities=types.Capabilities(dirs=[], env=[], http=[]),
        )

    def handle(self, event: types.Event) -> types.Response:
        try:
            tool_input = json.loads(event.input_json).get("tool_input")
            reason = danger.decide(event.name, event.tool_name, tool_input)
        except ValueError as e:
            raise componentize_py_types.Err(f"deny-dangerous-bash: {e}")
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
