// The same rules as a Claude Code command hook (stdin JSON, stdout decision), for the
// benchmark that compares the wasm plugin with a `node` process per event.
import { decide } from './protect.mjs';

let text = '';
for await (const chunk of process.stdin) text += chunk;
const input = JSON.parse(text);
const reason = decide(input.hook_event_name, input.tool_name, input.cwd, input, null);
if (reason !== null) {
  process.stdout.write(JSON.stringify({
    hookSpecificOutput: {
      hookEventName: 'PreToolUse',
      permissionDecision: 'deny',
      permissionDecisionReason: reason,
    },
  }));
}
