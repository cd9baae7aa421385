//! Checking a chain offline ([`verify`], `hookhost audit verify`): the files of a log
//! read forward as one stream of lines (each line held to [`LINE_CAP`]; a longer one is
//! hashed, never held), every `seq` one more than the last, every `prev` the hash of the
//! line before, every signed line's signature made by the trusted key, and a signed line
//! at least every `every` seqs. The first break is reported (where, and what is wrong);
//! after it nothing is believed, so the check stops there.
//!
//! Not breaks, but said: lines before the chain's first line (a log from before the
//! chain), a set that begins after the genesis (older files rotated away), one line that
//! is not a chain line but is chained over (half a line from a writer killed mid-line),
//! the lines after the last signed line (the unsigned tail: see `docs/book/src/audit-chain.md` for what
//! can be told of it), and a last line still being written.

use std::path::PathBuf;

use ed25519_dalek::{Signature, VerifyingKey};
use serde::{Deserialize, Serialize};

mod files;

pub use files::rotated_set;

use super::LINE_CAP;
use super::chain::{Hash, NO_PREV, hash};
use files::{Got, Read, Stream};

/// Warnings named one by one; the rest are counted in the last.
const MAX_WARNINGS: usize = 100;

/// Lines read past a seq that jumped forward, looking for the seq that was expected (then
/// the lines were reordered, not deleted).
const LOOKAHEAD: usize = 64;

/// Where a line is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Place {
    /// The file.
    pub file: String,
    /// The line number in the file, from 1.
    pub line: u64,
    /// The line's seq, when it has one.
    pub seq: Option<u64>,
}

/// A break, or something said that is not one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Where.
    #[serde(flatten)]
    pub at: Place,
    /// What, in one word: see `docs/json-output.md`.
    pub kind: &'static str,
    /// What, for people.
    pub message: String,
}

/// One file of the set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSummary {
    /// The file.
    pub file: String,
    /// Its lines read.
    pub lines: u64,
    /// The seq of its first and last chain lines.
    pub first_seq: Option<u64>,
    /// See `first_seq`.
    pub last_seq: Option<u64>,
}

/// What [`verify`] found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// No break.
    pub intact: bool,
    /// The first break.
    pub problem: Option<Finding>,
    /// What is not a break but is worth saying (see the module docs).
    pub warnings: Vec<Finding>,
    /// The files, in the order read.
    pub files: Vec<FileSummary>,
    /// Lines read (up to the break).
    pub lines: u64,
    /// The first and last seq read.
    pub first_seq: Option<u64>,
    /// See `first_seq`.
    pub last_seq: Option<u64>,
    /// Signed lines (genesis and checkpoints) whose signature was checked.
    pub signed: u64,
    /// The last signed line.
    pub last_signed: Option<Place>,
    /// Chain lines after the last signed line.
    pub unsigned_tail: u64,
    /// The last line, still being written (no newline yet), when there is one.
    pub in_progress: Option<Place>,
    /// The public key the signatures were checked against (hex).
    pub key: Option<String>,
    /// Where that key came from: `option` (`--key`), `host` (the host's key file),
    /// `log` (the first signed line: trust on first use).
    pub key_source: Option<&'static str>,
}

/// The fields of a chain line the check reads.
#[derive(Deserialize)]
struct Fields {
    seq: u64,
    prev: String,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    every: Option<u64>,
    #[serde(default)]
    count: Option<u64>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default, rename = "keyError")]
    key_error: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// The key signatures are checked against, and where it came from.
#[derive(Debug, Clone, Copy)]
pub struct TrustedKey {
    /// The key.
    pub key: VerifyingKey,
    /// `option` or `host` (see [`Report::key_source`]).
    pub source: &'static str,
}

/// Checks the chain through `files`, in order (rotated files first, the live log last).
/// Signatures are checked against `key`, else against the key of the first signed line
/// (said in [`Report::key_source`]).
///
/// # Errors
///
/// A file cannot be opened or read (the message names it).
pub fn verify(files: &[PathBuf], key: Option<TrustedKey>) -> Result<Report, String> {
    Check::new(files, key).run()
}

/// The check's state between lines.
struct Check<'a> {
    stream: Stream<'a>,
    report: Report,
    trusted: Option<VerifyingKey>,
    /// The hash of the line before, and of the one before it.
    prev: Option<Hash>,
    /// The place of the line before.
    prev_at: Option<Place>,
    before_prev: Option<Hash>,
    /// The last chain line's seq.
    last_seq: Option<u64>,
    /// The last signed line: its seq and its promise (`every`).
    mark: Option<(u64, u64)>,
    /// The first seq of a set that begins after the genesis: a signed line is due within
    /// [`CHECKPOINT_EVERY`](super::CHECKPOINT_EVERY) seqs of it (before one, `mark` is
    /// unknown).
    unsigned_from: Option<u64>,
    /// A line that is not a chain line, waiting for the next line to chain over it.
    loose: Option<Place>,
    /// Lines before the first chain line.
    before_chain: u64,
    unnamed_warnings: usize,
}

