//! The attempts' logical requests (what `_counted`, `_runs` and `_closed` of parsers/openai_client.py computed with
//! polars, kept in tests/openai_attempts_before.py): over the attempts sorted by thread and first row, a thread's
//! attempts are one run, and within it a request starts at an attempt with retries_taken=0 (without that counter: one
//! not following a 'Retrying' attempt) or after a 'done' line. A request is closed when a 'done' line named it, its
//! thread moved on, or its last attempt ended it (2xx/3xx, Raising / Re-raising), and, in a log with 'done' lines,
//! not before `wait` past its last outcome (the newest outcome of the chunk the clock).

use super::Att;

use crate::kleene::{and, or};

/// How requests close in this call: the log has shown 'done' lines before, this is its end (`last`), how long a
/// request waits for its 'done' line (microseconds).
pub struct Close {
    pub done_lines: bool,
    pub last: bool,
    pub wait: i64,
}

/// Per attempt (in the sorted order): its request's number within the thread (`lg`), its request's run (`g`, from 1),
/// whether the request is closed, and whether only because the log ended (`open_end`).
pub struct Requests {
    pub lg: Vec<i64>,
    pub g: Vec<i64>,
    pub closed: Vec<bool>,
    pub open_end: Vec<bool>,
    /// the log has shown 'done' lines (before or in this call)
    pub done_lines: bool,
}

pub(super) fn requests(atts: &[Att], order: &[usize], close: &Close) -> Requests {
    let m = order.len();
    let (mut lg, mut g) = (vec![0i64; m], vec![0i64; m]);
    let mut run = 0i64;
    for (j, &a) in order.iter().enumerate() {
        let at = &atts[a];
        let prev = (j > 0).then(|| &atts[order[j - 1]]).filter(|p| p.tid == at.tid);
        let new = match at.rt {
            Some(rt) => rt == 0,
            None => !prev.is_some_and(|p| p.retried),
        };
        let n = (new || prev.is_some_and(|p| p.done.is_some())) as i64;
        lg[j] = if prev.is_some() { lg[j - 1] + n } else { n };
        if prev.is_none() || lg[j] != lg[j - 1] {
            run += 1;
        }
        g[j] = run;
    }
    // per request: its last attempt's end, its newest outcome, a 'done' line; per thread: its last request
    let runs = run as usize;
    let (mut ended, mut out, mut done) = (vec![None; runs], vec![None; runs], vec![false; runs]);
    let threads = atts.iter().map(|a| a.tid + 1).max().unwrap_or(0);
    let mut last_lg = vec![i64::MIN; threads];
    for (j, &a) in order.iter().enumerate() {
        let (at, r) = (&atts[a], g[j] as usize - 1);
        let ok = at.status.map(|s| (200..=399).contains(&s));
        let by = [at.gave_up_timeout, at.gave_up_conn, at.reraised]
            .into_iter()
            .fold(and(ok, Some(!at.retried)), |k, b| or(k, Some(b)));
        ended[r] = by;
        out[r] = out[r].max(at.ts_out());
        done[r] |= at.done.is_some();
        last_lg[at.tid] = last_lg[at.tid].max(lg[j]);
    }
    let done_lines = close.done_lines || atts.iter().any(|a| a.done.is_some());
    let newest = atts.iter().filter_map(Att::ts_out).max();
    let (mut closed, mut open_end) = (Vec::with_capacity(m), Vec::with_capacity(m));
    for (j, &a) in order.iter().enumerate() {
        let r = g[j] as usize - 1;
        let mut end = ended[r];
        if done_lines {
            end = match newest {
                Some(t) => and(end, out[r].map(|o| o < t - close.wait)),
                None => Some(false),
            };
        }
        let c = done[r] || lg[j] < last_lg[atts[a].tid] || end == Some(true);
        closed.push(c || close.last);
        open_end.push(close.last && !c);
    }
    Requests {
        lg,
        g,
        closed,
        open_end,
        done_lines,
    }
}
