//! The lab client's records grouped into attempts and requests (parsers/client_jsonl.py, `_lab_flush`): one pass over
//! a chunk's pending records in order that gives each its request, one `(file, rid)` and generation (the requests of
//! its rid before it: a rid reused after its `request` record is another request), then each request's attempts in
//! retry order with their response, span and outcome.
//!
//! It replaces polars windows over `(file, rid)`, four `unique`s, four joins and two sorts (kept as the oracle in
//! tests/client_jsonl_before.py), with their null rules: a null retry count matches no response or span (a join's null
//! key), a request's sends are deduplicated on their retry count with the nulls one value (`unique`), a null count
//! sorts first, and `is_last` is null where the count is. The values come converted (times as UTC microseconds,
//! numbers as polars cast them); the conversions and the timeout setting per client stay with the parser.

use std::collections::HashMap;

use crate::attempts::{Nums, Strs};
use crate::column::{BoolColumn, Column, F64Column, I64Column, StrColumn, Table};

/// A chunk's pending records in order (`seq` ascending): their kind, file, rid, and the attempt records' fields.
pub struct Rows<'a> {
    pub kind: &'a dyn Strs,
    pub file: &'a dyn Nums<i64>,
    pub rid: &'a dyn Strs,
    pub seq: &'a dyn Nums<i64>,
    pub line_no: &'a dyn Nums<i64>,
    pub client: &'a dyn Strs,
    pub url: &'a dyn Strs,
    pub trace_id: &'a dyn Strs,
    pub span_id: &'a dyn Strs,
    /// the retry count, the record's time (microseconds, UTC), its status
    pub rc: &'a dyn Nums<i64>,
    pub t: &'a dyn Nums<i64>,
    pub status: &'a dyn Nums<i64>,
}

impl Rows<'_> {
    /// Whether every column has the kind column's length.
    pub fn even(&self) -> bool {
        let n = self.kind.len();
        let strs = [self.rid, self.client, self.url, self.trace_id, self.span_id];
        let ints = [self.file, self.seq, self.line_no, self.rc, self.t, self.status];
        strs.iter().all(|c| c.len() == n) && ints.iter().all(|c| c.len() == n)
    }
}

/// The fields of the `request` records that name a rid, in their order among the rows (the parser converts them on
/// these records alone).
pub struct Reqs<'a> {
    pub phase: &'a dyn Strs,
    pub send: &'a dyn Nums<i64>,
    pub end: &'a dyn Nums<i64>,
    pub error: &'a dyn Strs,
    pub latency: &'a dyn Nums<f64>,
    pub max_tokens: &'a dyn Nums<i64>,
    pub stream: &'a dyn Nums<i64>,
    pub output_tokens: &'a dyn Nums<i64>,
    pub ttft: &'a dyn Nums<f64>,
    pub timeout: &'a dyn Nums<f64>,
    pub max_retries: &'a dyn Nums<i64>,
}

impl Reqs<'_> {
    /// Whether every column has the phase column's length.
    pub fn even(&self) -> bool {
        let n = self.phase.len();
        let ints = [
            self.send,
            self.end,
            self.max_tokens,
            self.stream,
            self.output_tokens,
            self.max_retries,
        ];
        let floats = [self.latency, self.ttft, self.timeout];
        self.error.len() == n && ints.iter().all(|c| c.len() == n) && floats.iter().all(|c| c.len() == n)
    }
}

/// What the flush looks up: each (file, phase)'s concurrency (its last `phase_start`), each (file, client)'s one
/// timeout setting so far.
#[derive(Default)]
pub struct Lookups {
    pub concurrency: HashMap<i64, HashMap<Vec<u8>, Option<i64>>>,
    pub timeout: HashMap<i64, HashMap<Vec<u8>, f64>>,
}

impl Lookups {
    fn concurrency(&self, file: Option<i64>, phase: Option<&[u8]>) -> Option<i64> {
        *self.concurrency.get(&file?)?.get(phase?)?
    }

