# SessionStart: give the model some project context.
cat >/dev/null
printf '{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"Rust workspace; run `cargo test` before you stop."}}\n'
