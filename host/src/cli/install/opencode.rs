//! OpenCode has no command hooks (1.18.33): its drop-in is a small JS plugin that hands
//! each tool call to `hookhost dispatch --format opencode` and acts on the answer
//! (`hookhost::agents::contract`): `block` is thrown (OpenCode fails the call with that
//! message, which the model and the user see), `args` replaces the call's arguments,
//! `output` and `context` replace or extend what the tool returns to the model, and
//! `notices` are printed on stderr. A `hookhost` that cannot answer blocks the call
//! (fail closed) before the tool runs. The file is hookhost's whole: `install` writes it
//! (or leaves it when it is the same), `uninstall` removes it.

use serde_json::json;

/// A line every plugin `install` writes carries, to know it for hookhost's.
pub(super) const MARK: &str = "hookhost-opencode-plugin";

/// The plugin that runs `command` (a shell command line).
pub(super) fn plugin(command: &str) -> String {
    let command = json!(command).to_string();
    format!(
        r#"// {MARK} v1: written by `hookhost install --opencode`, removed by
// `hookhost uninstall --opencode` (OpenCode 1.18.33). Each tool call goes to
// `hookhost dispatch --format opencode`; see hookhost's docs/book/src/agents/opencode.md.
import {{ spawnSync }} from "node:child_process";

const COMMAND = {command};

function ask(payload, directory) {{
  const run = spawnSync("/bin/sh", ["-c", COMMAND], {{
    input: JSON.stringify(payload),
    cwd: directory,
    encoding: "utf8",
    timeout: 600000,
    maxBuffer: 16 * 1024 * 1024,
  }});
  if (run.error || run.status !== 0) {{
    const why = (run.error && run.error.message) || (run.stderr || "").trim() || `exit ${{run.status}}`;
    return {{ block: `hookhost could not check this call (${{why}}); blocked` }};
  }}
  try {{
    return run.stdout.trim() ? JSON.parse(run.stdout) : {{}};
  }} catch (e) {{
    return {{ block: `hookhost's answer is not JSON (${{e.message}}); blocked` }};
  }}
}}

function tell(answer) {{
  for (const notice of answer.notices || []) console.error(notice);
}}

export const HookhostPlugin = async ({{ directory }}) => ({{
  "tool.execute.before": async (input, output) => {{
    const answer = ask({{ event: "tool.execute.before", tool: input.tool, sessionID: input.sessionID,
      callID: input.callID, args: output.args, directory }}, directory);
    tell(answer);
    if (typeof answer.block === "string") throw new Error(answer.block);
    if (answer.args && typeof answer.args === "object") {{
      for (const key of Object.keys(output.args)) delete output.args[key];
      Object.assign(output.args, answer.args);
    }}
  }},
  "tool.execute.after": async (input, output) => {{
    const answer = ask({{ event: "tool.execute.after", tool: input.tool, sessionID: input.sessionID,
      callID: input.callID, output: output.output, directory }}, directory);
    tell(answer);
    if (typeof answer.block === "string") console.error(answer.block);
    if (typeof answer.output === "string") output.output = answer.output;
    if (Array.isArray(answer.context) && answer.context.length > 0) {{
      output.output = `${{output.output ?? ""}}\n\n${{answer.context.join("\n\n")}}`;
    }}
  }},
}});
"#
    )
}
