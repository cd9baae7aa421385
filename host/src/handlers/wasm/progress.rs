//! The progress line of a slow compile: shown on a terminal, with the plugin's name
//! escaped ([`crate::text::escape`]) before it reaches it.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Runs a compile; when it takes more than a second and stderr is a terminal, shows a
/// progress line until it is done.
pub(super) fn with_progress<T>(label: &str, work: impl FnOnce() -> T) -> T {
    if !std::io::stderr().is_terminal() {
        return work();
    }
    progress_while(
        label,
        Duration::from_secs(1),
        &Mutex::new(std::io::stderr()),
        work,
    )
}

/// Runs `work`; once it has taken `after`, writes a spinner line to `out` every 100 ms,
/// and a closing line when it is done. Nothing is written for quick work. The label (a
/// plugin's file name, which anyone who can name a file chooses) reaches the terminal
/// through [`crate::text::escape`]: no ESC, carriage return or other control in it acts.
fn progress_while<T, W: std::io::Write + Send>(
    label: &str,
    after: Duration,
    out: &Mutex<W>,
    work: impl FnOnce() -> T,
) -> T {
    let label = crate::text::escape(label);
    let done = AtomicBool::new(false);
    let shown = AtomicBool::new(false);
    let started = Instant::now();
    let write = |line: std::fmt::Arguments<'_>| {
        let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_fmt(line);
    };
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut frame = 0usize;
            while !done.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(100));
                if started.elapsed() >= after && !done.load(Ordering::Acquire) {
                    shown.store(true, Ordering::Release);
                    let spinner = ['|', '/', '-', '\\'][frame % 4];
                    frame += 1;
                    write(format_args!(
                        "\r{spinner} hookhost: compiling {label} ({:.1} s)",
                        started.elapsed().as_secs_f64()
                    ));
                }
            }
        });
        let result = work();
        done.store(true, Ordering::Release);
        result
    });
    if shown.load(Ordering::Acquire) {
        write(format_args!(
            "\r✓ hookhost: compiled {label} in {:.1} s (cached for next time)\n",
            started.elapsed().as_secs_f64()
        ));
    }
    result
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn slow_compiles_show_progress_and_quick_ones_stay_silent() {
        // What `progress_while` writes, for `work_ms` of work under an `after_ms` threshold.
        let shown = |label: &str, after_ms: u64, work_ms: u64| {
            let out = Mutex::new(Vec::new());
            let answer = progress_while(label, Duration::from_millis(after_ms), &out, || {
                std::thread::sleep(Duration::from_millis(work_ms));
                work_ms
            });
            assert_eq!(answer, work_ms, "the work's result is passed through");
            String::from_utf8(out.into_inner().unwrap()).unwrap()
        };
        // The ticker wakes twice before the work ends and shows nothing.
        assert_eq!(shown("quick.wasm", 500, 250), "");
        let text = shown("slow.wasm", 150, 600);
        assert!(text.contains("hookhost: compiling slow.wasm ("), "{text:?}");
        assert!(
            text.ends_with("s (cached for next time)\n")
                && text.contains("\r✓ hookhost: compiled slow.wasm in "),
            "{text:?}"
        );
    }

    #[test]
    fn the_progress_line_shows_a_hostile_plugin_name_escaped() {
        use std::os::unix::ffi::OsStrExt;
        // ESC (an OSC retitling the window, ended by BEL), a carriage return that would
        // overwrite the line, and bytes that are not UTF-8.
        let path = Path::new(std::ffi::OsStr::from_bytes(
            b"/plugins/evil\x1b]0;pwned\x07\r\x1b[2K\xff\xfename.wasm",
        ));
        let label = super::super::load::plugin_label(path);
        let out = Mutex::new(Vec::new());
        // The work lasts until a progress frame was written: no clock decides the test.
        progress_while(&label, Duration::ZERO, &out, || {
            while out.lock().unwrap().is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let text = String::from_utf8(out.into_inner().unwrap()).unwrap();
        assert!(
            text.contains(
                "hookhost: compiling evil\\x1b]0;pwned\\x07\\r\\x1b[2K\u{fffd}\u{fffd}name.wasm ("
            ),
            "{text:?}"
        );
        assert!(
            text.contains("compiled evil\\x1b]0;pwned"),
            "the closing line too: {text:?}"
        );
        // The only controls are the line's own: the `\r` that starts each frame and the
        // newline that ends the last.
        let frames: Vec<&str> = text.split('\r').collect();
        assert_eq!(frames[0], "", "{text:?}");
        for frame in &frames[1..] {
            assert!(
                !frame.trim_end_matches('\n').chars().any(char::is_control),
                "{frame:?}"
            );
        }
        assert!(
            text.ends_with('\n') && text.matches('\n').count() == 1,
            "{text:?}"
        );
    }
}
