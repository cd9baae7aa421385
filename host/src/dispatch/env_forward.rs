//! Hands what an event's command hooks wrote to hookhost's `CLAUDE_ENV_FILE` on to the
//! agent's own (Claude Code's `CLAUDE_ENV_FILE`, which it sources before each later Bash
//! command). Command hooks get hookhost's private per-session file, never the agent's
//! (several sources' hooks share one event, and the agent's path is per hook); after the
//! hooks of an event that has the file ([`crate::event::EventSpec::env_file`]) ran, the
//! bytes they appended are appended to the agent's file, whole lines only and at most
//! [`MAX_FORWARD_BYTES`] per event.
//!
//! Both files pass the one reader's open ([`crate::config::file::open_checked`]): no
//! symlink is followed at either path, each must be a regular file of this user's that no
//! one else can write, and each is capped before a byte is held.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::config::file::{FileError, Open, Owners, Rule, open_checked};
use crate::session::PRIVATE_FILE_CAP;
use crate::text::escape;

/// The most bytes one event's hooks hand on to the agent's file: whole lines up to this,
/// the rest is left out with a notice.
pub const MAX_FORWARD_BYTES: usize = 64 << 10;
/// The largest agent env file appended to: a file past it is left alone, with a notice.
pub const MAX_AGENT_FILE_BYTES: u64 = 4 << 20;

/// The size of hookhost's env file before the hooks run (0 when it is absent or cannot
/// be read: then everything found after is new).
pub(super) fn mark(own: &Path) -> u64 {
    open_checked(own, &Open::read(PRIVATE_FILE_CAP).no_follow())
        .map(|(_, meta)| meta.len())
        .unwrap_or(0)
}

/// Appends to `agent` what was appended to `own` past `from` (the whole file when it
/// shrank: a hook that wrote it with `>`). Returns the notices: a refused file, lines
/// left out for the cap.
pub(super) fn forward(own: &Path, from: u64, agent: &Path) -> Vec<String> {
    let shown = |path: &Path| escape(&path.display().to_string()).into_owned();
    let new = match read_new(own, from) {
        Ok(new) => new,
        Err(e) => {
            return vec![format!(
                "CLAUDE_ENV_FILE: what the hooks wrote to `{}` cannot be read ({e}); \
                 nothing reaches the agent's Bash commands",
                shown(own)
            )];
        }
    };
    if new.is_empty() {
        return Vec::new();
    }
    let (lines, left_out) = whole_lines(&new);
    let mut notices = Vec::new();
    if left_out > 0 {
        notices.push(format!(
            "CLAUDE_ENV_FILE: {left_out} bytes the hooks wrote were left out (the agent gets \
             whole lines, at most {MAX_FORWARD_BYTES} bytes per event)"
        ));
    }
    if lines.is_empty() {
        return notices;
    }
    if let Err(e) = append(agent, lines) {
        notices.push(format!(
            "CLAUDE_ENV_FILE: the variables the hooks exported do not reach the agent: \
             `{}` is refused ({e})",
            shown(agent)
        ));
    }
    notices
}

/// What `own` holds past `from`, at most one byte over [`MAX_FORWARD_BYTES`].
fn read_new(own: &Path, from: u64) -> Result<Vec<u8>, FileError> {
    let (mut file, meta) = open_checked(own, &Open::read(PRIVATE_FILE_CAP).no_follow())?;
    let from = if meta.len() < from { 0 } else { from };
    file.seek(SeekFrom::Start(from))?;
    let mut new = Vec::new();
    file.take(MAX_FORWARD_BYTES as u64 + 1)
        .read_to_end(&mut new)?;
    Ok(new)
}

/// The whole lines of `new` within [`MAX_FORWARD_BYTES`] (a last line without its newline
/// counts as whole when nothing follows it), and how many bytes are left out.
fn whole_lines(new: &[u8]) -> (&[u8], usize) {
    if new.len() <= MAX_FORWARD_BYTES {
        return (new, 0);
    }
    let end = new[..MAX_FORWARD_BYTES]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |at| at + 1);
    (&new[..end], new.len() - end)
}

/// Appends `lines` to the agent's file (created 0600 when absent, in a directory that
/// exists), with a newline after a last line that has none.
fn append(agent: &Path, lines: &[u8]) -> Result<(), FileError> {
    let how = Open::read(MAX_AGENT_FILE_BYTES)
        .no_follow()
        .write(Some(0o600))
        .rule(Rule::Believed(Owners::Me));
    let (mut file, _) = open_checked(agent, &how)?;
    file.seek(SeekFrom::End(0))?;
    let mut bytes = lines.to_vec();
    if bytes.last() != Some(&b'\n') {
        bytes.push(b'\n');
    }
    file.write_all(&bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_new_whole_lines_reach_the_agent() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("own");
        let agent = dir.path().join("agent.sh");
        std::fs::write(&own, "export OLD=1\n").unwrap();
        let from = mark(&own);
        std::fs::write(&own, "export OLD=1\nexport NEW=2\nexport LAST=3").unwrap();
        assert!(forward(&own, from, &agent).is_empty());
        assert_eq!(
            std::fs::read_to_string(&agent).unwrap(),
            "export NEW=2\nexport LAST=3\n"
        );
        // Appended to, never replaced.
        let from = mark(&own);
        std::fs::write(&own, "export A=1\n").unwrap(); // shrank: a hook used `>`
        assert!(forward(&own, from, &agent).is_empty());
        assert!(
            std::fs::read_to_string(&agent)
                .unwrap()
                .ends_with("export LAST=3\nexport A=1\n")
        );
    }

    #[test]
    fn the_cap_keeps_whole_lines_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("own");
        let agent = dir.path().join("agent.sh");
        let line = format!("export X={}\n", "y".repeat(1000));
        std::fs::write(&own, line.repeat(100)).unwrap();
        let notices = forward(&own, 0, &agent);
        assert!(notices[0].contains("left out"), "{notices:?}");
        let got = std::fs::read(&agent).unwrap();
        assert!(got.len() <= MAX_FORWARD_BYTES && got.ends_with(b"\n"));
        assert_eq!(got.len() % line.len(), 0);
    }

    #[test]
    fn a_symlinked_agent_file_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("own");
        let target = dir.path().join("bashrc");
        let agent = dir.path().join("agent.sh");
        std::fs::write(&own, "export X=1\n").unwrap();
        std::fs::write(&target, "").unwrap();
        std::os::unix::fs::symlink(&target, &agent).unwrap();
        let notices = forward(&own, 0, &agent);
        assert!(notices[0].contains("symlink"), "{notices:?}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
    }
}
