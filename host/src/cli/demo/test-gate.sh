# Stop: keep the agent working until the tests passed.
cat >/dev/null
if [ -f .tests-passed ]; then exit 0; fi
printf '{"decision":"block","reason":"run `cargo test` first: no passing test run recorded"}\n'
