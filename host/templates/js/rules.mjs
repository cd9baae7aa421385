// The rules of {{name}}, in plain JavaScript so they can be unit-tested without wasm.

export const DEFAULT_DENY = ['rm -rf /'];

/** The deny reason for one event, or null for no opinion. Throws on a bad config. */
export function decide(eventName, toolName, toolInput, config) {
  if (eventName !== 'PreToolUse' || toolName !== 'Bash') return null;
  const deny = config?.deny ?? DEFAULT_DENY;
  if (!Array.isArray(deny) || deny.some((d) => typeof d !== 'string')) {
    throw new Error('hook config: `deny` must be a list of strings');
  }
  const command = toolInput?.command ?? '';
  const phrase = deny.find((d) => command.includes(d));
  return phrase === undefined ? null : `{{name}}: \`${phrase}\` is not allowed`;
}
