//! The files `hookhost audit verify` reads: which they are ([`rotated_set`]), and their
//! lines read forward as one stream, each held to [`LINE_CAP`] (a longer one is hashed
//! while read, never held).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::audit::LINE_CAP;
use crate::audit::chain::Hash;
use crate::config::file::{FileError, Open, open_checked};

/// A line read forward.
pub(super) enum Read {
    Whole(Vec<u8>),
    /// Over [`LINE_CAP`]: its length and hash, not its bytes.
    TooLong(u64, Hash),
}

/// The lines of the files, in order, each with its place.
pub(super) struct Stream<'a> {
    pub(super) files: &'a [PathBuf],
    index: usize,
    reader: Option<BufReader<File>>,
    line: u64,
}

/// One line of the stream: where, what, whether its newline was there, and whether it
/// is the last line of the last file.
pub(super) struct Got {
    pub(super) file: usize,
    pub(super) line: u64,
    pub(super) read: Read,
    pub(super) terminated: bool,
}

impl<'a> Stream<'a> {
    pub(super) fn new(files: &'a [PathBuf]) -> Stream<'a> {
        Stream {
            files,
            index: 0,
            reader: None,
            line: 0,
        }
    }

    pub(super) fn shown(&self, index: usize) -> String {
        self.files[index].display().to_string()
    }

    pub(super) fn next(&mut self) -> Result<Option<Got>, String> {
        loop {
            if self.index >= self.files.len() {
                return Ok(None);
            }
            if self.reader.is_none() {
                let path = &self.files[self.index];
                let file = open_checked(path, &Open::read(u64::MAX))
                    .map(|(file, _)| file)
                    .map_err(|e| match e {
                        FileError::NotFound => format!("`{}`: no such file", path.display()),
                        e => format!("cannot read `{}`: {e}", path.display()),
                    })?;
                self.reader = Some(BufReader::with_capacity(64 << 10, file));
                self.line = 0;
            }
            let reader = self.reader.as_mut().expect("opened above");
            match read_line(reader)
                .map_err(|e| format!("cannot read `{}`: {e}", self.shown(self.index)))?
            {
                Some((read, terminated)) => {
                    self.line += 1;
                    return Ok(Some(Got {
                        file: self.index,
                        line: self.line,
                        read,
                        terminated,
                    }));
                }
                None => {
                    self.reader = None;
                    self.index += 1;
                }
            }
        }
    }
}

/// The next line of `reader`, held to [`LINE_CAP`], and whether it ended with a newline;
/// `None` at the end.
fn read_line(reader: &mut BufReader<File>) -> std::io::Result<Option<(Read, bool)>> {
    let mut line = Vec::new();
    let mut over: Option<(u64, Sha256)> = None;
    let mut started = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            if !started {
                return Ok(None);
            }
            return Ok(Some((finish(line, over), false)));
        }
        started = true;
        let (part, found) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (&buf[..at], true),
            None => (buf, false),
        };
        match &mut over {
            Some((len, hasher)) => {
                *len += part.len() as u64;
                hasher.update(part);
            }
            None => {
                line.extend_from_slice(part);
                if line.len() > LINE_CAP {
                    let mut hasher = Sha256::new();
                    hasher.update(&line);
                    over = Some((line.len() as u64, hasher));
                    line = Vec::new();
                }
            }
        }
        let used = part.len() + usize::from(found);
        reader.consume(used);
        if found {
            return Ok(Some((finish(line, over), true)));
        }
    }
}

fn finish(line: Vec<u8>, over: Option<(u64, Sha256)>) -> Read {
    match over {
        Some((len, hasher)) => Read::TooLong(len, hasher.finalize().into()),
        None => Read::Whole(line),
    }
}

/// The files of the log at `log`, oldest first: its rotated siblings (`NAME.N`, the
/// highest N first, then `NAME-SUFFIX` in the order of their suffixes, as logrotate names
/// them; compressed ones are left out and named in the second list), then `log`.
pub fn rotated_set(log: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let Some(name) = log.file_name().and_then(|n| n.to_str()) else {
        return (vec![log.to_path_buf()], Vec::new());
    };
    let dir = log.parent().filter(|d| !d.as_os_str().is_empty());
    let entries = std::fs::read_dir(dir.unwrap_or(Path::new(".")));
    let mut numbered = Vec::new();
    let mut dated = Vec::new();
    let mut compressed = Vec::new();
    for entry in entries.into_iter().flatten().flatten() {
        let file_name = entry.file_name();
        let Some(other) = file_name.to_str() else {
            continue;
        };
        let Some(rest) = other.strip_prefix(name) else {
            continue;
        };
        let path = log.with_file_name(other);
        if [".gz", ".xz", ".bz2", ".zst"]
            .iter()
            .any(|z| rest.ends_with(z))
        {
            compressed.push(path);
        } else if let Some(n) = rest.strip_prefix('.').and_then(|n| n.parse::<u64>().ok()) {
            numbered.push((n, path));
        } else if rest.starts_with('-') {
            dated.push((rest.to_string(), path));
        }
    }
    numbered.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
    dated.sort();
    let mut files: Vec<PathBuf> = numbered.into_iter().map(|(_, p)| p).collect();
    files.extend(dated.into_iter().map(|(_, p)| p));
    if log.exists() || files.is_empty() {
        files.push(log.to_path_buf());
    }
    compressed.sort();
    (files, compressed)
}