impl<'a> Check<'a> {
    fn new(files: &'a [PathBuf], key: Option<TrustedKey>) -> Check<'a> {
        Check {
            stream: Stream::new(files),
            report: Report {
                intact: false,
                problem: None,
                warnings: Vec::new(),
                files: files
                    .iter()
                    .map(|f| FileSummary {
                        file: f.display().to_string(),
                        lines: 0,
                        first_seq: None,
                        last_seq: None,
                    })
                    .collect(),
                lines: 0,
                first_seq: None,
                last_seq: None,
                signed: 0,
                last_signed: None,
                unsigned_tail: 0,
                in_progress: None,
                key: key.map(|k| hex::encode(k.key.as_bytes())),
                key_source: key.map(|k| k.source),
            },
            trusted: key.map(|k| k.key),
            prev: None,
            prev_at: None,
            before_prev: None,
            last_seq: None,
            mark: None,
            unsigned_from: None,
            loose: None,
            before_chain: 0,
            unnamed_warnings: 0,
        }
    }

    fn warn(&mut self, at: Place, kind: &'static str, message: String) {
        if self.report.warnings.len() < MAX_WARNINGS {
            self.report.warnings.push(Finding { at, kind, message });
        } else {
            self.unnamed_warnings += 1;
        }
    }

    fn run(mut self) -> Result<Report, String> {
        while let Some(got) = self.stream.next()? {
            let at = Place {
                file: self.stream.shown(got.file),
                line: got.line,
                seq: None,
            };
            self.report.files[got.file].lines += 1;
            if !got.terminated {
                if got.file + 1 == self.stream.files.len() {
                    self.report.in_progress = Some(at);
                } else {
                    self.warn(
                        at,
                        "torn",
                        "the file ends in half a line (a writer stopped mid-line); the next \
                         file's chain goes on from the line before it"
                            .into(),
                    );
                }
                continue;
            }
            self.report.lines += 1;
            if let Err(problem) = self.line(got, at) {
                self.report.problem = Some(problem);
                break;
            }
        }
        if self.report.problem.is_none() && self.last_seq.is_none() {
            let file = self.report.files.last().map(|f| f.file.clone());
            self.report.problem = Some(Finding {
                at: Place {
                    file: file.unwrap_or_default(),
                    line: 0,
                    seq: None,
                },
                kind: "noChain",
                message: "no chain line: nothing here can be verified".into(),
            });
        }
        if self.before_chain > 0 {
            let file = self.report.files[0].file.clone();
            self.warn(
                Place {
                    file,
                    line: 1,
                    seq: None,
                },
                "beforeChain",
                format!(
                    "{} lines before the chain's first line are not covered by it (written \
                     before the chain began)",
                    self.before_chain
                ),
            );
        }
        if self.unnamed_warnings > 0 {
            let at = self.report.warnings.last().expect("full").at.clone();
            self.report.warnings.push(Finding {
                at,
                kind: "more",
                message: format!("{} more warnings", self.unnamed_warnings),
            });
        }
        self.report.intact = self.report.problem.is_none();
        Ok(self.report)
    }

    /// Checks one whole line.
    fn line(&mut self, got: Got, mut at: Place) -> Result<(), Finding> {
        let (bytes, line_hash) = match &got.read {
            Read::Whole(bytes) => (Some(bytes.as_slice()), hash(bytes)),
            Read::TooLong(_, hash) => (None, *hash),
        };
        let fields = bytes.and_then(|b| serde_json::from_slice::<Fields>(b).ok());
        let Some(fields) = fields else {
            return self.loose_line(got, at, line_hash);
        };
        let seq = fields.seq;
        at.seq = Some(seq);
        let break_ = |kind: &'static str, message: String| Finding {
            at: at.clone(),
            kind,
            message,
        };
        let Some(prev) = decode(&fields.prev) else {
            return Err(break_(
                "edited",
                "its `prev` is not a SHA-256 in hex".into(),
            ));
        };
        let genesis = fields.kind.as_deref() == Some("genesis");
        match self.last_seq {
            None => self.first_chain_line(&at, genesis, seq, prev)?,
            Some(_) if genesis => {
                return Err(break_(
                    "restarted",
                    format!(
                        "the chain starts again here (a genesis line: {})",
                        fields.reason.as_deref().unwrap_or("no reason given")
                    ),
                ));
            }
            Some(last) => self.follows(&at, last, seq, prev)?,
        }
        if let Some(loose) = self.loose.take() {
            self.warn(
                loose,
                "torn",
                "not a chain line (half a line from a writer stopped mid-line?); the next \
                 line's `prev` covers it"
                    .into(),
            );
        }
        match fields.kind.as_deref() {
            Some("genesis" | "checkpoint") => self.signed(&at, &fields, bytes.unwrap_or(&[]))?,
            _ => {
                if self.mark.is_none()
                    && let Some(first) = self.unsigned_from
                    && seq > first.saturating_add(super::CHECKPOINT_EVERY)
                {
                    return Err(break_(
                        "checkpointMissing",
                        format!(
                            "no signed line since the set's first line (seq {first}), though \
                             the host signs one at least every {} seqs (the signed lines were \
                             removed, or the lines were made up without the key)",
                            super::CHECKPOINT_EVERY
                        ),
                    ));
                }
                if let Some((mark, every)) = self.mark
                    && seq > mark.saturating_add(every)
                {
                    return Err(break_(
                        "checkpointMissing",
                        format!(
                            "no signed line since seq {mark}, though one was due every {every} \
                             seqs (a checkpoint was removed, or a writer could not sign)"
                        ),
                    ));
                }
                self.report.unsigned_tail += 1;
            }
        }
        let summary = &mut self.report.files[got.file];
        summary.first_seq.get_or_insert(seq);
        summary.last_seq = Some(seq);
        self.report.first_seq.get_or_insert(seq);
        self.report.last_seq = Some(seq);
        self.last_seq = Some(seq);
        self.before_prev = self.prev;
        self.prev = Some(line_hash);
        self.prev_at = Some(at);
        Ok(())
    }

