//! A plugin's typed response, built from arbitrary bytes, through the sandbox's
//! conversion (`hookhost::handlers::wasm::convert_response`): it never panics, and what
//! comes out is bounded: every text field at most the cap (plus the truncation note),
//! the whole converted JSON at most `MAX_CONVERTED_BYTES`, and no reserved key set by
//! extras.
#![no_main]

use hookhost::handlers::output::OUTPUT_TEXT_CAP;
use hookhost::handlers::wasm::{MAX_CONVERTED_BYTES, PluginResponse, convert_response};
use libfuzzer_sys::fuzz_target;

const EVENTS: &[&str] = &[
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "Stop",
    "SessionStart",
    "UserPromptSubmit",
    "TaskCompleted",
    "Notification",
];

/// The chunk, repeated `times` times: small inputs still reach the caps.
fn field(chunk: &[u8], times: usize) -> Option<String> {
    if chunk.is_empty() {
        return None;
    }
    Some(String::from_utf8_lossy(chunk).repeat(times.max(1)))
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let (head, rest) = data.split_at(3);
    let event = EVENTS[head[0] as usize % EVENTS.len()];
    // Each field's chunk is repeated up to 64 Ki times: 0 → once.
    let times = 1usize << (head[1] % 17);
    let mut chunks = rest.split(|b| *b == 0xff);
    let mut next = || chunks.next().unwrap_or_default();
    let response = PluginResponse {
        permission: field(next(), 1),
        block: head[2] & 1 != 0,
        reason: field(next(), times),
        continue_: (head[2] & 2 != 0).then_some(head[2] & 4 != 0),
        stop_reason: field(next(), times),
        system_message: field(next(), times),
        additional_context: field(next(), times),
        updated_input_json: field(next(), if head[2] & 8 != 0 { times } else { 1 }),
        updated_output_json: field(next(), 1),
        extras_json: field(next(), if head[2] & 16 != 0 { times } else { 1 }),
    };
    let Ok(converted) = convert_response(response, event) else {
        return;
    };
    let text = serde_json::to_string(&converted.json).unwrap();
    assert!(text.len() <= MAX_CONVERTED_BYTES, "{} bytes", text.len());
    let output = &converted.answer.output;
    for t in [&output.reason, &output.stop_reason, &output.system_message]
        .into_iter()
        .flatten()
    {
        assert!(t.chars().count() <= OUTPUT_TEXT_CAP + 40, "{}", t.chars().count());
    }
    if let Some(specific) = converted.json.get("hookSpecificOutput") {
        assert!(specific.get("updatedPermissions").is_none());
    }
});