    fn timeout(&self, file: Option<i64>, client: Option<&[u8]>) -> Option<f64> {
        self.timeout.get(&file?)?.get(client?).copied()
    }
}

/// The flush's output: the attempts and requests of every request ready, and each row's carry flag (the rows of
/// requests not ready yet, kept for the next chunk).
pub struct Flushed {
    pub attempts: Table,
    pub requests: Table,
    pub carry: Vec<bool>,
}

// an attempt without response that lasted >= 99 % of the client timeout timed out (`_TIMEOUT_TOL`)
const TIMEOUT_TOL: f64 = 0.99;
// the largest integer a float holds exactly (`logscope.numbers.MAX_ABS`): past it `to_int` gives null
const MAX_ABS: f64 = 9_007_199_254_740_992.0;

/// One request: its (file, rid) group and generation, its record (its row and place among `Reqs`) and that record's
/// phase's concurrency, its sends (one per retry count, the first of each, in row order), its responses and spans (the
/// first of each non-null count).
struct Slot {
    key: (usize, i64),
    req: Option<(usize, usize)>,
    conc: Option<i64>,
    sends: Vec<(Option<i64>, usize)>,
    resp: Vec<(i64, usize)>,
    span: Vec<(i64, usize)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Request,
    Send,
    Response,
    Span,
    Other,
}

impl Kind {
    fn of(k: Option<&[u8]>) -> Kind {
        match k {
            Some(b"request") => Kind::Request,
            Some(b"attempt_send") => Kind::Send,
            Some(b"attempt_response") => Kind::Response,
            Some(b"attempt_span") => Kind::Span,
            _ => Kind::Other,
        }
    }
}

/// polars' `>=` on floats: NaN equal to itself and above every other value.
fn ge(a: f64, b: f64) -> bool {
    match (a.is_nan(), b.is_nan()) {
        (_, true) => a.is_nan(),
        (true, false) => true,
        _ => a >= b,
    }
}

/// Microseconds as seconds, as polars divides a column of `n` rows by 1e6: past one row it multiplies by the inverse
/// (which differs in the last bit, 1533994 us -> 1.5339939999999999 s), one row it divides.
fn secs(us: i64, n: usize) -> f64 {
    if n > 1 {
        us as f64 * (1.0 / 1e6)
    } else {
        us as f64 / 1e6
    }
}

fn first_of(list: &[(i64, usize)], rc: Option<i64>) -> Option<usize> {
    let rc = rc?;
    list.iter().find(|&&(c, _)| c == rc).map(|&(_, i)| i)
}

