// {{name}}: a hookhost plugin in JavaScript (componentize-js).
//
// It denies Bash commands that contain one of the phrases in the hook's `config.deny`
// (default: `rm -rf /`). The rules are in rules.mjs (plain JS, unit-tested with
// `node --test`); this file adapts them to the `hookhost:hook` world. Returning an object
// is the `ok` response; throwing is a failure of the hook, never a decision.

import { decide } from './rules.mjs';

export const hook = {
  describe() {
    return {
      name: '{{name}}',
      version: '0.1.0',
      events: ['PreToolUse'],
      capabilities: { dirs: [], env: [], http: [] },
    };
  },

  handle(event) {
    const input = JSON.parse(event.inputJson);
    const config = event.configJson === undefined ? null : JSON.parse(event.configJson);
    const reason = decide(event.name, event.toolName, input.tool_input, config);
    return reason === null ? { block: false } : { permission: 'deny', block: false, reason };
  },
};
