//! The `if` filter: no rule and no command line may panic, overflow the stack or take
//! unbounded time; and a command that a rule matches is still matched when it is wrapped in
//! `sh -c '…'` or a `{ …; }` group (wrapping never hides a command from a hook).
//! A panic inside brush-parser is contained by the analysis (`contained.rs`): the hook runs.
#![no_main]

mod contained;

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(init: contained::install(), |data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // The first line is the rule's pattern, the rest the command.
    let (pattern, command) = text.split_once('\n').unwrap_or(("git push *", &text));
    let Ok(rule) = hookhost::matcher::IfRule::parse(&format!("Bash({pattern})"), None) else {
        return;
    };
    let cwd = Path::new("/");
    let matches = |command: &str| rule.matches("Bash", &json!({ "command": command }), cwd, cwd);
    contained::parser_panicked();
    let matched = matches(command);
    if contained::parser_panicked() {
        assert!(matched, "a parser panic skipped the hook: {command:?}");
    }
    if matched {
        let quoted = format!("sh -c '{}'", command.replace('\'', r"'\''"));
        assert!(matches(&quoted), "lost inside sh -c: {quoted:?}");
        let grouped = format!("{{ {command}\n}}");
        // A command that ends in a here-document or a comment may not survive the group.
        if !command.contains("<<") && !command.contains('#') && !command.contains('\\') {
            assert!(matches(&grouped), "lost inside a group: {grouped:?}");
        }
    }
});
