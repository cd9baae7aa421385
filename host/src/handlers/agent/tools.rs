//! An agent hook's tools: `Read`, `Grep`, `Glob` and `LS`, read-only and confined to the
//! workspace (the event's project directory). **Every path a model names passes
//! [`Workspace::resolve`]**, and every open goes through one cap-std [`Dir`] of the
//! workspace, which refuses `..`, absolute paths and symlinks that leave it, whatever
//! the lexical check missed:
//!
//! - a path outside the workspace, with a `..` component, or whose real path leaves it
//!   (a symlink out) is refused;
//! - a private file ([`crate::policy::places::private_by_name`]: the user's local
//!   settings) and anything inside a host-owned place that refuses every grant
//!   ([`Guard::Any`]: the trust store, the data directory, the agents' user settings, …)
//!   is refused: the same rule that keeps them from a wasm plugin's read-only grant;
//! - only regular files are read, opened non-blocking (a FIFO, a device or a socket is
//!   refused, and a FIFO swapped in after the check does not block);
//! - walks (`Grep`, `Glob`) follow no symlinks, skip special and private files and
//!   `.git`, and stop at [`WALK_ENTRIES`] entries and [`WALK_DEPTH`] levels;
//! - every answer is capped ([`ANSWER_LIMIT`]); `Read` reads at most [`READ_LIMIT`]
//!   bytes a call and [`HOOK_READ_LIMIT`] a run. Grep never shells out (the `regex`
//!   crate, size-limited).
//!
//! A refusal is a tool error the model sees (`refused: …`); the run goes on.

use std::io::{BufRead, BufReader, Read};
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use serde_json::{Value, json};

use crate::handlers::model::{ToolCall, ToolDef, ToolResult};
use crate::policy::places::{Guard, HostPlaces, private_by_name};

/// Bytes one `Read` returns at most.
pub const READ_LIMIT: usize = 64 * 1024;
/// Bytes all `Read`s of one run return at most.
pub const HOOK_READ_LIMIT: usize = 1 << 20;
/// Bytes of any one tool answer.
pub const ANSWER_LIMIT: usize = 96 * 1024;
/// Bytes of a file `Grep` searches (the rest is not read).
pub const GREP_FILE_LIMIT: u64 = 1 << 20;
/// Matches `Grep` lists.
pub const GREP_MATCHES: usize = 200;
/// Paths `Glob` lists.
pub const GLOB_RESULTS: usize = 500;
/// Entries `LS` lists.
pub const LS_ENTRIES: usize = 1000;
/// Directory entries a walk visits.
pub const WALK_ENTRIES: usize = 20_000;
/// Directory levels a walk descends.
pub const WALK_DEPTH: usize = 32;

/// The tools offered to the model (the verdict tool is added by the loop).
pub fn defs() -> Vec<ToolDef> {
    let def = |name: &str, description: &str, schema: Value| ToolDef {
        name: name.to_string(),
        description: description.to_string(),
        input_schema: schema,
    };
    vec![
        def(
            "Read",
            "Read a text file of the workspace: lines numbered from 1. `offset` is the first \
             line (1-based), `limit` the number of lines.",
            json!({"type": "object", "properties": {
                "file_path": {"type": "string"},
                "offset": {"type": "integer"},
                "limit": {"type": "integer"}},
                "required": ["file_path"]}),
        ),
        def(
            "Grep",
            "Search the workspace's files for a regular expression (Rust regex syntax): \
             `path:line:text` per match.",
            json!({"type": "object", "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "glob": {"type": "string"}},
                "required": ["pattern"]}),
        ),
        def(
            "Glob",
            "List the workspace's files matching a glob (`**/*.rs`), under `path`.",
            json!({"type": "object", "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"}},
                "required": ["pattern"]}),
        ),
        def(
            "LS",
            "List a directory of the workspace (directories end with `/`).",
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        ),
    ]
}

/// The workspace a run's tools see, and what they have read.
pub struct Workspace {
    dir: Dir,
    root: PathBuf,
    /// The host-owned places no read may reach (real paths), with what they are.
    places: Vec<(PathBuf, String)>,
    read: usize,
    /// One line per call: the tool and the path it named (never what it read).
    pub log: Vec<String>,
}

