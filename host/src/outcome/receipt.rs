//! Decision receipts: what an embedder stores or forwards as proof of which policy
//! decided an event ([`DecisionReceipt`], `Outcome::receipt`; docs/book/src/required-hooks.md and
//! docs/json-output.md). The receipt is made from facts the dispatch already holds: the
//! digest of the input as received, the policy's digest ([`PolicyDigest`]), each matched
//! hook's id, type, plugin digest and status, the merged decision, and the `seq` of the
//! audit line that recorded it. Under `--format claude` it is not sent (it would reach the
//! model); the audit line carries it.

use std::sync::Arc;

use serde::Serialize;
use sha2::Digest as _;

use super::{Decision, Executed, HookResult, HookStatus, Outcome};
use crate::policy::PolicyDigest;

/// The proof of one decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionReceipt {
    /// `sha256:<hex>` of the input as received: the bytes on stdin for `hookhost
    /// dispatch`; for the library and the daemons, which receive a parsed value, its
    /// compact JSON (serde_json, keys in the order received).
    pub input: String,
    /// The policy: its sources with their digests, the workspace trust, and the digest
    /// of it all.
    pub policy: Arc<PolicyDigest>,
    /// Each hook that matched, in config order.
    pub hooks: Vec<ReceiptHook>,
    /// The merged decision.
    pub decision: Decision,
    /// `false` when a hook stopped the agent.
    #[serde(rename = "continue")]
    pub continue_: bool,
    /// The `seq` of the audit line of this dispatch; absent when there is no audit log,
    /// the log does not number its lines, or the line could not be written (and in the
    /// audit line itself, whose own `seq` it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

/// One hook of a receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptHook {
    /// The hook's id.
    pub id: String,
    /// Its source (`managed`, `user`, …).
    pub source: String,
    /// Its handler type.
    #[serde(rename = "type")]
    pub kind: String,
    /// `sha256:<hex>` of the plugin that ran (wasm hooks whose plugin was loaded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// What became of it (as in the outcome's `hooks`).
    pub status: HookStatus,
    /// Whether it is a required hook.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

/// `sha256:<hex>` of `bytes`.
pub fn input_digest(bytes: &[u8]) -> String {
    input_digest_hex(&sha2::Sha256::digest(bytes).into())
}

impl DecisionReceipt {
    /// The receipt of `outcome`, merged from `executed` (the merge reports one hook per
    /// executed hook, in order, before anything else adds to `hooks`), for an input of
    /// digest `input` under `policy`. `seq` is set once the audit line is written.
    pub fn new(
        input: String,
        policy: Arc<PolicyDigest>,
        executed: &[Executed],
        outcome: &Outcome,
    ) -> DecisionReceipt {
        let hooks = executed
            .iter()
            .zip(&outcome.hooks)
            .map(|(done, report)| ReceiptHook {
                id: report.id.clone(),
                source: report.source.clone(),
                kind: report.kind.clone(),
                plugin: match &done.result {
                    HookResult::Ran(run) => run.usage.plugin_sha256.map(|d| input_digest_hex(&d)),
                    _ => None,
                },
                status: report.status,
                required: report.required,
            })
            .collect();
        DecisionReceipt {
            input,
            policy,
            hooks,
            decision: outcome.decision,
            continue_: outcome.continue_,
            seq: None,
        }
    }
}

fn input_digest_hex(digest: &[u8; 32]) -> String {
    let mut text = Vec::with_capacity(7 + 64);
    text.extend_from_slice(b"sha256:");
    crate::text::hex_into(&mut text, digest);
    String::from_utf8(text).unwrap_or_default()
}
