//! The `if` filter's cost (issue 27): what a Bash `if` rule adds to an event, now that its
//! shell parser memoises (`vendor/brush-parser/PATCHED.md`).
//!
//! 1. A `serve` event in process (lockstep, audit off) with one wasm hook, without an `if`
//!    rule and with `"if": "Bash(cargo test *)"`, which this bench's command lines match,
//!    so both rows run the hook; each event's line differs, so no analysis is reused.
//! 2. The analysis alone ([`hookhost::matcher::shell::analyze`], which a rule's first test
//!    of an event runs) of command lines of a few shapes, beside parsing the same line's
//!    tool input as JSON (what every event pays to read it): a ratio per shape.

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use super::audit_cost::serve_event;
use super::median;

/// Command lines of the shapes agents send, `{n}` replaced per call so that no call
/// meets the analysis of the one before.
const SHAPES: &[(&str, &str)] = &[
    (
        "one command",
        "cargo test --workspace -- --test-threads {n}",
    ),
    (
        "a chain of five",
        "cd crates/core && cargo fmt --check && cargo clippy -- -D warnings && \
         cargo test {n} | tail -20 && git status --short",
    ),
    (
        "a loop with substitutions",
        "for f in $(git diff --name-only HEAD~{n}); do if [ -f \"$f\" ]; then \
         wc -l \"$f\"; else echo \"gone: $f\"; fi; done",
    ),
    (
        "a here-document commit",
        "git commit -F - <<'EOF'\nfix the parser ({n})\n\nThe tokenizer read past the end \
         of an expansion.\nTested with every redirect operator.\nEOF",
    ),
];

/// Microseconds per call of `f(n)` over `calls` calls.
fn per_call(calls: usize, mut f: impl FnMut(usize)) -> f64 {
    let started = Instant::now();
    for n in 0..calls {
        f(n);
    }
    started.elapsed().as_secs_f64() * 1e6 / calls as f64
}

/// Runs both comparisons for `rounds` rounds and prints them with the ratios.
pub fn report(dir: &Path, plugin: &str, events: usize, rounds: usize) {
    let hook = |rule: Option<&str>| {
        let mut hook = json!({"type": "wasm", "plugin": plugin});
        if let Some(rule) = rule {
            hook["if"] = json!(rule);
        }
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}})
    };
    let (plain, filtered) = (hook(None), hook(Some("Bash(cargo test *)")));
    let (mut without, mut with) = (vec![], vec![]);
    let mut shapes: Vec<(Vec<f64>, Vec<f64>)> = vec![(vec![], vec![]); SHAPES.len()];
    let calls = events.max(100);
    for _ in 0..rounds.max(1) {
        without.push(serve_event(dir, &plain, events, None));
        with.push(serve_event(dir, &filtered, events, None));
        for ((_, shape), (analyses, parses)) in SHAPES.iter().zip(&mut shapes) {
            let lines: Vec<String> = (0..calls)
                .map(|n| shape.replace("{n}", &n.to_string()))
                .collect();
            let inputs: Vec<String> = lines
                .iter()
                .map(|line| json!({"command": line, "description": "run it"}).to_string())
                .collect();
            analyses.push(per_call(calls, |n| {
                let analysis = hookhost::matcher::shell::analyze(&lines[n]);
                assert!(analysis.unknown.is_none(), "{}: {analysis:?}", lines[n]);
                black_box(analysis);
            }));
            parses.push(per_call(calls, |n| {
                black_box(serde_json::from_str::<Value>(&inputs[n]).expect("JSON"));
            }));
        }
    }
    let (without, with) = (median(&mut without), median(&mut with));
    println!(
        "the `if` filter's cost (issue 27; in process, lockstep, audit off, median of {rounds} \
         rounds):"
    );
    println!();
    println!("| row | µs | ratio |");
    println!("|---|---:|---:|");
    println!("| `serve` event, one wasm hook | {without:.2} | 1.00 |");
    println!(
        "| the same hook with `\"if\": \"Bash(cargo test *)\"` | {with:.2} | {:.2} |",
        with / without
    );
    println!();
    println!("| command line | bytes | analysis µs | its tool input as JSON µs | ratio |");
    println!("|---|---:|---:|---:|---:|");
    for ((name, shape), (analyses, parses)) in SHAPES.iter().zip(&mut shapes) {
        let (analysis, parse) = (median(analyses), median(parses));
        println!(
            "| {name} | {} | {analysis:.2} | {parse:.2} | {:.1} |",
            shape.replace("{n}", "0").len(),
            analysis / parse
        );
    }
    println!();
}
