//! The Markdown transcript of a branch: a title block, then one section per entry on the path
//! root → entry.
//!
//! Invariants: verbatim text (tool output, arguments, commands) goes in code fences longer than
//! any backtick run inside it, so it can never close its fence; prose (message text) is written
//! as the author wrote it (it is usually Markdown already) — Markdown viewers sanitise HTML,
//! and the HTML export is the rendering meant for untrusted sessions — except that it cannot
//! open a block that outlives it (see `layout`): a code fence it leaves open is closed at its
//! end, a line that would open an HTML block only a later line ends (`<!--`, `<pre>`,
//! `<script>`, … with no end in the message) has its `<` escaped, and prose whose blocks a
//! parser may read otherwise than this scan does is put in a code block; thinking is quoted
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

/// One line of plain text for a heading or a note: line breaks folded, and `<` and `&`
/// written as entities, so that a label or a model name cannot be read as raw HTML.
fn inline_text(t: &str) -> String {
    one_line(t).replace('&', "&amp;").replace('<', "&lt;")
}

/// One line as an inline code span: delimited by a backtick run longer than any inside it
/// (padded with spaces when it starts or ends with a backtick), so it cannot close early.
fn inline_code(t: &str) -> String {
    let t = one_line(t);
    let mut longest = 0;
    let mut run = 0;
    for c in t.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let ticks = "`".repeat(longest + 1);
    let pad = if t.starts_with('`') || t.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{t}{pad}{ticks}")
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

/// The lines of `text` as CommonMark splits them (at `\n`, `\r\n` and a lone `\r`), each with
/// the byte offset where it starts.
fn cm_lines_at(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut bytes = text.bytes().enumerate().peekable();
    while let Some((i, b)) = bytes.next() {
        if b == b'\n' || b == b'\r' {
            lines.push((start, &text[start..i]));
            start = i + 1;
            if b == b'\r' && bytes.next_if(|&(_, n)| n == b'\n').is_some() {
                start += 1;
            }
        }
    }
    lines.push((start, &text[start..]));
    lines
}

/// The character and length of the fence `rest` (a line without its indentation) opens or
/// closes, and what follows the run.
fn fence_line(rest: &str) -> Option<(char, usize, &str)> {
    let c = rest.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let after = rest.trim_start_matches(c);
    let run = rest.len() - after.len();
    (run >= 3).then_some((c, run, after))
}

/// What a line may open that only a later line (not a blank one) ends: an HTML block of
/// CommonMark's types 1 to 5.
enum HtmlOpener {
    /// The line opens one in CommonMark and in `marked` alike: CommonMark ends it at the first
    /// line holding one of `ends`, `marked` at the first holding `own` after the opener's
    /// first `skip` bytes.
    Block {
        ends: &'static [&'static str],
        own: &'static str,
        skip: usize,
    },
    /// The line opens one in some parsers only, or a block of another type in others.
    Unsure,
}

/// The HTML block of type 1 to 5 that `rest` (a line without its indentation) opens, if it
/// may open one.
fn html_opener(rest: &str) -> Option<HtmlOpener> {
    const RAW: [&str; 4] = ["</script>", "</pre>", "</style>", "</textarea>"];
    let block = |ends, own, skip| Some(HtmlOpener::Block { ends, own, skip });
    let rest = rest.strip_prefix('<')?;
    if rest.starts_with("!--") {
        // `marked` also ends `<!-->` and `<!--->` at once, as a search from `<!` would.
        return block(&["-->"], "-->", 2);
    }
    if rest.starts_with("![CDATA[") {
        return block(&["]]>"], "]]>", 9);
    }
    if rest.starts_with('?') {
        return block(&["?>"], "?>", 2);
    }
    if let Some(after) = rest.strip_prefix('!') {
        return if after.starts_with(|c: char| c.is_ascii_alphabetic()) {
            block(&[">"], ">", 3)
        } else {
            Some(HtmlOpener::Unsure)
        };
    }
    for end in RAW {
        let name = &end[2..end.len() - 1];
        let Some(after) = rest
            .get(..name.len())
            .filter(|r| r.eq_ignore_ascii_case(name))
            .map(|_| &rest[name.len()..])
        else {
            continue;
        };
        return match after.chars().next() {
            None | Some(' ' | '\t' | '>') => block(&RAW, end, name.len() + 1),
            Some(c) if c.is_ascii_alphanumeric() || c == '-' => None,
            Some(_) => Some(HtmlOpener::Unsure),
        };
    }
    None
}

/// Whether `line` holds `what`, ASCII letters in any case.
fn holds(line: &str, what: &str) -> bool {
    line.as_bytes()
        .windows(what.len())
        .any(|w| w.eq_ignore_ascii_case(what.as_bytes()))
}

