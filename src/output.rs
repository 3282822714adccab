//! Writing results to standard output. A reader that closes the pipe early (`dovetail plan |
//! head`) ends the output quietly, as Unix tools do; any other write error (a full disk) is an
//! error naming what was being written, never a panic.

use anyhow::{Context, Result};
use std::io::{ErrorKind, Write};

/// Writes `text` to standard output and flushes it.
pub fn emit(what: &str, text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other.with_context(|| format!("writing the {what} to standard output")),
    }
}
