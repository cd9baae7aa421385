//! The settings of the loop brakes besides `stopBlockCap`: `stopEscapeHatch` (a sentence
//! added to Stop block reasons) and `maxHookDepth` (the depth guard), each from the
//! highest layer that sets it, a bad value reported with its file and ignored.

use crate::config::schema::StopEscapeHatch;
use crate::config::{ConfigError, ConfigLayer};

/// The sentence of `"stopEscapeHatch": true`.
pub const DEFAULT_STOP_ESCAPE_HATCH: &str = "if you truly cannot fix this, explain why and stop";

/// The longest `stopEscapeHatch` sentence, in characters.
pub const MAX_STOP_ESCAPE_HATCH_CHARS: usize = 500;

/// How deep hooks may nest when no file sets `maxHookDepth`.
pub const DEFAULT_MAX_HOOK_DEPTH: u32 = 4;

/// The largest `maxHookDepth`.
pub const MAX_MAX_HOOK_DEPTH: u32 = 64;

/// The `stopEscapeHatch` sentence of the highest layer that sets the key (`None`: off).
pub(super) fn escape_hatch(
    layers: &[&ConfigLayer],
    errors: &mut Vec<ConfigError>,
) -> Option<String> {
    let layer = layers
        .iter()
        .find(|l| l.settings.stop_escape_hatch.is_some())?;
    match layer.settings.stop_escape_hatch.as_ref()? {
        StopEscapeHatch::Switch(false) => None,
        StopEscapeHatch::Switch(true) => Some(DEFAULT_STOP_ESCAPE_HATCH.to_string()),
        StopEscapeHatch::Sentence(text) => {
            let chars = text.chars().count();
            if text.trim().is_empty() || chars > MAX_STOP_ESCAPE_HATCH_CHARS || text.contains('\0')
            {
                errors.push(ConfigError {
                    location: layer.origin.location.clone(),
                    path: "$.stopEscapeHatch".into(),
                    message: format!(
                        "`stopEscapeHatch` must be `true`, `false` or a sentence of 1 to \
                         {MAX_STOP_ESCAPE_HATCH_CHARS} characters without NUL, found {chars} \
                         characters; no escape hatch is added"
                    ),
                });
                return None;
            }
            Some(text.trim().to_string())
        }
    }
}

/// The `maxHookDepth` of the highest layer that sets it, else [`DEFAULT_MAX_HOOK_DEPTH`].
pub(super) fn max_hook_depth(layers: &[&ConfigLayer], errors: &mut Vec<ConfigError>) -> u32 {
    let Some((layer, depth)) = layers
        .iter()
        .find_map(|l| l.settings.max_hook_depth.map(|d| (l, d)))
    else {
        return DEFAULT_MAX_HOOK_DEPTH;
    };
    if (1..=MAX_MAX_HOOK_DEPTH).contains(&depth) {
        return depth;
    }
    errors.push(ConfigError {
        location: layer.origin.location.clone(),
        path: "$.maxHookDepth".into(),
        message: format!(
            "`maxHookDepth` must be from 1 to {MAX_MAX_HOOK_DEPTH}, found {depth}; the default \
             {DEFAULT_MAX_HOOK_DEPTH} is used"
        ),
    });
    DEFAULT_MAX_HOOK_DEPTH
}
