//! Text for people: aligned tables, ages, and cells cleaned of control characters.
//!
//! The table is ours on purpose (issue 29 weighed `comfy-table` and `tabled`): its 60 lines
//! would become some 25 lines of their configuration (no borders, per-column padding, trimmed
//! line ends) for thousands of lines of dependencies, and both size columns by terminal width
//! (`unicode-width`) where ours counts characters, so a wide or combining character in an id,
//! a kind or an error would line up differently from the output the CLI has always printed.

use std::io::{self, Write};
use std::time::Duration;

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Align {
    Left,
    Right,
}

/// A table: a header row, then one row per item, columns two spaces apart, each as wide as its
/// widest cell (in characters); no trailing spaces.
#[derive(Debug)]
pub(super) struct Table {
    columns: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(super) fn new(columns: &[(&'static str, Align)]) -> Table {
        Table {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row of as many cells as there are columns.
    pub(super) fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.columns.len());
        self.rows.push(cells);
    }

    pub(super) fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let header: Vec<String> = self.columns.iter().map(|(h, _)| (*h).to_owned()).collect();
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|i| {
                std::iter::once(&header)
                    .chain(&self.rows)
                    .map(|row| row[i].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = widths[i] - cell.chars().count();
                match self.columns[i].1 {
                    Align::Left => {
                        line.push_str(cell);
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        line.extend(std::iter::repeat_n(' ', pad));
                        line.push_str(cell);
                    }
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

pub(super) use crate::ops::clean;

/// [`clean`], cut to `max` characters (the last one then `…`).
pub(super) fn cell(text: &str, max: usize) -> String {
    let text = clean(text);
    if text.chars().count() <= max {
        return text;
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// An age in its two largest units: `0s`, `45s`, `1m 10s`, `2h 5m`, `3d 4h`.
pub(super) fn age(d: Duration) -> String {
    let s = d.as_secs();
    let (days, hours, mins, secs) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if days > 0 {
        format!("{days}d {hours}h")
    } else if hours > 0 {
        format!("{hours}h {mins}m")
    } else if mins > 0 {
        format!("{mins}m {secs}s")
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_without_trailing_spaces() {
        let mut t = Table::new(&[
            ("NAME", Align::Left),
            ("N", Align::Right),
            ("X", Align::Left),
        ]);
        t.row(vec!["a".into(), "1000".into(), String::new()]);
        t.row(vec!["longer".into(), "2".into(), "é".into()]);
        let mut out = Vec::new();
        t.write(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "NAME       N  X\na       1000\nlonger     2  é\n"
        );
    }

    #[test]
    fn control_characters_are_escaped_and_long_cells_cut() {
        assert_eq!(clean("a\nb\u{1b}[31mc"), "a\\nb\\u{1b}[31mc");
        assert_eq!(cell("abcdef", 4), "abc…");
        assert_eq!(cell("abcd", 4), "abcd");
    }

    #[test]
    fn ages_show_two_units() {
        assert_eq!(age(Duration::ZERO), "0s");
        assert_eq!(age(Duration::from_secs(70)), "1m 10s");
        assert_eq!(age(Duration::from_secs(2 * 3600 + 5 * 60 + 9)), "2h 5m");
        assert_eq!(age(Duration::from_secs(3 * 86_400 + 4 * 3600)), "3d 4h");
    }
}
