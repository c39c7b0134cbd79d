//! A table written a row at a time, laid out exactly as `comfy_table` lays out a table with
//! the `NOTHING` preset and its defaults (the layout of the listings' tables), so that a table
//! of a million rows is printed without holding them: comfy_table keeps every cell, then every
//! padded cell line, then every line, then the joined text (about 2 KB per row of five cells).
//!
//! The caller measures every row ([`Columns::measure`]), then writes the header and every row
//! again ([`Columns::write_row`]), so it builds each row twice and holds one at a time.
//!
//! Invariants:
//! - the bytes written for the header and rows are those of [`plain`] of a `comfy_table::Table`
//!   with the `NOTHING` preset holding the same header and rows (checked against comfy_table by
//!   the tests, wide and multi-line cells included): each column is as wide as its widest cell
//!   line (at least 1, display width as `unicode-width` measures it), every cell line gets one
//!   space of padding on each side and is filled with spaces to the column's width, a cell
//!   holding newlines spans several lines, and no line ends in spaces (what follows a line's
//!   last text is left out);
//! - only when every column is at most `u16::MAX` wide ([`Columns::streamable`]): comfy_table
//!   caps widths there and breaks longer lines, which is not reproduced here, so a caller
//!   falls back to comfy_table for such a table.

use std::io::{Result, Write};

use unicode_width::UnicodeWidthStr;

/// The widths of a table's columns, from its header and every row.
#[derive(Debug, Clone)]
pub struct Columns {
    widths: Vec<usize>,
}

impl Columns {
    /// The columns of a table with this header.
    pub fn new(header: &[&str]) -> Self {
        let mut c = Self {
            widths: vec![1; header.len()],
        };
        c.measure(header);
        c
    }

    /// Widens the columns for one row (cells past the header's are ignored: no caller has
    /// them).
    pub fn measure<S: AsRef<str>>(&mut self, row: &[S]) {
        for (w, cell) in self.widths.iter_mut().zip(row) {
            for line in cell.as_ref().split('\n') {
                *w = (*w).max(line.width());
            }
        }
    }

    /// Whether [`Columns::write_row`] lays the table out as comfy_table does (no column is
    /// wider than comfy_table's `u16` widths).
    pub fn streamable(&self) -> bool {
        self.widths.iter().all(|&w| w <= usize::from(u16::MAX))
    }

    /// Writes one row (the header too), each of its lines ending with a newline.
    pub fn write_row<S: AsRef<str>>(&self, out: &mut dyn Write, row: &[S]) -> Result<()> {
        let height = row
            .iter()
            .map(|c| c.as_ref().split('\n').count())
            .max()
            .unwrap_or(1);
        let mut lines: Vec<std::str::Split<'_, char>> =
            row.iter().map(|c| c.as_ref().split('\n')).collect();
        let mut texts: Vec<&str> = Vec::with_capacity(self.widths.len());
        for _ in 0..height {
            texts.clear();
            texts.extend((0..self.widths.len()).map(|i| {
                lines
                    .get_mut(i)
                    .and_then(Iterator::next)
                    .unwrap_or_default()
            }));
            // Cells after the line's last text would only add spaces.
            let last = texts.iter().rposition(|t| !t.trim_end().is_empty());
            for (i, (&w, text)) in self.widths.iter().zip(&texts).enumerate() {
                match last {
                    Some(l) if i < l => {
                        let fill = w.saturating_sub(text.width());
                        write!(out, " {text}{:fill$} ", "")?;
                    }
                    Some(l) if i == l => write!(out, " {}", text.trim_end())?,
                    _ => break,
                }
            }
            out.write_all(b"\n")?;
        }
        Ok(())
    }
}

/// A `comfy_table::Table` (the `NOTHING` preset) as text whose lines do not end in spaces:
/// comfy_table pads every cell, the last one of a line too.
pub fn plain(t: &comfy_table::Table) -> String {
    let text = t.to_string();
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(line.trim_end());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comfy(header: &[&str], rows: &[Vec<String>]) -> String {
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::NOTHING);
        t.set_header(header.to_vec());
        for r in rows {
            t.add_row(r.clone());
        }
        format!("{}\n", plain(&t))
    }

    fn streamed(header: &[&str], rows: &[Vec<String>]) -> String {
        let mut c = Columns::new(header);
        for r in rows {
            c.measure(r);
        }
        assert!(c.streamable());
        let mut out = Vec::new();
        c.write_row(&mut out, header).unwrap();
        for r in rows {
            c.write_row(&mut out, r).unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn rows_are_laid_out_as_comfy_table_lays_them_out() {
        let pieces = [
            "",
            "a",
            "abc",
            "12345678",
            "日本語",
            "e\u{301}",
            "👍🏽",
            "\t",
            "x y",
            "line\nnext",
            "\n",
            "wide wide wide wide wide wide",
            "…",
            "\u{200b}",
            "ﬁ",
        ];
        let header = ["branch", "from", "entries", "bytes", "first entry"];
        let mut seed = 11u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        for n in [0, 1, 2, 7, 40] {
            let rows: Vec<Vec<String>> = (0..n)
                .map(|_| {
                    (0..header.len())
                        .map(|_| {
                            (0..next() % 3)
                                .map(|_| pieces[next() % pieces.len()])
                                .collect::<String>()
                        })
                        .collect()
                })
                .collect();
            assert_eq!(streamed(&header, &rows), comfy(&header, &rows), "{rows:?}");
        }
        // A header of empty names: every column is 1 wide.
        let empty = ["", ""];
        assert_eq!(streamed(&empty, &[]), comfy(&empty, &[]));
    }
}
