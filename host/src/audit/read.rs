//! Reading the audit log, through the one reader (`config/file.rs`): forward, one line at
//! a time and at most [`READ_CAP`] bytes ([`AuditLog::read_each`]), or backward from the
//! end for the last entries ([`AuditLog::read_tail`]), which reads only the blocks those
//! entries (and the lines after them that were passed over) are in, so a log of any size
//! answers `hookhost audit --tail 20` at once and in bounded memory.

use std::fs::File;
use std::io::BufRead;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;

use serde_json::Value;

use super::{AuditLog, READ_CAP};
use crate::config::file::{FileError, Open, Owners, Rule, open_checked};

/// The longest line [`AuditLog::read_tail`] holds: 8 MiB (a line of 2,000 hooks with the
/// messages budget spent is well under it). A longer line is passed over with a problem
/// naming it, never held.
pub const LINE_CAP: usize = 8 << 20;

/// How far back [`AuditLog::read_tail`] looks for the start of one line over
/// [`LINE_CAP`] before it stops reading further back: a line of gigabytes without a
/// newline (a corrupt or hostile log) costs a bounded read, not a scan of it all.
pub const OVERLONG_SCAN: usize = 16 * LINE_CAP;

/// Bytes read per step backward (more when a long line needs them).
const BLOCK: usize = 64 << 10;

/// Problem lines [`AuditLog::read_tail`] names one by one; the rest are counted.
pub const MAX_PROBLEMS: usize = 100;

/// What [`AuditLog::read_tail`] found.
#[derive(Debug, Default)]
pub struct Tail {
    /// The entries kept, oldest first.
    pub entries: Vec<Value>,
    /// Lines that could not be read as an entry (not JSON, over [`LINE_CAP`]), each
    /// named by its place from the end: the `MAX_PROBLEMS` nearest the end, then one
    /// line counting the others.
    pub problems: Vec<String>,
    /// Bytes read from the file.
    pub bytes_read: u64,
}

impl AuditLog {
    /// Opens the log for reading: a regular file (a FIFO swapped in is refused, not waited
    /// on), this user's and writable by no one else (as the writer requires), with sizes
    /// up to `cap`. `None` when there is no log yet.
    fn open_for_reading(&self, cap: u64) -> Result<Option<File>, String> {
        let how = Open::read(cap).rule(Rule::Believed(Owners::Me));
        match open_checked(&self.path, &how) {
            Ok((file, _)) => Ok(Some(file)),
            Err(FileError::NotFound) => Ok(None),
            Err(e) => Err(format!("cannot read `{}`: {e}", self.path.display())),
        }
    }

    /// Reads every entry, oldest first. Lines that are not JSON are returned as errors
    /// naming their line number.
    ///
    /// # Errors
    ///
    /// The file cannot be read.
    pub fn read(&self) -> Result<Vec<Result<Value, String>>, String> {
        let mut entries = Vec::new();
        self.read_each(|entry| {
            entries.push(entry);
            ControlFlow::Continue(())
        })?;
        Ok(entries)
    }

