//! What the CLI prints, and how it behaves when nobody reads it.
//!
//! `println!` panics when stdout is a closed pipe (`hookhost events | head`), which made
//! the process exit 101 with "Broken pipe" on stderr. Everything the commands print goes
//! through `out!` / `outln!` instead: a closed stdout ends
//! the command quietly with the conventional status of a process killed by SIGPIPE (141),
//! which is what `yes | head` gives. SIGPIPE itself stays ignored (Rust's default): a
//! command hook that exits without reading its stdin must not kill the host that writes
//! the input to it.
//!
//! stderr gets `errln!`, which drop what cannot be
//! written (a closed stderr has no reader to tell).

use std::io::Write;

/// The exit status of a command whose stdout was closed under it: 128 + SIGPIPE, as a
/// shell reports a process that SIGPIPE killed.
pub const CLOSED_STDOUT_EXIT: i32 = 128 + libc::SIGPIPE;

/// Writes `text` to stdout. A closed stdout ends the process with
/// [`CLOSED_STDOUT_EXIT`]; any other write error is ignored like a closed stderr would
/// be (there is nowhere left to report it).
pub fn write_stdout(text: &str) {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            std::process::exit(CLOSED_STDOUT_EXIT)
        }
        Err(_) => {}
    }
}

/// Writes `text` to stderr, ignoring failures.
pub fn write_stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `print!` that ends the process quietly when stdout is closed.
macro_rules! out {
    ($($arg:tt)*) => {
        crate::cli::output::write_stdout(&format!($($arg)*))
    };
}

/// `println!` that ends the process quietly when stdout is closed.
macro_rules! outln {
    () => {
        crate::cli::output::write_stdout("\n")
    };
    ($($arg:tt)*) => {
        crate::cli::output::write_stdout(&(format!($($arg)*) + "\n"))
    };
}

/// `eprintln!` that never panics.
macro_rules! errln {
    () => {
        crate::cli::output::write_stderr("\n")
    };
    ($($arg:tt)*) => {
        crate::cli::output::write_stderr(&(format!($($arg)*) + "\n"))
    };
}