/// Group the pending rows into requests and give the tables of the ready ones (`last`: the log ended, every request
/// with a rid is ready).
pub fn flush(r: &Rows, q: &Reqs, look: &Lookups, last: bool, source: &[u8]) -> Flushed {
    let n = r.kind.len();
    // each row's (file, rid) group, in order of first sight (its first seq), and its generation
    let mut groups: HashMap<(Option<i64>, Option<&[u8]>), usize> = HashMap::new();
    let mut reqs_of: Vec<i64> = Vec::new();
    let (mut group, mut gen_of, mut kinds) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for i in 0..n {
        let next = groups.len();
        let g = *groups.entry((r.file.at(i), r.rid.at(i))).or_insert(next);
        if g == reqs_of.len() {
            reqs_of.push(0);
        }
        let kind = Kind::of(r.kind.at(i));
        group.push(g);
        gen_of.push(reqs_of[g]);
        kinds.push(kind);
        if kind == Kind::Request {
            reqs_of[g] += 1;
        }
    }
    // a group's rows come in generation order: a row is in its group's newest request (`cur`) or starts the next
    let mut cur: Vec<Option<usize>> = vec![None; reqs_of.len()];
    let mut slots: Vec<Slot> = Vec::new();
    let mut carry = Vec::with_capacity(n);
    let mut nreq = 0usize;
    for i in 0..n {
        let (g, gn, kind) = (group[i], gen_of[i], kinds[i]);
        let ready = r.rid.at(i).is_some() && (last || gn < reqs_of[g]);
        carry.push(!ready);
        let rc = r.rc.at(i);
        if !ready || kind == Kind::Other || (rc.is_none() && matches!(kind, Kind::Response | Kind::Span)) {
            continue;
        }
        let s = match cur[g] {
            Some(k) if slots[k].key.1 == gn => &mut slots[k],
            _ => {
                cur[g] = Some(slots.len());
                slots.push(Slot {
                    key: (g, gn),
                    req: None,
                    conc: None,
                    sends: Vec::new(),
                    resp: Vec::new(),
                    span: Vec::new(),
                });
                slots.last_mut().expect("a slot just pushed")
            }
        };
        match kind {
            Kind::Request => {
                s.req = Some((i, nreq));
                s.conc = look.concurrency(r.file.at(i), q.phase.at(nreq));
                nreq += 1;
            }
            Kind::Send if !s.sends.iter().any(|&(c, _)| c == rc) => s.sends.push((rc, i)),
            Kind::Response | Kind::Span => {
                let list = if kind == Kind::Span {
                    &mut s.span
                } else {
                    &mut s.resp
                };
                if first_of(list, rc).is_none() {
                    list.push((rc.expect("a count"), i));
                }
            }
            _ => {}
        }
    }
    slots.sort_unstable_by_key(|s| s.key);
    let n_att = slots.iter().map(|s| s.sends.len()).sum();
    let mut atts = Vec::new();
    let mut requests = Vec::new();
    for s in &mut slots {
        if let Some((row, j)) = s.req {
            let first = s.sends.first().and_then(|&(_, i)| r.seq.at(i));
            let sends = s.sends.len();
            requests.push(Req {
                first,
                row,
                j,
                sends,
                conc: s.conc,
            });
        }
        // a null count first, then by count (unique within a request)
        s.sends.sort_by_key(|&(rc, _)| rc);
        for (k, &(rc, i)) in s.sends.iter().enumerate() {
            let next = s.sends.get(k + 1).map(|&(_, i)| i);
            atts.push(attempt(r, q, look, s, (rc, i, next), n_att));
        }
    }
    atts.sort_unstable_by_key(|a| a.row);
    // a request whose sends came before the log's start (none here): first, at its record
    requests.sort_unstable_by_key(|x| (x.first.is_some(), x.first, r.seq.at(x.row)));
    Flushed {
        attempts: attempts_table(r, q, &atts, source),
        requests: requests_table(r, q, &requests, source),
        carry,
    }
}

/// A request record ready: its first send's seq, its row and place among `Reqs`, its sends.
struct Req {
    first: Option<i64>,
    row: usize,
    j: usize,
    sends: usize,
    conc: Option<i64>,
}

/// One attempt's figures (`_lab_attempt_outcome`): its send's row, its request's row and place among `Reqs`.
struct Att {
    row: usize,
    req: Option<(usize, usize)>,
    rc: Option<i64>,
    ts_start: Option<i64>,
    ts_end: Option<i64>,
    status: Option<i64>,
    error: Option<usize>,
    timed_out: Option<bool>,
    is_last: bool,
    span: Option<usize>,
    conc: Option<i64>,
}