    /// Hands each entry to `each`, oldest first, one line in memory at a time, until it
    /// says [`ControlFlow::Break`]. A log over [`READ_CAP`] is refused (rotate it by
    /// moving it away; `read_tail` reads any size). Lines that are not JSON are handed
    /// over as errors naming their line number.
    ///
    /// # Errors
    ///
    /// The file cannot be read.
    pub fn read_each(
        &self,
        mut each: impl FnMut(Result<Value, String>) -> ControlFlow<()>,
    ) -> Result<(), String> {
        use std::io::Read;
        let Some(file) = self.open_for_reading(READ_CAP)? else {
            return Ok(());
        };
        let mut limited = std::io::BufReader::new(file.take(READ_CAP));
        let failed = |e: std::io::Error| format!("cannot read `{}`: {e}", self.path.display());
        let mut line = Vec::new();
        for n in 1.. {
            line.clear();
            // At most a line's cap held: the rest of a longer line is passed over unheld.
            let read = (&mut limited)
                .take(LINE_CAP as u64 + 1)
                .read_until(b'\n', &mut line)
                .map_err(failed)?;
            if read == 0 {
                break;
            }
            let entry = if line.len() > LINE_CAP && line.last() != Some(&b'\n') {
                let mut len = line.len();
                len += skip_line(&mut limited).map_err(failed)?;
                Err(format!(
                    "line {n}: {len} bytes or more, over the cap of {LINE_CAP}; passed over"
                ))
            } else if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            } else {
                serde_json::from_slice(&line).map_err(|e| format!("line {n}: not JSON ({e})"))
            };
            if each(entry).is_break() {
                break;
            }
        }
        Ok(())
    }

    /// The last `n` entries that `keep` accepts, oldest first, read backward from the
    /// end of the log in blocks: what is read is the lines from the first entry kept to
    /// the end, whatever the size of the log. Each line is held to [`LINE_CAP`]. A last
    /// line without its newline (a writer killed mid-line, or one writing now) is read
    /// like the others: it is an entry if it parses, else a problem.
    ///
    /// # Errors
    ///
    /// The file cannot be read.
    pub fn read_tail(
        &self,
        n: usize,
        mut keep: impl FnMut(&Value) -> bool,
    ) -> Result<Tail, String> {
        let mut tail = Tail::default();
        if n == 0 {
            return Ok(tail);
        }
        let Some(file) = self.open_for_reading(u64::MAX)? else {
            return Ok(tail);
        };
        let size = file
            .metadata()
            .map_err(|e| format!("cannot read `{}`: {e}", self.path.display()))?
            .len();
        let mut lines = Backward::new(&file, size);
        let mut from_end = 0usize;
        let mut unnamed = 0usize;
        let mut problem = |tail: &mut Tail, text: String| {
            if tail.problems.len() < MAX_PROBLEMS {
                tail.problems.push(text);
            } else {
                unnamed += 1;
            }
        };
        while tail.entries.len() < n {
            let line = match lines.next_line() {
                Ok(Some(line)) => line,
                Ok(None) => break,
                Err(e) => return Err(format!("cannot read `{}`: {e}", self.path.display())),
            };
            let text = match line {
                Line::Whole(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
                Line::Whole(bytes) => bytes,
                Line::TooLong(len) => {
                    from_end += 1;
                    problem(
                        &mut tail,
                        format!(
                            "line {from_end} from the end: {len} bytes or more, over the cap \
                             of {LINE_CAP}; passed over"
                        ),
                    );
                    continue;
                }
                Line::Unending(len) => {
                    from_end += 1;
                    problem(
                        &mut tail,
                        format!(
                            "line {from_end} from the end: no start found in {len} bytes \
                             (over {OVERLONG_SCAN}); the lines before it were not read"
                        ),
                    );
                    break;
                }
            };
            from_end += 1;
            match serde_json::from_slice::<Value>(&text) {
                Ok(entry) if keep(&entry) => tail.entries.push(entry),
                Ok(_) => {}
                Err(e) => problem(
                    &mut tail,
                    format!("line {from_end} from the end: not JSON ({e})"),
                ),
            }
        }
        tail.bytes_read = lines.bytes_read;
        tail.entries.reverse();
        if unnamed > 0 {
            tail.problems.push(format!(
                "{unnamed} more lines further from the end could not be read"
            ));
        }
        tail.problems.reverse();
        Ok(tail)
    }
}

/// Reads past the rest of a line (through its newline) without holding it; the bytes
/// passed over.
fn skip_line(reader: &mut impl BufRead) -> std::io::Result<usize> {
    let mut skipped = 0;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(skipped);
        }
        match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => {
                reader.consume(at + 1);
                return Ok(skipped + at + 1);
            }
            None => {
                let len = buffer.len();
                reader.consume(len);
                skipped += len;
            }
        }
    }
}

/// A line read backward.
pub(super) enum Line {
    /// The line's bytes, without its newline.
    Whole(Vec<u8>),
    /// A line longer than [`LINE_CAP`], of at least this many bytes, not held.
    TooLong(usize),
    /// A line whose start was not found within [`OVERLONG_SCAN`] bytes: reading backward
    /// stops there.
    Unending(usize),
}

