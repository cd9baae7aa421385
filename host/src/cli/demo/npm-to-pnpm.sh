# PreToolUse(Bash(npm *)): rewrite npm to pnpm and approve.
input=$(cat)
command=$(printf '%s' "$input" | sed -E 's/.*"command":"([^"]*)".*/\1/' | sed -E 's/^npm /pnpm /')
printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"npm is pnpm here","updatedInput":{"command":"%s"}}}\n' "$command"
