//! The Markdown transcript of a branch: a title block, then one section per entry on the path
//! root → entry.
//!
//! Invariants: verbatim text (tool output, arguments, commands) goes in code fences longer than
//! any backtick run inside it, so it can never close its fence; prose (message text) is written
//! as the author wrote it (it is usually Markdown already) — Markdown viewers sanitise HTML,
//! and the HTML export is the rendering meant for untrusted sessions; headings and one-line
//! notes have line breaks folded to spaces so they stay one line.

use std::io::{self, Write};

use super::{Part, Rendered, Title};

/// One line: line breaks folded to spaces.
fn one_line(t: &str) -> String {
    t.split(['\n', '\r'])
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A fence longer than any backtick run in `text` (at least three).
fn fence(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

fn code(out: &mut dyn Write, lang: &str, text: &str) -> io::Result<()> {
    let f = fence(text);
    let nl = if text.ends_with('\n') { "" } else { "\n" };
    writeln!(out, "{f}{lang}\n{text}{nl}{f}\n")
}

/// Writes the title block.
pub fn begin(out: &mut dyn Write, t: &Title) -> io::Result<()> {
    let name = t.name.as_deref().unwrap_or(&t.session_id);
    writeln!(out, "# {}\n", one_line(name))?;
    writeln!(out, "- session: `{}`", one_line(&t.session_id))?;
    writeln!(out, "- folder: `{}`", one_line(&t.cwd))?;
    writeln!(out, "- created: {}", one_line(&t.created))?;
    if t.entries == 0 {
        writeln!(out, "- branch: (no entries)\n")?;
    } else {
        writeln!(
            out,
            "- branch: root → `{}` ({} entries)\n",
            one_line(&t.branch_id),
            t.entries
        )?;
    }
    Ok(())
}

/// Writes one entry.
pub fn entry(out: &mut dyn Write, r: &Rendered, label: Option<&str>) -> io::Result<()> {
    let label = label
        .map(|l| format!(" [{}]", one_line(l)))
        .unwrap_or_default();
    let meta = if r.meta.is_empty() {
        String::new()
    } else {
        format!(" — {}", one_line(&r.meta))
    };
    writeln!(
        out,
        "## {}{label}{meta} <sub>`{}`</sub>\n",
        one_line(&r.kind),
        one_line(&r.id)
    )?;
    for p in &r.parts {
        match p {
            Part::Text(t) => writeln!(out, "{}\n", t.trim_end())?,
            Part::Thinking(t) => {
                writeln!(out, "*Thinking:*\n")?;
                for l in t.trim_end().lines() {
                    writeln!(out, "> {l}")?;
                }
                writeln!(out)?;
            }
            Part::ToolCall { name, args } => {
                writeln!(out, "**Tool call `{}`**\n", one_line(name))?;
                code(out, "json", args)?;
            }
            Part::Code { caption, text } => {
                writeln!(out, "*{}:*\n", one_line(caption))?;
                code(out, "", text)?;
            }
            Part::Image(mime) => writeln!(out, "*[{} image, not included]*\n", one_line(mime))?,
            Part::Note(n) => writeln!(out, "*{}*\n", one_line(n))?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::fence;

    #[test]
    fn fences_outgrow_backtick_runs() {
        assert_eq!(fence("plain"), "```");
        assert_eq!(fence("a ```` b"), "`````");
    }
}