/// The lines of a file from the last to the first, read in blocks from the end.
pub(super) struct Backward<'a> {
    file: &'a File,
    /// Where the part not yet read ends.
    pos: u64,
    /// The bytes read that are not yet handed out as lines: the start of the file's part
    /// from `pos` up to the last line handed out (a line still missing its beginning).
    pending: Vec<u8>,
    /// The pending line is over [`LINE_CAP`]: its bytes are dropped, its length counted.
    overlong: Option<usize>,
    pub(super) bytes_read: u64,
}

impl<'a> Backward<'a> {
    pub(super) fn new(file: &'a File, size: u64) -> Backward<'a> {
        Backward {
            file,
            pos: size,
            pending: Vec::new(),
            overlong: None,
            bytes_read: 0,
        }
    }

    /// The line before those handed out so far; `None` at the start of the file.
    pub(super) fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            // A newline in what is pending ends the line after it.
            if let Some(at) = self.pending.iter().rposition(|&b| b == b'\n') {
                let line = self.pending.split_off(at + 1);
                self.pending.pop(); // the newline
                // (After the file's last newline comes an empty line, which readers
                // pass over like any blank one.)
                return Ok(Some(self.finish(line)));
            }
            if self.pos == 0 {
                if self.pending.is_empty() && self.overlong.is_none() {
                    return Ok(None);
                }
                let line = std::mem::take(&mut self.pending);
                return Ok(Some(self.finish(line)));
            }
            // Read the block before: as large as what is pending, so that a long line
            // costs a number of copies logarithmic in its length.
            let want = BLOCK.max(self.pending.len()).min(self.pos as usize);
            let start = self.pos - want as u64;
            let mut block = vec![0u8; want];
            self.file.read_exact_at(&mut block, start)?;
            self.bytes_read += want as u64;
            self.pos = start;
            block.extend_from_slice(&self.pending);
            self.pending = block;
            // No newline in more than a line's cap: drop the bytes, keep their count.
            if self.pending.len() > LINE_CAP && !self.pending.contains(&b'\n') {
                let overlong = self.overlong.get_or_insert(0);
                *overlong += self.pending.len();
                self.pending.clear();
                if *overlong > OVERLONG_SCAN {
                    return Ok(Some(Line::Unending(*overlong)));
                }
            }
        }
    }

    /// A line found whole: held when within [`LINE_CAP`], else only counted (with the
    /// bytes of it already dropped).
    fn finish(&mut self, line: Vec<u8>) -> Line {
        match self.overlong.take() {
            Some(len) => Line::TooLong(len + line.len()),
            None if line.len() > LINE_CAP => Line::TooLong(line.len()),
            None => Line::Whole(line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn log_of(lines: &[String]) -> (tempfile::TempDir, AuditLog) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, lines.concat()).unwrap();
        (dir, AuditLog::new(path))
    }

    fn numbered(count: usize) -> Vec<String> {
        (0..count)
            .map(|n| {
                let event = if n % 2 == 0 { "Even" } else { "Odd" };
                format!("{}\n", json!({"n": n, "event": event}))
            })
            .collect()
    }

    fn ns(tail: &Tail) -> Vec<u64> {
        tail.entries
            .iter()
            .map(|e| e["n"].as_u64().unwrap())
            .collect()
    }

    /// The last entries come back oldest first, and what is read is about what they take,
    /// not the log: 3 entries of a 100,000-line log read one block.
    #[test]
    fn the_tail_reads_only_the_end_of_the_log() {
        let (_dir, log) = log_of(&numbered(100_000));
        let size = std::fs::metadata(log.path()).unwrap().len();
        let tail = log.read_tail(3, |_| true).unwrap();
        assert_eq!(ns(&tail), [99_997, 99_998, 99_999]);
        assert!(tail.problems.is_empty(), "{:?}", tail.problems);
        assert!(
            tail.bytes_read <= BLOCK as u64 && tail.bytes_read * 20 < size,
            "read {} of {size} bytes",
            tail.bytes_read
        );
        // Asking for more than there is gives all of it, read once.
        let all = log.read_tail(1_000_000, |_| true).unwrap();
        assert_eq!(ns(&all), (0..100_000).collect::<Vec<_>>());
        assert_eq!(all.bytes_read, size);
    }

    /// The filter picks the entries counted: the last 2 `Even` ones.
    #[test]
    fn the_tail_counts_only_the_entries_kept() {
        let (_dir, log) = log_of(&numbered(10));
        let tail = log.read_tail(2, |e| e["event"] == "Even").unwrap();
        assert_eq!(ns(&tail), [6, 8]);
    }

    /// A torn last line (no newline, not JSON), a line that is not JSON, blank lines and a
    /// line over the cap are problems or passed over; the entries around them are read.
    #[test]
    fn bad_lines_are_named_and_passed_over() {
        let mut lines = numbered(3);
        lines.insert(1, "not json\n".into());
        lines.insert(2, "\n\n".into());
        lines.insert(3, format!("{}\n", "x".repeat(LINE_CAP + 10)));
        lines.push("{\"n\": 3, \"torn".into());
        let (_dir, log) = log_of(&lines);
        let tail = log.read_tail(10, |_| true).unwrap();
        assert_eq!(ns(&tail), [0, 1, 2]);
        assert_eq!(tail.problems.len(), 3, "{:?}", tail.problems);
        assert!(tail.problems[0].contains("not JSON"), "{:?}", tail.problems);
        assert!(
            tail.problems[1].contains("over the cap"),
            "{:?}",
            tail.problems
        );
        assert!(tail.problems[2].starts_with("line 1 from the end: not JSON"));
        // The forward reader agrees on the entries.
        let forward: Vec<u64> = log
            .read()
            .unwrap()
            .into_iter()
            .filter_map(|e| e.ok()?["n"].as_u64())
            .collect();
        assert_eq!(forward, [0, 1, 2]);
        let over: Vec<String> = log
            .read()
            .unwrap()
            .into_iter()
            .filter_map(Result::err)
            .collect();
        assert!(
            over.iter()
                .any(|e| e.contains("bytes or more, over the cap")),
            "the forward reader names the long line by its number: {over:?}"
        );
    }

    /// A line with no start within [`OVERLONG_SCAN`] stops the backward read there (the
    /// entries after it are still read); a line with no end stops the forward reader from
    /// holding more than the cap of it.
    #[test]
    fn a_line_without_end_or_start_is_read_in_bounded_memory_and_time() {
        let huge = "x".repeat(OVERLONG_SCAN + 2 * LINE_CAP);
        let lines = [
            "{\"n\": 0}\n".to_string(),
            format!("{huge}\n"),
            "{\"n\": 1}\n".to_string(),
        ];
        let (_dir, log) = log_of(&lines);
        let tail = log.read_tail(10, |_| true).unwrap();
        assert_eq!(ns(&tail), [1]);
        assert!(
            tail.problems.iter().any(|p| p.contains("were not read")),
            "{:?}",
            tail.problems
        );
        let read = tail.bytes_read as usize;
        assert!(read <= OVERLONG_SCAN + 4 * LINE_CAP, "read {read} bytes");
        // Forward: both entries, the long line passed over without being held.
        let forward = log.read().unwrap();
        assert_eq!(
            forward.len(),
            3,
            "{:?}",
            forward
                .iter()
                .filter_map(|e| e.as_ref().err())
                .collect::<Vec<_>>()
        );
        assert!(
            forward[1]
                .as_ref()
                .is_err_and(|e| e.contains("over the cap"))
        );
        assert_eq!(forward[2].as_ref().unwrap()["n"], 1);
    }

    /// The problems of a tail are named up to [`MAX_PROBLEMS`], then counted in one line.
    #[test]
    fn problems_are_named_up_to_the_cap_then_counted() {
        let mut lines = numbered(1);
        lines.extend((0..MAX_PROBLEMS + 50).map(|i| format!("bad {i}\n")));
        let (_dir, log) = log_of(&lines);
        let tail = log.read_tail(1, |_| true).unwrap();
        assert_eq!(ns(&tail), [0]);
        assert_eq!(
            tail.problems.len(),
            MAX_PROBLEMS + 1,
            "{:?}",
            tail.problems.first()
        );
        assert!(
            tail.problems[0].starts_with("50 more lines"),
            "{:?}",
            tail.problems[0]
        );
    }

    /// No log yet: nothing, not an error.
    #[test]
    fn a_missing_log_has_no_tail() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::new(dir.path().join("none.jsonl"));
        assert!(log.read_tail(5, |_| true).unwrap().entries.is_empty());
    }
}