/// Why a path or a call is refused (the model reads it).
type Refused = String;

impl Workspace {
    /// The workspace at `root` (the event's project directory).
    ///
    /// # Errors
    ///
    /// It cannot be opened.
    pub fn open(root: &Path, places: HostPlaces) -> Result<Workspace, String> {
        let root = std::fs::canonicalize(root)
            .map_err(|e| format!("the workspace `{}`: {e}", root.display()))?;
        let dir = Dir::open_ambient_dir(&root, ambient_authority())
            .map_err(|e| format!("the workspace `{}`: {e}", root.display()))?;
        // As the sandbox's guard compares them: by real path.
        let places = places
            .iter()
            .filter(|p| p.guard == Guard::Any)
            .map(|p| {
                let real = std::fs::canonicalize(&p.path).unwrap_or_else(|_| p.path.clone());
                (real, p.what.clone())
            })
            .collect();
        Ok(Workspace {
            dir,
            root,
            places,
            read: 0,
            log: Vec::new(),
        })
    }

    /// Runs one call; a refusal or failure is an error result.
    pub fn call(&mut self, call: &ToolCall) -> ToolResult {
        let path = call
            .input
            .get("file_path")
            .or_else(|| call.input.get("path"))
            .and_then(Value::as_str)
            .unwrap_or(".");
        let answer = match call.name.as_str() {
            "Read" => self.read(&call.input),
            "Grep" => self.grep(&call.input),
            "Glob" => self.glob(&call.input),
            "LS" => self.ls(path),
            other => Err(format!("refused: there is no tool `{}`", short(other))),
        };
        let mut entry = format!("{} {}", short(&call.name), short(path));
        if answer.is_err() {
            entry.push_str(" (refused)");
        }
        self.log.push(entry);
        let (content, is_error) = match answer {
            Ok(text) => (text, false),
            Err(text) => (text, true),
        };
        ToolResult {
            id: call.id.clone(),
            content: cap(content),
            is_error,
        }
    }

    /// The workspace-relative path `raw` names, or why it is refused: outside the
    /// workspace, with `..`, a private file, in a host-owned place, or a symlink out.
    pub fn resolve(&self, raw: &str) -> Result<PathBuf, Refused> {
        let refused = |why: &str| format!("refused: `{}` {why}", short(raw));
        let path = Path::new(raw);
        let inside = if path.is_absolute() {
            path.strip_prefix(&self.root)
                .map_err(|_| refused("is outside the workspace"))?
        } else {
            path
        };
        let mut rel = PathBuf::new();
        for component in inside.components() {
            match component {
                Component::Normal(name) => rel.push(name),
                Component::CurDir => {}
                _ => return Err(refused("leaves the workspace (`..`)")),
            }
        }
        if rel.as_os_str().is_empty() {
            rel.push(".");
        }
        // The real path, symlinks resolved (cap-std refuses the same on open).
        let full = self.root.join(&rel);
        let real = match std::fs::canonicalize(&full) {
            Ok(real) => real,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => full,
            Err(e) => return Err(format!("error: `{}`: {e}", short(raw))),
        };
        if !real.starts_with(&self.root) {
            return Err(refused("leads outside the workspace (a symlink out)"));
        }
        self.visible(&real).map_err(|what| refused(&what))?;
        Ok(rel)
    }

    /// Whether a real path may be seen: not a private file, not in a host-owned place
    /// that refuses read-only grants.
    fn visible(&self, real: &Path) -> Result<(), String> {
        if let Some(what) = private_by_name(real) {
            return Err(format!("is {what}, private to the user"));
        }
        for (place, what) in &self.places {
            if real.starts_with(place) {
                return Err(format!("is in {what}, host-owned"));
            }
        }
        Ok(())
    }

