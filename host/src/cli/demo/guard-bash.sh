# PreToolUse(Bash): block commands that destroy or pipe the internet into a shell.
input=$(cat)
case "$input" in
  *'"command":"rm -rf /'*)
    echo "refusing to delete the filesystem root" >&2
    exit 2 ;;
  *'curl '*'| sh'*|*'curl '*'|sh'*)
    printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"piping a download into a shell is not allowed"}}\n'
    exit 0 ;;
esac
exit 0
