# PostToolUse(Bash): mask GitHub tokens in what the model sees.
input=$(cat)
case "$input" in
  *ghp_*)
    response=$(printf '%s' "$input" | sed -E 's/ghp_[A-Za-z0-9]+/ghp_****/g; s/.*"tool_response":(\{[^}]*\}).*/\1/')
    printf '{"hookSpecificOutput":{"hookEventName":"PostToolUse","updatedToolOutput":%s,"additionalContext":"a token in the output was masked"}}\n' "$response" ;;
esac
