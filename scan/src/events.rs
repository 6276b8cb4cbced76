//! openai-python's event rows (parsers/_openai_lines.py, `_events`): after the scan of a chunk's lines
//! (`_openai_lines.toml`), one pass that tells each line's kind where the scan named none (a request's last error as the
//! application wrote it), whether it continues a record (a traceback after an 'Encountered ...' line, carried across
//! chunks), whether it is recognised, and which lines are event rows, with the kind, error and thread of each (the
//! parser gathers the scan's other fields at those rows).
//!
//! It replaces ~20 polars steps on every line's ~20 columns (kept as the oracle in tests/openai_events_before.py) and
//! keeps their null rules: the scan's `kind` is null on a line no kind matched, so `msg` is null there and Kleene logic
//! follows (`kleene`); a regex runs where polars ran it, on the `regex` crate as polars does (on bytes: the lines are
//! UTF-8, where both agree).

mod py;
#[cfg(test)]
mod tests;

use regex::bytes::Regex;

use crate::attempts::{Nums, Strs};
use crate::column::{BoolColumn, Column, I64Column, StrColumn, Table};
use crate::kleene::{K, and, not, or};

pub use py::OpenaiEvents;

/// The string columns read: the line, then the scan's (`STR[i]` is the name of `Scanned::s[i]`).
pub const STR: [&str; 6] = ["line", "lead", "stamp", "thread", "err", "lab_err"];

const LINE: usize = 0;
const LEAD: usize = 1;
const STAMP: usize = 2;
const THREAD: usize = 3;
const ERR: usize = 4;
const LAB_ERR: usize = 5;

/// The columns of a chunk: its lines, what the scan read off them (`kind`: the index of the scan's kind, 0 the
/// 'message' kind).
pub struct Scanned<'a> {
    pub s: [&'a dyn Strs; 6],
    pub kind: &'a dyn Nums<i64>,
}

/// The parser's patterns (parsers/_openai_lines.py names each), compiled once.
pub struct Patterns {
    /// logging's default 'LEVEL:' prefix: a record without a time
    pub level: Regex,
    /// an application's console line with an ISO time of its own
    pub console: Regex,
    /// a literal each of the three below needs
    pub final_words: Regex,
    pub final_timeout: Regex,
    pub final_conn: Regex,
    pub final_status: Regex,
    /// a traceback's exception (group 1)
    pub exc: Regex,
    /// a "thread" that is a time or a logger's field: none
    pub not_thread: Regex,
    /// the lab client's error's class (group 1)
    pub err_class: Regex,
}

/// What a chunk gives: its event rows, each line's recognition (`ok`, Kleene), whether a traceback is open at its end
/// (None: the chunk holds no record, the state before stands), and how many lines were records of another logger.
pub struct Chunk {
    pub events: Table,
    pub ok: BoolColumn,
    pub in_exc: Option<bool>,
    pub other: i64,
}

/// An event row: its line, kind (None: a traceback's line) and exception.
type Row<'a> = (usize, Option<&'a [u8]>, Option<&'a [u8]>);

// the leads that open with 'Encountered ' (`_ENCOUNTERED`); "encountered" is that lead with no kind of its own
const ENCOUNTERED: [&[u8]; 4] = [b"status_error", b"timeout", b"conn_error", b"encountered"];

fn group1<'t>(rx: &Regex, v: &'t [u8]) -> Option<&'t [u8]> {
    rx.captures(v).and_then(|c| c.get(1)).map(|m| m.as_bytes())
}

/// One pass over a chunk's lines (`in_exc`: a traceback open before it).
pub fn events(c: &Scanned<'_>, p: &Patterns, in_exc: bool) -> Chunk {
    let n = c.s[LINE].len();
    let mut ok = BoolColumn::default();
    let mut rows: Vec<Row<'_>> = Vec::new();
    let (mut last_enc, mut other_n) = (None, 0i64);
    for r in 0..n {
        let line = c.s[LINE].at(r);
        let lead = c.s[LEAD].at(r);
        let scan_kind = lead.filter(|l| *l != b"encountered");
        let msg: K = c.kind.at(r).map(|k| k == 0);
        let enc = lead.is_some_and(|l| ENCOUNTERED.contains(&l));
        let stamped = c.s[STAMP].at(r).is_some();
        // a line with a time, or logging's 'LEVEL:' before its text, is a record; else it may continue one
        let prefixed = scan_kind.is_some() || stamped || line.is_some_and(|l| p.level.is_match(l));
        if prefixed {
            last_enc = Some(enc);
        }
        let cont = !prefixed && last_enc.unwrap_or(in_exc);
        let bare = and(not(msg), Some(!cont));
        // a record of another logger of the application, its console lines
        let console = and(bare, Some(!prefixed)) == Some(true) && line.is_some_and(|l| p.console.is_match(l));
        let other = and(bare, Some(prefixed || console));
        // the error that ended a request, in whatever line the application wrote it
        let last = match line {
            Some(l) if scan_kind.is_none() && !cont && p.final_words.is_match(l) => {
                if p.final_timeout.is_match(l) {
                    Some(&b"final_timeout"[..])
                } else if p.final_conn.is_match(l) {
                    Some(&b"final_conn"[..])
                } else if p.final_status.is_match(l) {
                    Some(&b"reraise"[..])
                } else {
                    None
                }
            }
            _ => None,
        };
        let kind = scan_kind.or(last);
        ok.push(or(or(or(msg, Some(cont)), other), Some(kind.is_some())));
        if and(other, Some(kind.is_none())) == Some(true) {
            other_n += 1;
        }
        let exc = if cont {
            line.and_then(|l| group1(&p.exc, l))
        } else {
            None
        };
        if kind.is_some() || exc.is_some() {
            rows.push((r, kind, exc));
        }
    }
    Chunk {
        events: fields(c, p, &rows),
        ok,
        in_exc: last_enc,
        other: other_n,
    }
}

/// The event rows' columns the pass tells: each row's line (`row`), kind, error, the lab client's error's class and
/// whether its thread is one (`own_thread`: not a time or a logger's field); the parser takes the scan's other fields
/// at those rows (a gather of polars' columns, no copy of their strings).
fn fields(c: &Scanned<'_>, p: &Patterns, rows: &[Row<'_>]) -> Table {
    let mut row = I64Column::default();
    let (mut kinds, mut errs, mut lab_errs) =
        (StrColumn::default(), StrColumn::default(), StrColumn::default());
    let mut own = BoolColumn::default();
    for &(r, kind, exc) in rows {
        row.push(Some(r as i64));
        kinds.push(kind.unwrap_or(b"exc"));
        let err = c.s[ERR].at(r);
        errs.push_opt(match kind {
            None => exc,
            Some(b"final_conn") => Some(b"APIConnectionError"),
            Some(b"final_timeout") => Some(b"APITimeoutError"),
            Some(b"timeout") => err.or(Some(b"TimeoutException")),
            Some(b"conn_error") => err,
            _ => None,
        });
        let lab_err = c.s[LAB_ERR].at(r);
        lab_errs.push_opt(
            lab_err
                .filter(|e| *e != b"None")
                .and_then(|e| group1(&p.err_class, e)),
        );
        own.push(Some(c.s[THREAD].at(r).is_none_or(|t| !p.not_thread.is_match(t))));
    }
    let mut t = Table::default();
    t.add("row", Column::I64(row));
    t.add("kind", Column::Str(kinds));
    t.add("err", Column::Str(errs));
    t.add("lab_err", Column::Str(lab_errs));
    t.add("own_thread", Column::Bool(own));
    t
}