    /// A line that is not a chain line: before the chain, or one (and only one) in it.
    fn loose_line(&mut self, got: Got, at: Place, line_hash: Hash) -> Result<(), Finding> {
        if self.last_seq.is_none() {
            self.before_chain += 1;
        } else if let Some(loose) = &self.loose {
            return Err(Finding {
                at: loose.clone(),
                kind: "inserted",
                message: "not a chain line, and the line after it is none either: nothing \
                          covers it (inserted, or a chain line edited beyond reading)"
                    .into(),
            });
        } else {
            if let Read::TooLong(len, _) = got.read {
                self.warn(
                    at.clone(),
                    "tooLong",
                    format!("{len} bytes, over the cap of {LINE_CAP}: hashed, not read"),
                );
            }
            self.loose = Some(at.clone());
        }
        self.before_prev = self.prev;
        self.prev = Some(line_hash);
        self.prev_at = Some(at);
        Ok(())
    }

    /// The first chain line of the set.
    fn first_chain_line(
        &mut self,
        at: &Place,
        genesis: bool,
        seq: u64,
        prev: Hash,
    ) -> Result<(), Finding> {
        if let Some(before) = self.prev
            && prev != before
        {
            return Err(Finding {
                at: at.clone(),
                kind: "edited",
                message: "its `prev` is not the hash of the line before it: that line was \
                          changed"
                    .into(),
            });
        }
        if !genesis {
            self.unsigned_from = Some(seq);
            self.warn(
                at.clone(),
                "startsAfterGenesis",
                format!(
                    "the files begin at seq {seq}: the lines before it are not in them \
                     (rotated away?) and cannot be checked"
                ),
            );
        } else if self.prev.is_none() && prev != NO_PREV {
            self.warn(
                at.clone(),
                "startsAfterGenesis",
                "the genesis follows a line that is not in the files".into(),
            );
        }
        Ok(())
    }