/// The first line at or after a given one that holds a string, found by one pass per string
/// (so that many unclosed openers cost no more than one).
struct NextHolding<'a> {
    lines: &'a [(usize, &'a str)],
    found: Vec<(&'static str, Vec<Option<usize>>)>,
}

impl NextHolding<'_> {
    fn at(&mut self, what: &'static str, from: usize) -> Option<usize> {
        let k = match self.found.iter().position(|(w, _)| *w == what) {
            Some(k) => k,
            None => {
                let mut next = vec![None; self.lines.len() + 1];
                for (j, (_, l)) in self.lines.iter().enumerate().rev() {
                    next[j] = if holds(l, what) { Some(j) } else { next[j + 1] };
                }
                self.found.push((what, next));
                self.found.len() - 1
            }
        };
        self.found[k].1.get(from).copied().flatten()
    }
}

/// How prose goes into the document.
#[derive(Debug, PartialEq, Eq)]
enum Layout {
    /// As written, with a backslash before the `<` at each of these byte offsets (so that
    /// line cannot open an HTML block), then this fence (closing a code block left open).
    Prose {
        escape: Vec<usize>,
        close: Option<String>,
    },
    /// In a code block: where a code block or an HTML block it opens ends depends on how
    /// the parser reads it.
    Code,
}

/// How `text` goes into the document so that it cannot open a block that outlives it.
///
/// After prose comes a blank line, then a line that is not indented: that ends any container
/// (list item, block quote) the prose opened, and the blocks inside it, and the HTML blocks of
/// types 6 and 7. What can outlive the prose is a block opened at the top level that only a
/// line of its own ends: a code fence (CommonMark: 0-3 spaces, then 3+ backticks with no
/// backtick after them or 3+ tildes; closed by as many or more of the same alone on a line)
/// or an HTML block of types 1 to 5 (`<pre`, `<script`, `<style`, `<textarea`, `<!--`, `<?`,
/// `<!X`, `<![CDATA[`, ended by a line holding its end string). This follows the top level
/// line by line: a fence left open is closed; a line outside code that opens an HTML block
/// of types 1 to 5 gets its `<` escaped, unless the block ends on that line or (when it
/// starts at the margin, so it is not inside a list item) CommonMark and `marked` both end it
/// on the same later line. Where the reading depends on what the scan does not follow (a
/// fence line in what may be an HTML block of type 6 or 7, which runs to a blank line; a
/// fence opened by an indented line, which may be inside a list item that a line less
/// indented ends) the text is put in a code block instead.
fn layout(text: &str) -> Layout {
    enum At {
        /// Outside code; `html`: maybe in an HTML block of type 6 or 7 (since a line that
        /// starts with `<`, and no blank line since); `para`: the line before was text (a
        /// paragraph or list line), so this one may continue it rather than start a block.
        Top { html: bool, para: bool },
        /// In a code block opened by a fence of this character and length, this indented.
        Fence(char, usize, usize),
        /// In an HTML block of types 1 to 5 that ends on this line.
        Html(usize),
    }
    let lines = cm_lines_at(text);
    let mut next = NextHolding {
        lines: &lines,
        found: Vec::new(),
    };
    let mut at = At::Top {
        html: false,
        para: false,
    };
    let mut escape = Vec::new();
    for (i, &(offset, line)) in lines.iter().enumerate() {
        let rest = line.trim_start_matches(' ');
        let indent = line.len() - rest.len();
        let blank = rest.trim_matches([' ', '\t']).is_empty();
        match at {
            At::Html(end) => {
                if i == end {
                    at = At::Top {
                        html: false,
                        para: false,
                    };
                }
            }
            At::Fence(c, len, opened) => {
                if !blank && indent < opened {
                    return Layout::Code;
                }
                let closes = fence_line(rest).is_some_and(|(fc, run, after)| {
                    fc == c && run >= len && after.trim_matches([' ', '\t']).is_empty()
                });
                if indent <= 3 && closes {
                    at = At::Top {
                        html: false,
                        para: false,
                    };
                }
            }
            At::Top { html, para } => {
                if blank {
                    at = At::Top {
                        html: false,
                        para: false,
                    };
                    continue;
                }
                at = At::Top { html, para: true };
                if indent > 3 {
                    continue;
                }
                if let Some((c, run, after)) = fence_line(rest) {
                    if c == '`' && after.contains('`') {
                        continue;
                    }
                    if html {
                        return Layout::Code;
                    }
                    at = At::Fence(c, run, indent);
                    continue;
                }
                if !rest.starts_with('<') {
                    continue;
                }
                match html_opener(rest) {
                    // A tag left open at the end of its line (`<p`, `</div`): `marked` reads
                    // the line break, and the blank line after it, into the tag, so the block
                    // runs on past the prose.
                    None if !rest.contains('>') => escape.push(offset + indent),
                    None => {
                        at = At::Top {
                            html: true,
                            para: true,
                        }
                    }
                    Some(HtmlOpener::Unsure) => escape.push(offset + indent),
                    Some(HtmlOpener::Block { ends, own, skip }) => {
                        let here = |from: usize, what: &[&str]| {
                            let l = rest.get(from..).unwrap_or("");
                            what.iter().any(|w| holds(l, w)).then_some(i)
                        };
                        let cm = here(0, ends)
                            .or_else(|| ends.iter().filter_map(|w| next.at(w, i + 1)).min());
                        let marked = here(skip, &[own]).or_else(|| next.at(own, i + 1));
                        // After a text line `marked` may read the opener as more of the
                        // paragraph, and the end line as an opener of its own: escaped.
                        match cm.filter(|&e| Some(e) == marked) {
                            // A block of its own line: after it the next line starts
                            // afresh, as it would have this one.
                            Some(e) if e == i => at = At::Top { html, para },
                            Some(e) if indent == 0 && !html && !para => at = At::Html(e),
                            _ => escape.push(offset + indent),
                        }
                    }
                }
            }
        }
    }
    match at {
        At::Fence(_, _, opened) if opened > 0 => Layout::Code,
        At::Fence(c, n, _) => Layout::Prose {
            escape,
            close: Some(c.to_string().repeat(n)),
        },
        _ => Layout::Prose {
            escape,
            close: None,
        },
    }
}