    /// Opens a regular file for reading without blocking (a FIFO never hangs).
    fn open_file(&self, rel: &Path, raw: &str) -> Result<cap_std::fs::File, Refused> {
        let not_regular = || {
            format!(
                "refused: `{}` is not a regular file (a directory, FIFO, device or socket)",
                short(raw)
            )
        };
        let meta = self.dir.metadata(rel).map_err(|e| io_error(raw, &e))?;
        if !meta.is_file() {
            return Err(not_regular());
        }
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
        let file = self
            .dir
            .open_with(rel, &options)
            .map_err(|e| io_error(raw, &e))?;
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(not_regular());
        }
        // What was opened, by the descriptor's own real path: a name swapped for a
        // symlink after `resolve` looked cannot reach a private file either.
        use std::os::fd::AsRawFd;
        let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .map_err(|e| io_error(raw, &e))?;
        if !real.starts_with(&self.root) {
            return Err(format!(
                "refused: `{}` leads outside the workspace",
                short(raw)
            ));
        }
        self.visible(&real)
            .map_err(|what| format!("refused: `{}` {what}", short(raw)))?;
        Ok(file)
    }

    fn read(&mut self, input: &Value) -> Result<String, Refused> {
        let raw = input["file_path"]
            .as_str()
            .ok_or("refused: `file_path` (a string) is required")?;
        let rel = self.resolve(raw)?;
        let left = HOOK_READ_LIMIT.saturating_sub(self.read);
        if left == 0 {
            return Err(format!(
                "refused: this hook has read its {HOOK_READ_LIMIT} bytes"
            ));
        }
        let file = self.open_file(&rel, raw)?;
        let offset = input["offset"].as_u64().unwrap_or(1).max(1);
        let limit = input["limit"].as_u64().unwrap_or(2000).max(1);
        let cap = READ_LIMIT.min(left);
        let reader = BufReader::new(file.take(16 << 20));
        let mut out = String::new();
        let mut truncated = false;
        for (index, line) in reader.split(b'\n').enumerate() {
            let number = index as u64 + 1;
            if number < offset {
                continue;
            }
            if number >= offset.saturating_add(limit) {
                truncated = true;
                break;
            }
            let line = line.map_err(|e| io_error(raw, &e))?;
            let text = String::from_utf8_lossy(&line);
            let row = format!("{number:>6}\t{}\n", text.trim_end_matches('\r'));
            if out.len() + row.len() > cap {
                // A first line longer than what is left: its head, so a read progresses.
                if out.is_empty() {
                    let mut end = cap;
                    while !row.is_char_boundary(end) {
                        end -= 1;
                    }
                    out.push_str(&row[..end]);
                    out.push('\n');
                }
                truncated = true;
                break;
            }
            out.push_str(&row);
        }
        self.read += out.len();
        if truncated {
            out.push_str("(more lines: use offset and limit)\n");
        }
        Ok(out)
    }

    /// Workspace-relative files under `base` (depth-first, sorted per directory): no
    /// symlinks, no special or private files, no `.git`, bounded.
    fn walk(&self, base: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        if self.dir.symlink_metadata(base).is_ok_and(|m| m.is_file()) {
            files.push(base.to_path_buf());
            return files;
        }
        let mut stack = vec![(base.to_path_buf(), 0usize)];
        let mut seen = 0usize;
        while let Some((dir, depth)) = stack.pop() {
            let Ok(entries) = self.dir.read_dir(&dir) else {
                continue;
            };
            let mut children: Vec<_> = entries.flatten().collect();
            children.sort_by_key(cap_std::fs::DirEntry::file_name);
            for entry in children.into_iter().rev() {
                seen += 1;
                if seen > WALK_ENTRIES {
                    return files;
                }
                let name = entry.file_name();
                if name == ".git" {
                    continue;
                }
                let rel = dir.join(&name);
                if self.visible(&self.root.join(&rel)).is_err() {
                    continue;
                }
                match entry.file_type() {
                    Ok(t) if t.is_dir() && depth < WALK_DEPTH => stack.push((rel, depth + 1)),
                    Ok(t) if t.is_file() => files.push(rel),
                    _ => {}
                }
            }
        }
        files
    }

    fn grep(&mut self, input: &Value) -> Result<String, Refused> {
        let pattern = input["pattern"]
            .as_str()
            .ok_or("refused: `pattern` (a string) is required")?;
        let regex = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("error: bad pattern: {}", short(&e.to_string())))?;
        let base = self.resolve(input["path"].as_str().unwrap_or("."))?;
        let filter = match input["glob"].as_str() {
            Some(glob) => Some(
                globset::Glob::new(glob)
                    .map_err(|e| format!("error: bad glob: {e}"))?
                    .compile_matcher(),
            ),
            None => None,
        };
        let mut out = String::new();
        let mut matches = 0usize;
        for rel in self.walk(&base) {
            if filter.as_ref().is_some_and(|f| !f.is_match(&rel)) {
                continue;
            }
            let Ok(file) = self.open_file(&rel, &rel.to_string_lossy()) else {
                continue;
            };
            let mut bytes = Vec::new();
            if file.take(GREP_FILE_LIMIT).read_to_end(&mut bytes).is_err() || bytes.contains(&0) {
                continue;
            }
            let text = String::from_utf8_lossy(&bytes);
            for (index, line) in text.lines().enumerate() {
                if !regex.is_match(line) {
                    continue;
                }
                let line: String = line.chars().take(300).collect();
                out.push_str(&format!("{}:{}:{line}\n", rel.display(), index + 1));
                matches += 1;
                if matches >= GREP_MATCHES || out.len() >= ANSWER_LIMIT {
                    out.push_str("(more matches left out)\n");
                    return Ok(out);
                }
            }
        }
        if out.is_empty() {
            out.push_str("no matches\n");
        }
        Ok(out)
    }

    fn glob(&mut self, input: &Value) -> Result<String, Refused> {
        let pattern = input["pattern"]
            .as_str()
            .ok_or("refused: `pattern` (a string) is required")?;
        let matcher = globset::Glob::new(pattern)
            .map_err(|e| format!("error: bad glob: {e}"))?
            .compile_matcher();
        let base = self.resolve(input["path"].as_str().unwrap_or("."))?;
        let mut out = String::new();
        let mut listed = 0usize;
        for rel in self.walk(&base) {
            let under = rel.strip_prefix(&base).unwrap_or(&rel);
            if matcher.is_match(under) || matcher.is_match(&rel) {
                out.push_str(&format!("{}\n", rel.display()));
                listed += 1;
                if listed >= GLOB_RESULTS {
                    out.push_str("(more paths left out)\n");
                    break;
                }
            }
        }
        if out.is_empty() {
            out.push_str("no files\n");
        }
        Ok(out)
    }

    fn ls(&mut self, raw: &str) -> Result<String, Refused> {
        let rel = self.resolve(raw)?;
        let entries = self.dir.read_dir(&rel).map_err(|e| io_error(raw, &e))?;
        let mut names: Vec<String> = Vec::new();
        for entry in entries.flatten().take(WALK_ENTRIES) {
            let name = entry.file_name();
            if self.visible(&self.root.join(&rel).join(&name)).is_err() {
                continue;
            }
            let dir = entry.file_type().is_ok_and(|t| t.is_dir());
            names.push(format!(
                "{}{}",
                name.to_string_lossy(),
                if dir { "/" } else { "" }
            ));
        }
        names.sort();
        let more = names.len() > LS_ENTRIES;
        names.truncate(LS_ENTRIES);
        let mut out = names.join("\n");
        out.push('\n');
        if more {
            out.push_str("(more entries left out)\n");
        }
        Ok(out)
    }
}

/// An I/O error as a tool answer: an escape cap-std stopped is a refusal.
fn io_error(raw: &str, e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::PermissionDenied
        || e.to_string().contains("outside of the filesystem")
    {
        format!(
            "refused: `{}` leads outside the workspace or may not be read",
            short(raw)
        )
    } else {
        format!("error: `{}`: {e}", short(raw))
    }
}

/// At most 200 characters of a name from the model, for answers and the log.
fn short(text: &str) -> String {
    let mut cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// An answer capped at [`ANSWER_LIMIT`] bytes (on a character boundary).
fn cap(mut text: String) -> String {
    if text.len() > ANSWER_LIMIT {
        let mut end = ANSWER_LIMIT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n(cut)");
    }
    text
}

#[cfg(test)]
#[path = "tools_tests.rs"]
mod tests;