    /// A chain line after the chain line of seq `last`.
    fn follows(&mut self, at: &Place, last: u64, seq: u64, prev: Hash) -> Result<(), Finding> {
        let finding = |kind: &'static str, message: String| Finding {
            at: at.clone(),
            kind,
            message,
        };
        let Some(expected) = last.checked_add(1) else {
            return Err(finding(
                "edited",
                format!("a line after seq {last}, the largest a seq can be"),
            ));
        };
        if seq > expected {
            if self.seq_comes_later(expected) {
                return Err(finding(
                    "reordered",
                    format!("seq {seq} where seq {expected} was due, and {expected} comes later"),
                ));
            }
            let missing = if seq == expected + 1 {
                format!("seq {expected} is missing")
            } else {
                format!("seqs {expected} to {} are missing", seq - 1)
            };
            return Err(finding(
                "missing",
                format!("{missing} before this line (deleted)"),
            ));
        }
        if seq < expected {
            if seq == last && Some(prev) == self.before_prev {
                let next = format!("{}:{}", at.file, at.line);
                return Err(Finding {
                    at: self.prev_at.clone().unwrap_or_else(|| at.clone()),
                    kind: "inserted",
                    message: format!(
                        "inserted: the next line ({next}) has the same seq and is chained to \
                         the line before this one"
                    ),
                });
            }
            return Err(finding(
                "reordered",
                format!("seq {seq} after seq {last}: lines are out of order"),
            ));
        }
        if Some(prev) != self.prev {
            let before = self.prev_at.clone().unwrap_or_else(|| at.clone());
            let next = format!("{}:{}", at.file, at.line);
            if self.loose.is_some() || Some(prev) == self.before_prev {
                return Err(Finding {
                    at: before,
                    kind: "inserted",
                    message: format!(
                        "inserted: the next line ({next}) is chained to the line before this one"
                    ),
                });
            }
            return Err(Finding {
                at: before,
                kind: "edited",
                message: format!(
                    "changed after it was written: its hash is not the `prev` of the next line \
                     ({next})"
                ),
            });
        }
        Ok(())
    }

    /// Whether seq `wanted` is among the next [`LOOKAHEAD`] lines (read only to tell a
    /// reordering from a deletion; the check stops at this break anyway).
    fn seq_comes_later(&mut self, wanted: u64) -> bool {
        for _ in 0..LOOKAHEAD {
            let Ok(Some(got)) = self.stream.next() else {
                return false;
            };
            if let Read::Whole(bytes) = &got.read
                && serde_json::from_slice::<Fields>(bytes).is_ok_and(|f| f.seq == wanted)
            {
                return true;
            }
        }
        false
    }

    /// A genesis or checkpoint line: its key, signature and promise.
    fn signed(&mut self, at: &Place, fields: &Fields, bytes: &[u8]) -> Result<(), Finding> {
        let finding = |kind: &'static str, message: String| Finding {
            at: at.clone(),
            kind,
            message,
        };
        let seq = fields.seq;
        if let (Some((mark, _)), Some(count)) = (self.mark, fields.count)
            && fields.kind.as_deref() == Some("checkpoint")
            && count.checked_add(1).and_then(|n| seq.checked_sub(n)) != Some(mark)
        {
            return Err(finding(
                "edited",
                format!(
                    "it counts {count} lines since the last signed line (seq {mark}), but \
                     there are {}",
                    seq - mark - 1
                ),
            ));
        }
        let Some(key) = fields.key.as_deref() else {
            return Err(finding(
                "unsigned",
                format!(
                    "a {} without a signature: {}",
                    fields.kind.as_deref().unwrap_or("signed line"),
                    fields.key_error.as_deref().unwrap_or("no key")
                ),
            ));
        };
        let line_key = crate::policy::allowlist::parse_public_key(key)
            .map_err(|e| finding("forged", format!("its key is not a public key: {e}")))?;
        let trusted = match self.trusted {
            Some(trusted) => trusted,
            None => {
                self.trusted = Some(line_key);
                self.report.key = Some(hex::encode(line_key.as_bytes()));
                self.report.key_source = Some("log");
                line_key
            }
        };
        if line_key != trusted {
            return Err(finding(
                "forged",
                format!(
                    "signed by key {key}, not by the trusted key {}",
                    hex::encode(trusted.as_bytes())
                ),
            ));
        }
        let (signed, signature) = split_signature(bytes).ok_or_else(|| {
            finding(
                "edited",
                "its last member is not `\"signature\":\"<hex>\"`".into(),
            )
        })?;
        trusted.verify_strict(&signed, &signature).map_err(|_| {
            finding(
                "badSignature",
                "its signature does not match the line: it was changed after it was signed".into(),
            )
        })?;
        self.report.signed += 1;
        self.report.last_signed = Some(at.clone());
        self.report.unsigned_tail = 0;
        self.mark = Some((seq, fields.every.unwrap_or(super::CHECKPOINT_EVERY).max(1)));
        Ok(())
    }
}

/// `…,"signature":"<hex>"}` as the bytes it signs (`…}`) and the signature.
fn split_signature(line: &[u8]) -> Option<(Vec<u8>, Signature)> {
    const MEMBER: &[u8] = b",\"signature\":\"";
    let body = line.strip_suffix(b"\"}")?;
    let at = body.windows(MEMBER.len()).rposition(|w| w == MEMBER)?;
    let mut bytes = [0u8; 64];
    hex::decode_to_slice(&body[at + MEMBER.len()..], &mut bytes).ok()?;
    let mut signed = body[..at].to_vec();
    signed.push(b'}');
    Some((signed, Signature::from_bytes(&bytes)))
}

/// A SHA-256 in lowercase hex.
fn decode(text: &str) -> Option<Hash> {
    let mut hash = [0u8; 32];
    (text.len() == 64 && !text.bytes().any(|b| b.is_ascii_uppercase()))
        .then(|| hex::decode_to_slice(text, &mut hash).ok())
        .flatten()
        .map(|()| hash)
}

#[cfg(test)]
mod tests;
