//! The Markdown transcript of a branch: a title block, then one section per entry on the path
//! root → entry.
//!
//! Invariants: verbatim text (tool output, arguments, commands) goes in code fences longer than
//! any backtick run inside it, so it can never close its fence; prose (message text) is written
//! as the author wrote it (it is usually Markdown already) — Markdown viewers sanitise HTML,
//! and the HTML export is the rendering meant for untrusted sessions — except that a code fence
//! it leaves open (a line of bare ``` with no closing line) is closed at its end, so it cannot
//! swallow the entries after it (prose that also has lines starting with `<`, which may be
//! HTML blocks the fence scan does not follow, is put in a fence instead); thinking is quoted
//! line by line, split at every CommonMark line ending (a lone CR too), so no line of it
//! escapes the quote; headings and one-line notes have line breaks folded to spaces so they
//! stay one line.

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

/// The lines of `text` as CommonMark splits them: at `\n`, `\r\n` and a lone `\r`.
fn cm_lines(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n')
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
}

/// The fence that closes the code block `text` leaves open at its end, if it leaves one.
///
/// CommonMark's rule for the top level: a line indented at most three spaces whose first
/// characters are three or more backticks (with no backtick after them) or tildes opens a
/// block, which only a line of as many or more of the same character (indented at most three
/// spaces, then nothing but spaces and tabs) closes; the document's end closes it too, so an
/// open block swallows whatever is written after the text.
fn open_fence(text: &str) -> Option<String> {
    let mut open: Option<(char, usize)> = None;
    for line in cm_lines(text) {
        let rest = line.trim_start_matches(' ');
        if line.len() - rest.len() > 3 {
            continue;
        }
        let Some(c) = rest.chars().next().filter(|c| matches!(c, '`' | '~')) else {
            continue;
        };
        let after = rest.trim_start_matches(c);
        let run = rest.len() - after.len();
        if run < 3 {
            continue;
        }
        match open {
            None if c == '`' && after.contains('`') => {}
            None => open = Some((c, run)),
            Some((oc, olen)) => {
                if c == oc && run >= olen && after.trim_matches([' ', '\t']).is_empty() {
                    open = None;
                }
            }
        }
    }
    open.map(|(c, n)| c.to_string().repeat(n))
}

/// Prose as written, a code block it leaves open closed at its end (see the module header).
fn prose(out: &mut dyn Write, text: &str) -> io::Result<()> {
    let t = text.trim_end();
    match open_fence(t) {
        None => writeln!(out, "{t}\n"),
        Some(_) if cm_lines(t).any(|l| l.trim_start_matches(' ').starts_with('<')) => {
            code(out, "", t)
        }
        Some(f) => writeln!(out, "{t}\n{f}\n"),
    }
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
            Part::Text(t) => prose(out, t)?,
            Part::Thinking(t) => {
                writeln!(out, "*Thinking:*\n")?;
                for l in cm_lines(t.trim_end()) {
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
    use super::{fence, open_fence};

    #[test]
    fn fences_outgrow_backtick_runs() {
        assert_eq!(fence("plain"), "```");
        assert_eq!(fence("a ```` b"), "`````");
    }

    #[test]
    fn open_fences_are_found_as_commonmark_finds_them() {
        let open = |t: &str| open_fence(t);
        assert_eq!(open("plain\n## x"), None);
        assert_eq!(open("```rust\nfn x() {}\n```"), None);
        assert_eq!(open("look:\n```\ncode"), Some("```".into()));
        assert_eq!(open("````\n```\n"), Some("````".into()));
        assert_eq!(open("````\n`````  \t"), None);
        assert_eq!(open("~~~\n```\n"), Some("~~~".into()));
        assert_eq!(open("   ```\nx\n   ```"), None);
        assert_eq!(open("   ```\nx"), Some("```".into()));
        // Indented four spaces: code, not a fence; backticks after the run: inline code.
        assert_eq!(open("    ```\nx"), None);
        assert_eq!(open("``` a`b\nx"), None);
        assert_eq!(open("``\nx"), None);
        // A closing line may not have text after the run; a lone CR ends a line.
        assert_eq!(open("```\nx\n``` y"), Some("```".into()));
        assert_eq!(open("a\r```\rb"), Some("```".into()));
        assert_eq!(open("a\r\n```\r\nb\r\n```\r\n"), None);
    }
}