fn attempt(
    r: &Rows,
    q: &Reqs,
    look: &Lookups,
    s: &Slot,
    (rc, i, next): (Option<i64>, usize, Option<usize>),
    n: usize,
) -> Att {
    let j = s.req.map(|(_, j)| j);
    let resp = first_of(&s.resp, rc);
    let span = first_of(&s.span, rc);
    let ts_start = r.t.at(i);
    let resp_ts = resp.and_then(|x| r.t.at(x));
    let next_send = next.and_then(|x| r.t.at(x));
    // `is_last` is null where the count is: it then takes no branch that asks for it
    let is_last = rc.is_some() && next.is_none();
    let r_end = j.and_then(|j| q.end.at(j));
    let r_error = j.and_then(|j| q.error.at(j));
    let timeout = j
        .and_then(|j| q.timeout.at(j))
        .or_else(|| look.timeout(r.file.at(i), r.client.at(i)));
    let no_resp = resp_ts.is_none();
    let until = if is_last { r_end } else { next_send };
    let lasted = until.zip(ts_start).map(|(u, t)| secs(u.wrapping_sub(t), n));
    let unknown = no_resp && lasted.is_some() && timeout.is_none();
    let says_timeout = r_error.is_some_and(|e| memchr::memmem::find(e, b"Timeout").is_some());
    let timed_out = if is_last && says_timeout {
        Some(true)
    } else if unknown {
        None
    } else {
        let over = lasted.zip(timeout).is_some_and(|(l, t)| ge(l, t * TIMEOUT_TOL));
        Some(no_resp && over)
    };
    let by_timeout = timeout
        .map(|t| t * 1e6)
        .filter(|us| us.abs() <= MAX_ABS)
        .zip(ts_start)
        .map(|(us, t)| t.wrapping_add(us as i64));
    let ts_end = if is_last && r_end.is_some() {
        r_end
    } else if !no_resp {
        resp_ts
    } else if lasted.is_none() {
        None
    } else {
        match (by_timeout, next_send) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    };
    // 0: the request's error, 1: "Timeout", 2: "ConnectionError"
    let error = if is_last && r_error.is_some() {
        Some(0)
    } else if no_resp && timed_out == Some(true) {
        Some(1)
    } else if no_resp && timed_out == Some(false) && lasted.is_some() {
        Some(2)
    } else {
        None
    };
    Att {
        row: i,
        req: s.req,
        rc,
        ts_start,
        ts_end,
        status: resp.and_then(|x| r.status.at(x)),
        error,
        timed_out,
        is_last,
        span,
        conc: s.conc,
    }
}

/// Columns of `n` rows, each value from a row's index.
struct Cols<'a> {
    t: Table,
    idx: &'a [usize],
}

impl Cols<'_> {
    fn ints(&mut self, name: &str, micros: bool, f: impl Fn(usize) -> Option<i64>) {
        let mut c = I64Column::default();
        self.idx.iter().for_each(|&k| c.push(f(k)));
        self.t
            .add(name, if micros { Column::Micros(c) } else { Column::I64(c) });
    }

    fn strs<'s>(&mut self, name: &str, f: impl Fn(usize) -> Option<&'s [u8]>) {
        let mut c = StrColumn::default();
        self.idx.iter().for_each(|&k| c.push_opt(f(k)));
        self.t.add(name, Column::Str(c));
    }

    fn floats(&mut self, name: &str, f: impl Fn(usize) -> Option<f64>) {
        let mut c = F64Column::default();
        self.idx.iter().for_each(|&k| c.push(f(k)));
        self.t.add(name, Column::F64(c));
    }

    fn bools(&mut self, name: &str, f: impl Fn(usize) -> Option<bool>) {
        let mut c = BoolColumn::default();
        self.idx.iter().for_each(|&k| c.push(f(k)));
        self.t.add(name, Column::Bool(c));
    }
}

