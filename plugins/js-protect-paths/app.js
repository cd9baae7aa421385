// protect-paths as a JavaScript hookhost plugin (componentize-js, world `plugin`).
// Build with `node build.mjs`; the rules live in protect.mjs.

import { decide } from './protect.mjs';

export const hook = {
  describe() {
    return {
      name: 'js-protect-paths',
      version: '0.1.0',
      events: ['PreToolUse'],
      capabilities: { dirs: [], env: [], http: [] },
    };
  },

  handle(event) {
    const input = JSON.parse(event.inputJson);
    const config = event.configJson === undefined ? null : JSON.parse(event.configJson);
    const reason = decide(event.name, event.toolName, event.cwd, input, config);
    return reason === null
      ? { block: false }
      : { permission: 'deny', block: false, reason };
  },
};
