// The rules of protect-paths, in plain JavaScript (no component imports).
//
// A port of `plugins/protect-paths/src/lib.rs`: the integration tests run both plugins
// through hookhost on the same inputs and require equal decisions. Shared by the
// component (`app.js`) and the command-hook twin used by the benchmark
// (`command-hook.mjs`).

/** The globs protected when the hook's config names none. */
export const DEFAULT_GLOBS = ['.env', '.env.*', '.git/**', '**/*.pem', '**/id_rsa*'];

const EDIT_TOOLS = ['Edit', 'Write', 'MultiEdit', 'NotebookEdit'];

/** Matches a glob: `*` within a segment, `**` across segments, `?` one character. */
export function globMatch(pattern, text) {
  const go = (p, t) => {
    if (p.length === 0) return t.length === 0;
    if (p[0] === '*' && p[1] === '*') {
      let rest = p.slice(2);
      if (rest.startsWith('/')) rest = rest.slice(1);
      for (let i = 0; i <= t.length; i++) if (go(rest, t.slice(i))) return true;
      return false;
    }
    if (p[0] === '*') {
      for (let i = 0; i <= t.length; i++) {
        if (i > 0 && t[i - 1] === '/') break;
        if (go(p.slice(1), t.slice(i))) return true;
      }
      return false;
    }
    if (p[0] === '?') return t.length > 0 && t[0] !== '/' && go(p.slice(1), t.slice(1));
    return t.length > 0 && t[0] === p[0] && go(p.slice(1), t.slice(1));
  };
  return go(pattern, text);
}

/** The glob that protects `path` (relative to the project), or null. */
export function protectedBy(globs, path) {
  path = path.replace(/^(\.\/)+/, '');
  const name = path.split('/').pop();
  for (const g of globs) {
    const hit = g.includes('/')
      ? globMatch(g, path) || globMatch(`**/${g}`, path)
      : globMatch(g, name) || path.split('/').some((seg) => globMatch(g, seg));
    if (hit) return g;
  }
  return null;
}

/**
 * The deny reason for one event, or null for no opinion. Throws on a bad config.
 * `input` is the whole hook input object; `config` the hook's `config` (or null).
 */
export function decide(eventName, toolName, cwd, input, config) {
  if (eventName !== 'PreToolUse' || !EDIT_TOOLS.includes(toolName)) return null;
  let globs = DEFAULT_GLOBS;
  if (config != null) {
    if (typeof config !== 'object' || Array.isArray(config)) {
      throw new Error('hook config: expected an object');
    }
    if (config.globs !== undefined) {
      if (!Array.isArray(config.globs) || config.globs.some((g) => typeof g !== 'string')) {
        throw new Error('hook config: `globs` must be a list of strings');
      }
      globs = config.globs;
    }
  }
  const toolInput = input.tool_input ?? {};
  const path = [toolInput.file_path, toolInput.notebook_path].find((v) => v !== undefined);
  if (typeof path !== 'string') return null;
  const base = cwd.replace(/\/+$/, '');
  const relative = path.startsWith(base) ? path.slice(base.length).replace(/^\/+/, '') : path;
  const glob = protectedBy(globs, relative);
  if (glob === null) return null;
  return `protect-paths: \`${path}\` is protected (matches \`${glob}\`); ${toolName} refused`;
}