/// `client_attempts`' columns, in the parser's order.
fn attempts_table(r: &Rows, q: &Reqs, atts: &[Att], source: &[u8]) -> Table {
    let idx: Vec<usize> = (0..atts.len()).collect();
    let mut c = Cols {
        t: Table::default(),
        idx: &idx,
    };
    let a = |k: usize| &atts[k];
    let req = |k: usize| a(k).req.map(|(_, j)| j);
    let last = |k: usize| req(k).filter(|_| a(k).is_last);
    c.ints("ts_start", true, |k| a(k).ts_start);
    c.ints("ts_end", true, |k| a(k).ts_end);
    c.strs("source", |_| Some(source));
    c.strs("client", |k| {
        r.client
            .at(a(k).row)
            .or_else(|| a(k).req.and_then(|(row, _)| r.client.at(row)))
    });
    c.strs("logical_request_id", |k| r.rid.at(a(k).row));
    c.strs("request_id", |k| r.rid.at(a(k).row));
    c.ints("attempt", false, |k| a(k).rc.map(|x| x + 1));
    c.ints("status", false, |k| a(k).status);
    c.strs("error", |k| match a(k).error {
        Some(0) => req(k).and_then(|j| q.error.at(j)),
        Some(1) => Some(b"Timeout"),
        Some(2) => Some(b"ConnectionError"),
        _ => None,
    });
    c.bools("timed_out", |k| a(k).timed_out);
    c.floats("ttft_s", |k| {
        last(k)
            .filter(|_| a(k).status == Some(200))
            .and_then(|j| q.ttft.at(j))
    });
    c.floats("e2e_s", |k| {
        a(k).ts_end
            .zip(a(k).ts_start)
            .map(|(e, s)| secs(e.wrapping_sub(s), atts.len()))
    });
    c.ints("max_tokens", false, |k| req(k).and_then(|j| q.max_tokens.at(j)));
    c.ints("output_tokens", false, |k| {
        last(k).and_then(|j| q.output_tokens.at(j))
    });
    c.ints("concurrency", false, |k| a(k).conc);
    c.strs("grouping", |_| Some(b"exact"));
    c.floats("grouping_confidence", |_| Some(1.0));
    c.strs("url", |k| r.url.at(a(k).row));
    c.ints("line_no", false, |k| r.line_no.at(a(k).row));
    c.strs("trace_id", |k| {
        a(k).span
            .and_then(|s| r.trace_id.at(s))
            .or_else(|| r.trace_id.at(a(k).row))
    });
    c.strs("span_id", |k| a(k).span.and_then(|s| r.span_id.at(s)));
    c.ints("_file", false, |k| r.file.at(a(k).row));
    c.t
}

/// `client_requests`' columns, in the parser's order (`attempts` as int64: the parser casts it to polars' count type).
fn requests_table(r: &Rows, q: &Reqs, reqs: &[Req], source: &[u8]) -> Table {
    let idx: Vec<usize> = (0..reqs.len()).collect();
    let mut c = Cols {
        t: Table::default(),
        idx: &idx,
    };
    let row = |k: usize| reqs[k].row;
    let j = |k: usize| reqs[k].j;
    let error = |k: usize| q.error.at(j(k));
    c.strs("logical_request_id", |k| r.rid.at(row(k)));
    c.strs("source", |_| Some(source));
    c.strs("client", |k| r.client.at(row(k)));
    c.ints("ts_start", true, |k| q.send.at(j(k)));
    c.ints("ts_end", true, |k| q.end.at(j(k)));
    c.ints("status", false, |k| r.status.at(row(k)));
    c.strs("error", error);
    c.bools("timed_out", |k| {
        Some(error(k).is_some_and(|e| memchr::memmem::find(e, b"Timeout").is_some()))
    });
    c.ints("attempts", false, |k| {
        (reqs[k].sends > 0).then_some(reqs[k].sends as i64)
    });
    c.floats("ttft_s", |k| q.ttft.at(j(k)));
    c.floats("e2e_s", |k| q.latency.at(j(k)));
    c.ints("max_tokens", false, |k| q.max_tokens.at(j(k)));
    c.ints("output_tokens", false, |k| q.output_tokens.at(j(k)));
    c.floats("timeout_s", |k| q.timeout.at(j(k)));
    c.ints("max_retries", false, |k| q.max_retries.at(j(k)));
    c.bools("stream", |k| q.stream.at(j(k)).map(|b| b != 0));
    c.ints("concurrency", false, |k| reqs[k].conc);
    c.strs("phase", |k| q.phase.at(j(k)));
    c.ints("_file", false, |k| r.file.at(row(k)));
    c.t
}

mod py;
pub use py::lab_flush;

#[cfg(test)]
mod tests;
