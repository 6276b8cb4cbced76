//! openai-python's attempts (parsers/openai_client.py, `_assemble`): one sequential pass over a chunk's event rows, in
//! line order, that gives each row its thread's key and attempt, and each attempt its figures. A thread's events are a
//! state machine: in a DEBUG log an attempt starts at its first 'Building' / 'Request options' / 'Sending' line after
//! a line of another kind; at INFO, at each httpx line, at a request's last error, and at a 'Retrying' line that does
//! not follow an httpx line of a status >= 400. A traceback's line and a request's last error go with the thread of
//! the line before them.
//!
//! It replaces polars windows over the thread (the anchors, their running count) and a group-by of ~30 aggregations
//! (kept as the oracle in tests/openai_attempts_before.py); the aggregations keep polars' null rules: `min` and
//! `drop_nulls().first()` skip nulls, `filter(...).first()` takes the first row of the kind whatever its value.

use std::collections::HashMap;

use crate::column::{BoolColumn, Column, F64Column, I64Column, StrColumn, Table};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Build,
    Options,
    Send,
    Httpx,
    Response,
    Timeout,
    ConnError,
    Retrying,
    RaiseTimeout,
    RaiseConn,
    Reraise,
    Done,
    FinalTimeout,
    FinalConn,
    Exc,
    Other,
}

impl Kind {
    fn of(k: Option<&[u8]>) -> Kind {
        let k = k.unwrap_or(b"");
        // the one name of that length and first byte, then a compare (a match on the names alone compared each)
        let (name, kind): (&[u8], Kind) = match (k.len(), k.first()) {
            (5, Some(b'b')) => (b"build", Kind::Build),
            (7, Some(b'o')) => (b"options", Kind::Options),
            (4, Some(b's')) => (b"send", Kind::Send),
            (5, Some(b'h')) => (b"httpx", Kind::Httpx),
            (8, Some(b'r')) if k[2] == b's' => (b"response", Kind::Response),
            (7, Some(b't')) => (b"timeout", Kind::Timeout),
            (10, Some(b'c')) => (b"conn_error", Kind::ConnError),
            (8, Some(b'r')) => (b"retrying", Kind::Retrying),
            (13, Some(b'r')) => (b"raise_timeout", Kind::RaiseTimeout),
            (10, Some(b'r')) => (b"raise_conn", Kind::RaiseConn),
            (7, Some(b'r')) => (b"reraise", Kind::Reraise),
            (4, Some(b'd')) => (b"done", Kind::Done),
            (13, Some(b'f')) => (b"final_timeout", Kind::FinalTimeout),
            (10, Some(b'f')) => (b"final_conn", Kind::FinalConn),
            (3, Some(b'e')) => (b"exc", Kind::Exc),
            _ => return Kind::Other,
        };
        if k == name { kind } else { Kind::Other }
    }

    /// a line before the request is sent (`_PRE`)
    fn pre(self) -> bool {
        matches!(self, Kind::Build | Kind::Options | Kind::Send)
    }

    /// the application's line naming the error that ended a request (`_FINAL`)
    fn last_error(self) -> bool {
        matches!(self, Kind::FinalTimeout | Kind::FinalConn)
    }

    /// a line that ends an attempt (`_OUTCOME`)
    fn outcome(self) -> bool {
        matches!(
            self,
            Kind::Response | Kind::Httpx | Kind::Timeout | Kind::ConnError
        ) || self.last_error()
    }
}

/// A chunk's event rows (the parser's `_EV_SCHEMA` columns, `ts` as microseconds, and `key`: the thread, or at INFO the
/// thread or else the URL's route), in line order.
pub struct Events<'a> {
    pub kind: &'a dyn Strs,
    pub key: &'a dyn Strs,
    pub thread: &'a dyn Strs,
    pub url: &'a dyn Strs,
    pub err: &'a dyn Strs,
    pub rid: &'a dyn Strs,
    pub lab_err: &'a dyn Strs,
    pub seq: &'a dyn Nums<i64>,
    pub line_no: &'a dyn Nums<i64>,
    pub ts: &'a dyn Nums<i64>,
    pub rt: &'a dyn Nums<i64>,
    pub status: &'a dyn Nums<i64>,
    pub max_retries: &'a dyn Nums<i64>,
    pub max_tokens: &'a dyn Nums<i64>,
    pub lab_status: &'a dyn Nums<i64>,
    pub latency: &'a dyn Nums<f64>,
    pub delay: &'a dyn Nums<f64>,
}