/// Prose as written, made unable to open a block that outlives it (see [`layout`]).
fn prose(out: &mut dyn Write, text: &str) -> io::Result<()> {
    let t = text.trim_end();
    let (escape, close) = match layout(t) {
        Layout::Code => return code(out, "", t),
        Layout::Prose { escape, close } => (escape, close),
    };
    let mut from = 0;
    for at in escape {
        out.write_all(&t.as_bytes()[from..at])?;
        out.write_all(b"\\")?;
        from = at;
    }
    out.write_all(&t.as_bytes()[from..])?;
    match close {
        Some(f) => writeln!(out, "\n{f}\n"),
        None => writeln!(out, "\n"),
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
    writeln!(out, "# {}\n", inline_text(name))?;
    writeln!(out, "- session: {}", inline_code(&t.session_id))?;
    writeln!(out, "- folder: {}", inline_code(&t.cwd))?;
    writeln!(out, "- created: {}", inline_text(&t.created))?;
    if t.entries == 0 {
        writeln!(out, "- branch: (no entries)\n")?;
    } else {
        writeln!(
            out,
            "- branch: root → {} ({} {})\n",
            inline_code(&t.branch_id),
            t.entries,
            if t.entries == 1 { "entry" } else { "entries" }
        )?;
    }
    Ok(())
}

/// Writes one entry.
pub fn entry(out: &mut dyn Write, r: &Rendered, label: Option<&str>) -> io::Result<()> {
    let label = label
        .map(|l| format!(" [{}]", inline_text(l)))
        .unwrap_or_default();
    let meta = if r.meta.is_empty() {
        String::new()
    } else {
        format!(" — {}", inline_text(&r.meta))
    };
    writeln!(
        out,
        "## {}{label}{meta} <sub>{}</sub>\n",
        inline_text(&r.kind),
        // An entry without a string id (pi's fallback leaf) has none to show.
        if r.id.is_empty() {
            "(no id)".to_owned()
        } else {
            inline_code(&r.id)
        }
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
                writeln!(out, "**Tool call {}**\n", inline_code(name))?;
                code(out, "json", args)?;
            }
            Part::Code { caption, text } => {
                writeln!(out, "*{}:*\n", inline_text(caption))?;
                code(out, "", text)?;
            }
            Part::Image(mime) => {
                writeln!(out, "*[{} image, not included]*\n", inline_text(mime))?;
            }
            Part::Note(n) => writeln!(out, "*{}*\n", inline_text(n))?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Layout, fence, inline_code, inline_text, layout};

    #[test]
    fn heading_text_and_code_spans_cannot_hold_html_or_close_early() {
        assert_eq!(
            inline_text("lab\"><img src=x onerror=alert(1)> & co"),
            "lab\">&lt;img src=x onerror=alert(1)> &amp; co"
        );
        assert_eq!(inline_code("read"), "`read`");
        assert_eq!(inline_code("a`b"), "``a`b``");
        assert_eq!(inline_code("`x"), "`` `x ``");
    }

    #[test]
    fn fences_outgrow_backtick_runs() {
        assert_eq!(fence("plain"), "```");
        assert_eq!(fence("a ```` b"), "`````");
    }

    fn close(c: &str) -> Layout {
        Layout::Prose {
            escape: vec![],
            close: Some(c.into()),
        }
    }

    fn escape(at: &[usize]) -> Layout {
        Layout::Prose {
            escape: at.to_vec(),
            close: None,
        }
    }

    #[test]
    fn open_fences_are_found_as_commonmark_finds_them() {
        let none = escape(&[]);
        assert_eq!(layout("plain\n## x"), none);
        assert_eq!(layout("```rust\nfn x() {}\n```"), none);
        assert_eq!(layout("look:\n```\ncode"), close("```"));
        assert_eq!(layout("````\n```\n"), close("````"));
        assert_eq!(layout("````\n`````  \t"), none);
        assert_eq!(layout("~~~\n```\n"), close("~~~"));
        // Indented four spaces: code, not a fence; backticks after the run: inline code.
        assert_eq!(layout("    ```\nx"), none);
        assert_eq!(layout("``` a`b\nx"), none);
        assert_eq!(layout("``\nx"), none);
        // A closing line may not have text after the run; a lone CR ends a line.
        assert_eq!(layout("```\nx\n``` y"), close("```"));
        assert_eq!(layout("a\r```\rb"), close("```"));
        assert_eq!(layout("a\r\n```\r\nb\r\n```\r\n"), none);
    }

    #[test]
    fn fences_a_list_item_may_hold_are_not_closed_by_a_guess() {
        // An indented fence may be in a list item, which a less indented line ends: closing
        // it, or reading past such a line, would guess; a closed one at one indent is fine.
        let none = escape(&[]);
        assert_eq!(layout("1. step\n   ```sh\n   ls\n   ```\n2. next"), none);
        assert_eq!(layout("- item\n  ```\n  code"), Layout::Code);
        assert_eq!(layout("- item\n  ```\n  code\n```"), Layout::Code);
        assert_eq!(layout("- item\n  ```\n<!--\n  ```"), Layout::Code);
        // A fence line in what may be an HTML block (to the next blank line).
        assert_eq!(layout("<div>\n```\n</div>\nafter"), Layout::Code);
        assert_eq!(layout("<div>\n\n```\nx"), close("```"));
        assert_eq!(
            layout("<details>\n<summary>s</summary>\n\n```rust\nx\n```\n</details>"),
            none
        );
    }

    #[test]
    fn html_blocks_that_would_outlive_the_text_are_escaped() {
        let none = escape(&[]);
        // Types 1 to 5, unclosed, at the margin or indented up to three spaces.
        assert_eq!(layout("<!-- note"), escape(&[0]));
        assert_eq!(layout("a\n<pre>\nb"), escape(&[2]));
        assert_eq!(layout("  <SCRIPT>"), escape(&[2]));
        assert_eq!(layout("<style"), escape(&[0]));
        assert_eq!(layout("<textarea\tx"), escape(&[0]));
        assert_eq!(layout("<?php"), escape(&[0]));
        assert_eq!(layout("<!DOCTYPE html"), escape(&[0]));
        assert_eq!(layout("<![CDATA[x"), escape(&[0]));
        assert_eq!(layout("x\r<!--\r\ny"), escape(&[2]));
        // Parsers differ on these: always escaped.
        assert_eq!(layout("<![cdata[x]]>"), escape(&[0]));
        assert_eq!(layout("<pre/>"), escape(&[0]));
        assert_eq!(
            layout("<?>\n```\n?>"),
            Layout::Prose {
                escape: vec![0],
                close: Some("```".into())
            }
        );
        assert_eq!(layout("<pre>\n</script>\n</pre>"), escape(&[0]));
        // Indented: may be in a list item a later line ends, so only one closed on its line
        // is left as is.
        assert_eq!(layout("- a\n  <!--\n-->"), escape(&[6]));
        assert_eq!(layout("- a\n  <!-- b -->"), none);
        // In what may be an HTML block of type 6 or 7 (up to a blank line), likewise.
        assert_eq!(layout("<div>\n<!--\n-->"), escape(&[6]));
        // Not an opener: other tags, `<prefix`, four spaces, mid-line, in a fence.
        assert_eq!(layout("<div>\n<prefix>\n    <!--\nx <!--"), none);
        assert_eq!(layout("```\n<!--\n```"), none);
        assert_eq!(layout("~~~\n<pre>"), close("~~~"));
    }

    #[test]
    fn html_blocks_closed_in_the_text_are_left_as_written() {
        let none = escape(&[]);
        assert_eq!(layout("<!-- a -->\nb"), none);
        assert_eq!(layout("<!-->\nb"), none);
        assert_eq!(layout("<!--\n```\n-->\nb"), none);
        assert_eq!(layout("<pre>\nx\n</PRE>\n```"), close("```"));
        assert_eq!(layout("<?xml ?>"), none);
        assert_eq!(layout("<!doctype html>"), none);
        assert_eq!(layout("<![CDATA[\n]]>"), none);
        // After one, a line that opens another is seen.
        assert_eq!(layout("<!--\n-->\n<!-- x"), escape(&[9]));
    }
}
