//! The `--summarizer CMD` of `compact` and `navigate --summarize`: runs `sh -c CMD` with pi's
//! prompt on stdin and takes its stdout as the model's answer.
//!
//! Invariants: the prompt is written from a separate thread, so a command that prints before
//! it has read everything cannot deadlock; a command that fails (cannot start, exits non-zero,
//! prints nothing or no UTF-8) is an error naming the command, and the caller then writes
//! nothing; trailing newlines of the output are dropped, nothing else is changed.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use anyhow::{Context, anyhow, bail};

/// Runs the summariser `cmd` on `prompt` and returns its answer.
pub fn run_summarizer(cmd: &str, prompt: &str) -> anyhow::Result<String> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .env(
            "PISESS_SYSTEM_PROMPT",
            pisess_engine::agent::compaction::SUMMARIZATION_SYSTEM_PROMPT,
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start the summarizer `{cmd}`"))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| anyhow!("the summarizer `{cmd}` has no stdin"))?;
    let input = prompt.to_owned();
    // A command that exits without reading its input gives EPIPE here: not an error by itself.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let mut out = Vec::new();
    if let Some(mut stdout) = child.stdout.take() {
        stdout
            .read_to_end(&mut out)
            .with_context(|| format!("cannot read the output of the summarizer `{cmd}`"))?;
    }
    let status = child.wait()?;
    let _ = writer.join();
    if !status.success() {
        bail!("the summarizer `{cmd}` failed ({status})");
    }
    let text = String::from_utf8(out)
        .map_err(|_| anyhow!("the summarizer `{cmd}` printed bytes that are not UTF-8"))?;
    let text = text.trim_end_matches(['\n', '\r']);
    if text.trim().is_empty() {
        bail!("the summarizer `{cmd}` printed nothing");
    }
    Ok(text.to_owned())
}

/// Makes a summary with the summarizer command `cmd`, or (`None`) pisess's extractive default:
/// `make` is one of the engine's summary functions. A failing command is an error whose hint
/// says nothing was written.
pub fn summarize<T>(
    cmd: Option<&str>,
    make: impl FnOnce(pisess_engine::agent::summary::Summarizer<'_, anyhow::Error>) -> anyhow::Result<T>,
) -> Result<T, crate::command_error::CommandError> {
    match cmd {
        Some(cmd) => {
            let mut run = |prompt: &str| run_summarizer(cmd, prompt);
            make(Some(&mut run)).map_err(|e| {
                crate::command_error::CommandError::with_hint(
                    e,
                    "nothing was written; fix the summarizer and retry",
                )
            })
        }
        None => Ok(make(None)?),
    }
}