impl Events<'_> {
    /// Whether every column has the kind column's length.
    pub fn even(&self) -> bool {
        let n = self.kind.len();
        let strs = [self.key, self.thread, self.url, self.err, self.rid, self.lab_err];
        let ints = [
            self.seq,
            self.line_no,
            self.ts,
            self.rt,
            self.status,
            self.max_retries,
            self.max_tokens,
            self.lab_status,
        ];
        strs.iter().all(|c| c.len() == n)
            && ints.iter().all(|c| c.len() == n)
            && self.latency.len() == n
            && self.delay.len() == n
    }
}

/// One attempt's figures as they accumulate over its rows.
#[derive(Default)]
struct Att<'a> {
    tid: usize,
    att: i64,
    tk: &'a [u8],
    thr: Option<&'a [u8]>,
    first_seq: Option<i64>,
    line_no: Option<i64>,
    ts_start: Option<i64>,
    out_min: Option<i64>,
    retry_min: Option<i64>,
    has_out: bool,
    rt: Option<i64>,
    url: Option<&'a [u8]>,
    max_tokens: Option<i64>,
    status: Option<i64>,
    timed_out: bool,
    exc: Option<&'a [u8]>,
    err: Option<&'a [u8]>,
    retried: bool,
    max_retries: Option<i64>,
    delay_after: Option<f64>,
    gave_up_timeout: bool,
    gave_up_conn: bool,
    reraised: bool,
    rid: Option<&'a [u8]>,
    done: Option<usize>,
    latency: Option<f64>,
    n_resp: u32,
    n_httpx: u32,
    n_to: u32,
}

