//! A block of a log into lines: the `line_no` and `line` columns every parser reads (logscope/ingest/linebytes.py
//! says which bytes end a line). The lines are views into one copy of the block: no line is copied on its own.

use crate::column::{Column, I64Column, StrColumn, Table};

/// Where each line of `text` starts and ends (ends exclusive, line ends left out). `cr`: a file of CR endings, where a
/// lone CR ends a line too, except the block's very last byte (it may be the first half of a CR LF cut between two
/// blocks) and as the block's second-to-last byte (a CR there ends a line whatever follows: what the Python reader did,
/// kept so that the lines are the same).
pub fn spans(text: &[u8], cr: bool) -> Vec<(usize, usize)> {
    let mut out = Vec::with_capacity(text.len() / 64 + 1);
    let mut start = 0;
    if cr && memchr::memchr(b'\r', text).is_some() {
        let n = text.len();
        for i in memchr::memchr2_iter(b'\n', b'\r', text) {
            let ends = text[i] == b'\n' || (i + 1 < n && (i + 2 == n || text[i + 1] != b'\n'));
            if ends {
                out.push((start, i));
                start = i + 1;
            }
        }
    } else {
        for i in memchr::memchr_iter(b'\n', text) {
            out.push((start, i));
            start = i + 1;
        }
    }
    out.push((start, text.len()));
    out
}

/// The byte length of the first `chars` characters of UTF-8 `s`, or None when it has no more than that.
fn prefix_of_chars(s: &[u8], chars: usize) -> Option<usize> {
    let mut seen = 0;
    for (i, &b) in s.iter().enumerate() {
        if (b & 0xC0) != 0x80 {
            if seen == chars {
                return Some(i);
            }
            seen += 1;
        }
    }
    None
}

/// The lines of `text` (valid UTF-8) numbered from `first + 1`, each cut to `max_chars` characters; and how many were
/// cut. None when `text` is not valid UTF-8 (the caller decodes it with replacements first).
pub fn split(text: Vec<u8>, first: i64, cr: bool, max_chars: usize) -> Option<(Table, usize)> {
    if std::str::from_utf8(&text).is_err() {
        return None;
    }
    let mut spans = spans(&text, cr);
    let mut cut = 0;
    if spans.iter().any(|&(a, b)| b - a > max_chars) {
        for span in spans.iter_mut() {
            if span.1 - span.0 > max_chars
                && let Some(keep) = prefix_of_chars(&text[span.0..span.1], max_chars)
            {
                span.1 = span.0 + keep;
                cut += 1;
            }
        }
    }
    let line_no = I64Column::all_valid((first + 1..first + 1 + spans.len() as i64).collect());
    let lines = StrColumn::from_spans(text, &spans);
    let mut table = Table::default();
    table.add("line_no", Column::I64(line_no));
    table.add("line", Column::Str(lines));
    Some((table, cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str, cr: bool) -> Vec<String> {
        spans(text.as_bytes(), cr)
            .into_iter()
            .map(|(a, b)| text[a..b].to_string())
            .collect()
    }

    #[test]
    fn lf_ends_lines_and_keeps_the_cr_of_crlf() {
        assert_eq!(lines("a\r\nb\n\nc", false), ["a\r", "b", "", "c"]);
        assert_eq!(lines("", false), [""]);
    }

    #[test]
    fn lone_crs_end_lines_in_a_cr_file() {
        assert_eq!(lines("a\rb\r\nc\r", true), ["a", "b\r", "c\r"]);
        // the second-to-last byte: a CR there ends its line, as the Python reader's text[:-1] substitution did
        assert_eq!(lines("a\r\n", true), ["a", "", ""]);
        assert_eq!(lines("a\rb", true), ["a", "b"]);
    }

    #[test]
    fn long_lines_are_cut_by_characters() {
        let (t, cut) = split("ééé\nab".as_bytes().to_vec(), 10, false, 2).unwrap();
        assert_eq!(cut, 1);
        let Column::Str(s) = &t.columns[1] else { panic!() };
        assert_eq!(s.get(0), "éé".as_bytes());
        assert_eq!(s.get(1), b"ab");
        let Column::I64(n) = &t.columns[0] else { panic!() };
        assert_eq!(n.values, vec![11, 12]);
        assert!(split(vec![0xff], 0, false, 10).is_none());
    }
}
