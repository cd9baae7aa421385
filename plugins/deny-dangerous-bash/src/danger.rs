//! The checks of `deny-dangerous-bash`, apart from the plugin interface: the Extism peer of
//! the `wasm` benchmark (`benches/extism-peer/plugin`) compiles this same file, so that both
//! sandboxes run the same logic.

/// Whether `command` contains any word the checks below look for: one pass over the
/// bytes, so that ordinary commands (nearly all of them) cost a few thousand fuel.
fn may_be_dangerous(command: &str) -> bool {
    const KEYS: [&[u8]; 7] = [b"rm", b"curl", b"wget", b"push", b"mkfs", b"dd", b":("];
    let bytes = command.as_bytes();
    bytes.iter().enumerate().any(|(i, b)| {
        matches!(b, b'r' | b'c' | b'w' | b'p' | b'm' | b'd' | b':')
            && KEYS.iter().any(|k| bytes[i..].starts_with(k))
    })
}

/// Why `command` is dangerous, if it is.
pub fn danger(command: &str) -> Option<&'static str> {
    if !may_be_dangerous(command) {
        return None;
    }
    let normalized: String = command.split_whitespace().collect::<Vec<_>>().join(" ");
    let c = normalized.as_str();
    for segment in c.split(['&', ';', '|']).map(str::trim) {
        let words: Vec<&str> = segment
            .split(' ')
            .skip_while(|w| matches!(*w, "sudo" | "doas" | "nohup" | "command" | "exec"))
            .collect();
        if words
            .first()
            .is_some_and(|w| *w == "rm" || w.ends_with("/rm"))
        {
            let flags: String = words
                .iter()
                .filter(|w| w.starts_with('-'))
                .map(|w| w.trim_start_matches('-'))
                .collect();
            let recursive =
                flags.contains('r') || flags.contains('R') || words.contains(&"--recursive");
            let targets = words.iter().skip(1).filter(|w| !w.starts_with('-'));
            if recursive
                && targets.into_iter().any(|t| {
                    matches!(
                        *t,
                        "/" | "/*" | "~" | "~/" | "$HOME" | "${HOME}" | "/." | "--no-preserve-root"
                    )
                })
            {
                return Some("recursive delete of the filesystem root or home directory");
            }
            if words.contains(&"--no-preserve-root") {
                return Some("rm with --no-preserve-root");
            }
        }
        if words.first().is_some_and(|w| w.starts_with("mkfs"))
            || (words.first() == Some(&"dd") && segment.contains("of=/dev/"))
        {
            return Some("writes to a raw disk device");
        }
    }
    if (c.contains("curl ") || c.contains("wget ")) && pipes_into_shell(c) {
        return Some("pipes a download straight into a shell");
    }
    if c.contains("git push")
        && (c.contains("--force")
            || c.contains(" -f")
            || c.contains("+main")
            || c.contains("+master"))
        && (c.contains("main") || c.contains("master"))
    {
        return Some("force-push to main/master");
    }
    if c.contains(":(){ :|:& };:") || c.contains(":(){ :|: & };:") {
        return Some("fork bomb");
    }
    None
}

fn pipes_into_shell(c: &str) -> bool {
    c.split('|').skip(1).any(|part| {
        let first = part.trim().split(' ').find(|w| *w != "sudo").unwrap_or("");
        matches!(
            first.rsplit('/').next().unwrap_or(""),
            "sh" | "bash" | "zsh" | "dash" | "ksh" | "python" | "python3"
        )
    })
}