fn min(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

impl<'a> Att<'a> {
    /// its first outcome's time, else its first 'Retrying' line's
    fn ts_out(&self) -> Option<i64> {
        self.out_min.or(self.retry_min)
    }

    /// Row `i` of kind `k` into the attempt. A field is read on the rows of the kinds whose lines carry it (the
    /// parser's `_rows`: `rt` a 'Building' line's, `status` a response's, `rid` and `latency` a 'done' line's...), and
    /// a first value only until there is one: on the parser's rows the same as reading every row, at a fraction of
    /// the reads.
    fn add(&mut self, e: &Events<'a>, i: usize, k: Kind, debug: bool) {
        let first = |have: &mut Option<&'a [u8]>, col: &'a dyn Strs| {
            if have.is_none() {
                *have = col.at(i);
            }
        };
        first(&mut self.thr, e.thread);
        self.first_seq = min(self.first_seq, e.seq.at(i));
        self.line_no = min(self.line_no, e.line_no.at(i));
        if k.outcome() {
            self.has_out = true;
            self.out_min = min(self.out_min, e.ts.at(i));
        }
        match k {
            Kind::Build | Kind::Options | Kind::Send => {
                if debug {
                    self.ts_start = min(self.ts_start, e.ts.at(i));
                }
                match k {
                    Kind::Build if self.rt.is_none() => self.rt = e.rt.at(i),
                    Kind::Options if self.max_tokens.is_none() => self.max_tokens = e.max_tokens.at(i),
                    _ => {}
                }
                if k != Kind::Build {
                    first(&mut self.url, e.url);
                }
            }
            Kind::Response | Kind::Httpx => {
                first(&mut self.url, e.url);
                if self.status.is_none() {
                    self.status = e.status.at(i);
                }
                if k == Kind::Response {
                    self.n_resp += 1;
                } else {
                    self.n_httpx += 1;
                }
            }
            Kind::Retrying => {
                first(&mut self.url, e.url);
                self.has_out = true;
                self.retried = true;
                self.retry_min = min(self.retry_min, e.ts.at(i));
                if self.delay_after.is_none() {
                    self.delay_after = e.delay.at(i);
                }
                if self.max_retries.is_none() {
                    self.max_retries = e.max_retries.at(i);
                }
            }
            Kind::Exc => {
                // the traceback's last exception class; HTTPStatusError adds nothing to the status
                if let Some(x) = e.err.at(i).filter(|x| *x != b"HTTPStatusError") {
                    self.exc = Some(x);
                }
            }
            Kind::Done => {
                if self.done.is_none() {
                    self.done = Some(i);
                }
                first(&mut self.rid, e.rid);
                if self.latency.is_none() {
                    self.latency = e.latency.at(i);
                }
            }
            _ => {}
        }
        if matches!(k, Kind::Timeout | Kind::ConnError) || k.last_error() {
            first(&mut self.err, e.err);
        }
        self.timed_out |= k == Kind::Timeout;
        self.n_to += (k == Kind::Timeout) as u32;
        self.gave_up_timeout |= matches!(k, Kind::RaiseTimeout | Kind::FinalTimeout);
        self.gave_up_conn |= matches!(k, Kind::RaiseConn | Kind::FinalConn);
        self.reraised |= k == Kind::Reraise;
    }
}

/// What a thread's rows so far say of the next one.
#[derive(Default)]
struct Thread {
    /// attempts started so far, and the current one (an index of the attempts)
    count: i64,
    current: Option<usize>,
    /// DEBUG: the previous row was a line before a send
    pre: bool,
    /// INFO: the last httpx / 'Retrying' / last-error row's kind, and the last status such a row gave
    endish: Option<Kind>,
    endish_status: Option<i64>,
}

/// The attempts of these rows (sorted by thread key and first row: `tid`, `att`, `tk`, `thr`, `first_seq`, ... as the
/// parser's `_attempts` names them), and each row's attempt (its index in that table; null: before its thread's first).
pub fn attempts(e: &Events<'_>, debug: bool, close: &Close) -> (Table, Table, bool) {
    let n = e.kind.len();
    let mut tids: HashMap<&[u8], usize> = HashMap::new();
    let mut threads: Vec<Thread> = Vec::new();
    let mut atts: Vec<Att> = Vec::with_capacity(n); // at most one a row: reserved, not touched
    let mut row_att: Vec<Option<usize>> = Vec::with_capacity(n);
    let mut tk: &[u8] = b"";
    let mut last: (&[u8], usize) = (b"", 0);
    for i in 0..n {
        let k = Kind::of(e.kind.at(i));
        // a traceback's line or a request's last error goes with the record before it (the key forward-filled)
        if !(k == Kind::Exc || k.last_error()) {
            match e.key.at(i) {
                Some(key) => tk = key,
                None if debug => tk = b"",
                None => {}
            }
        }
        // the thread of the row before, most often: no hashing then
        if tk != last.0 || i == 0 {
            let next = tids.len();
            last = (tk, *tids.entry(tk).or_insert(next));
        }
        let tid = last.1;
        if tid == threads.len() {
            threads.push(Thread::default());
        }
        let t = &mut threads[tid];
        let anchor = if debug {
            let a = k.pre() && !t.pre;
            t.pre = k.pre();
            a
        } else {
            let after_failure = t.endish == Some(Kind::Httpx) && t.endish_status.is_some_and(|s| s >= 400);
            if matches!(k, Kind::Httpx | Kind::Retrying) || k.last_error() {
                t.endish = Some(k);
                t.endish_status = e.status.at(i).or(t.endish_status);
            }
            matches!(k, Kind::Httpx) || k.last_error() || (k == Kind::Retrying && !after_failure)
        };
        if anchor {
            t.count += 1;
            atts.push(Att {
                tid,
                att: t.count,
                tk,
                ..Att::default()
            });
            t.current = Some(atts.len() - 1);
        }
        row_att.push(t.current);
        if let Some(a) = t.current {
            atts[a].add(e, i, k, debug);
        }
    }
    // sorted by thread key, then first row (polars sorts strings by their bytes, nulls first)
    // the thread keys' order once, then the attempts by (its rank, first row)
    let mut keys: Vec<(&[u8], usize)> = tids.into_iter().collect();
    keys.sort_unstable();
    let mut key_rank = vec![0usize; keys.len()];
    for (r, (_, tid)) in keys.iter().enumerate() {
        key_rank[*tid] = r;
    }
    let mut order: Vec<usize> = (0..atts.len()).collect();
    order.sort_unstable_by_key(|&a| (key_rank[atts[a].tid], atts[a].first_seq));
    let mut rank = vec![0i64; atts.len()];
    for (r, &a) in order.iter().enumerate() {
        rank[a] = r as i64;
    }
    let mut rows = I64Column::default();
    for a in row_att {
        rows.push(a.map(|a| rank[a]));
    }
    let mut per_row = Table::default();
    per_row.add("a", Column::I64(rows));
    let req = requests::requests(&atts, &order, close);
    let done_lines = req.done_lines;
    (table(e, &atts, &order, debug, req), per_row, done_lines)
}

fn table<'a>(
    e: &Events<'a>,
    atts: &[Att<'a>],
    order: &[usize],
    debug: bool,
    req: requests::Requests,
) -> Table {
    let ints = |f: &dyn Fn(&Att) -> Option<i64>| {
        let mut c = I64Column::default();
        order.iter().for_each(|&a| c.push(f(&atts[a])));
        c
    };
    let strs = |f: &dyn Fn(&Att<'a>) -> Option<&'a [u8]>| {
        let mut c = StrColumn::default();
        order.iter().for_each(|&a| c.push_opt(f(&atts[a])));
        Column::Str(c)
    };
    let bools = |f: &dyn Fn(&Att) -> bool| {
        let mut c = BoolColumn::default();
        order.iter().for_each(|&a| c.push(Some(f(&atts[a]))));
        Column::Bool(c)
    };
    let floats = |f: &dyn Fn(&Att) -> Option<f64>| {
        let mut c = F64Column::default();
        order.iter().for_each(|&a| c.push(f(&atts[a])));
        Column::F64(c)
    };
    let done = |a: &Att, f: &dyn Fn(usize) -> Option<i64>| a.done.and_then(f);
    let mut t = Table::default();
    t.add("tid", Column::I64(ints(&|a| Some(a.tid as i64))));
    t.add("att", Column::I64(ints(&|a| Some(a.att))));
    t.add("tk", strs(&|a| Some(a.tk)));
    t.add("thr", strs(&|a| a.thr));
    t.add("first_seq", Column::I64(ints(&|a| a.first_seq)));
    t.add("line_no", Column::I64(ints(&|a| a.line_no)));
    t.add(
        "ts_start",
        Column::Micros(ints(&|a| if debug { a.ts_start } else { None })),
    );
    t.add("ts_out", Column::Micros(ints(&|a| a.ts_out())));
    t.add("has_out", bools(&|a| a.has_out));
    t.add("rt", Column::I64(ints(&|a| a.rt)));
    t.add("url", strs(&|a| a.url));
    t.add("max_tokens", Column::I64(ints(&|a| a.max_tokens)));
    t.add("status", Column::I64(ints(&|a| a.status)));
    t.add("timed_out", bools(&|a| a.timed_out));
    t.add("exc", strs(&|a| a.exc));
    t.add("err", strs(&|a| a.err));
    t.add("retried", bools(&|a| a.retried));
    t.add("max_retries", Column::I64(ints(&|a| a.max_retries)));
    t.add("delay_after", floats(&|a| a.delay_after));
    t.add("gave_up_timeout", bools(&|a| a.gave_up_timeout));
    t.add("gave_up_conn", bools(&|a| a.gave_up_conn));
    t.add("reraised", bools(&|a| a.reraised));
    t.add("has_done", bools(&|a| a.done.is_some()));
    t.add("rid", strs(&|a| a.rid));
    t.add(
        "lab_status",
        Column::I64(ints(&|a| done(a, &|i| e.lab_status.at(i)))),
    );
    t.add("lab_err", strs(&|a| a.done.and_then(|i| e.lab_err.at(i))));
    t.add("latency", floats(&|a| a.latency));
    t.add("done_ts", Column::Micros(ints(&|a| done(a, &|i| e.ts.at(i)))));
    t.add("dup_resp", bools(&|a| a.n_resp > 1));
    t.add("dup_httpx", bools(&|a| a.n_httpx > 1));
    t.add("dup_to", bools(&|a| a.n_to > 1));
    t.add("lg", Column::I64(I64Column::all_valid(req.lg)));
    t.add("_g", Column::I64(I64Column::all_valid(req.g)));
    for (name, flags) in [("closed", req.closed), ("_open_end", req.open_end)] {
        let mut c = BoolColumn::default();
        flags.into_iter().for_each(|f| c.push(Some(f)));
        t.add(name, Column::Bool(c));
    }
    t
}

mod cells;
mod py;
mod requests;
pub use cells::{Nums, Strs};
pub use py::openai_attempts;
pub use requests::Close;

#[cfg(test)]
mod tests;
