//! openai-python's event rows (parsers/_openai_lines.py, `_events`): after the scan of a chunk's lines
//! (`_openai_lines.toml`), one pass that tells each line's kind where the scan named none (a request's last error as the
//! application wrote it), whether it continues a record (a traceback after an 'Encountered ...' line, carried across
//! chunks), whether it is recognised, and gives the event rows' fields (`_EV_SCHEMA`, the time as the scan's text).
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
use crate::column::{BoolColumn, Column, F64Column, I64Column, StrColumn, Table};
use crate::kleene::{K, and, not, or};

pub use py::OpenaiEvents;

/// The string columns read: the line, then the scan's (`STR[i]` is the name of `Scanned::s[i]`).
pub const STR: [&str; 13] = [
    "line",
    "lead",
    "stamp",
    "frac",
    "tz",
    "thread",
    "url",
    "options_url",
    "err",
    "rid",
    "lab_err",
    "ph",
    "ph_mode",
];
/// The integer columns: the line's number, the scan's kind (its index: 0 the 'message' kind) and fields.
pub const INT: [&str; 7] = [
    "line_no",
    "kind",
    "rt",
    "status",
    "max_retries",
    "max_tokens",
    "lab_status",
];
pub const FLOAT: [&str; 4] = ["delay", "latency", "ph_value", "ph_dur"];

const LINE: usize = 0;
const LEAD: usize = 1;
const STAMP: usize = 2;
const THREAD: usize = 5;
const URL: usize = 6;
const OPTIONS_URL: usize = 7;
const ERR: usize = 8;
const LAB_ERR: usize = 10;
const PH_MODE: usize = 12;
const LINE_NO: usize = 0;
const KIND: usize = 1;
const RT: usize = 2;
const MAX_TOKENS: usize = 5;

/// The columns of a chunk: its lines and what the scan read off them.
pub struct Scanned<'a> {
    pub s: [&'a dyn Strs; 13],
    pub i: [&'a dyn Nums<i64>; 7],
    pub f: [&'a dyn Nums<f64>; 4],
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

/// One pass over a chunk's lines (`seq0`: the first line's sequence number; `in_exc`: a traceback open before it;
/// integers past `max_abs` are none, as the parser bounded them).
pub fn events(c: &Scanned<'_>, p: &Patterns, seq0: i64, in_exc: bool, max_abs: f64) -> Chunk {
    let n = c.s[LINE].len();
    let mut ok = BoolColumn::default();
    let mut rows: Vec<Row<'_>> = Vec::new();
    let (mut last_enc, mut other_n) = (None, 0i64);
    for r in 0..n {
        let line = c.s[LINE].at(r);
        let lead = c.s[LEAD].at(r);
        let scan_kind = lead.filter(|l| *l != b"encountered");
        let msg: K = c.i[KIND].at(r).map(|k| k == 0);
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
        events: fields(c, p, &rows, seq0, max_abs),
        ok,
        in_exc: last_enc,
        other: other_n,
    }
}

/// The event rows' columns (`_rows`, less the time: its text is given).
fn fields(c: &Scanned<'_>, p: &Patterns, rows: &[Row<'_>], seq0: i64, max_abs: f64) -> Table {
    // polars compares the integer with the float bound as floats (2**53 + 1 passes)
    let bounded = |v: Option<i64>| v.filter(|x| x.checked_abs().is_some_and(|a| a as f64 <= max_abs));
    let (mut seq, mut line_no) = (I64Column::default(), I64Column::default());
    let mut s: Vec<StrColumn> = (0..STR.len()).map(|_| StrColumn::default()).collect();
    let mut kinds = StrColumn::default();
    let mut ints: Vec<I64Column> = (0..INT.len()).map(|_| I64Column::default()).collect();
    let mut floats: Vec<F64Column> = (0..FLOAT.len()).map(|_| F64Column::default()).collect();
    for &(r, kind, exc) in rows {
        let k = kind.unwrap_or(b"");
        seq.push(Some(seq0 + r as i64));
        line_no.push(c.i[LINE_NO].at(r));
        kinds.push(kind.unwrap_or(b"exc"));
        for (j, col) in s.iter_mut().enumerate().skip(STAMP) {
            let v = c.s[j].at(r);
            col.push_opt(match j {
                THREAD => v.filter(|t| !p.not_thread.is_match(t)),
                URL if k == b"options" => c.s[OPTIONS_URL].at(r),
                OPTIONS_URL => None, // read into `url` above
                ERR => match kind {
                    None => exc,
                    Some(b"final_conn") => Some(b"APIConnectionError"),
                    Some(b"final_timeout") => Some(b"APITimeoutError"),
                    Some(b"timeout") => v.or(Some(b"TimeoutException")),
                    Some(b"conn_error") => v,
                    _ => None,
                },
                LAB_ERR => v.filter(|e| *e != b"None").and_then(|e| group1(&p.err_class, e)),
                PH_MODE => match v {
                    Some(b"c") => Some(b"concurrency"),
                    Some(b"r") => Some(b"rate"),
                    _ => v,
                },
                _ => v,
            });
        }
        for (j, col) in ints.iter_mut().enumerate().skip(RT) {
            let v = bounded(c.i[j].at(r));
            col.push(match j {
                RT => v.filter(|_| k == b"build"),
                MAX_TOKENS => v.filter(|_| k == b"options"),
                _ => v,
            });
        }
        for (j, col) in floats.iter_mut().enumerate() {
            col.push(c.f[j].at(r));
        }
    }
    let mut t = Table::default();
    t.add("seq", Column::I64(seq));
    t.add("line_no", Column::I64(line_no));
    t.add("kind", Column::Str(kinds));
    for (name, col) in STR.iter().zip(s).skip(STAMP) {
        if *name != "options_url" {
            t.add(name, Column::Str(col));
        }
    }
    for (name, col) in INT.iter().zip(ints).skip(RT) {
        t.add(name, Column::I64(col));
    }
    for (name, col) in FLOAT.iter().zip(floats) {
        t.add(name, Column::F64(col));
    }
    t
}
