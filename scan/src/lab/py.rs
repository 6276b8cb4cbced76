//! `_scan.lab_flush`: the lab client's flush as the parser calls it (parsers/client_jsonl.py, `_lab_flush`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{Lookups, Reqs, Rows, flush};
use crate::Batch;
use crate::column::{BoolColumn, Column, Table};
use crate::records::{strings, values};

fn col<'py>(d: &Bound<'py, PyDict>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    d.get_item(name)?
        .ok_or_else(|| PyValueError::new_err(format!("no column {name:?}")))
}

type Phase = (i64, String, Option<i64>);
type Timeout = (i64, String, f64);

/// The attempts and requests of the pending rows' ready requests, and each row's carry flag (`carry`). `rows` and
/// `reqs`: polars Series by name, `Rows`' and `Reqs`' fields (times as int64 microseconds); `phases`: (file, phase,
/// concurrency) of each phase; `timeouts`: (file, client, timeout) of each client with one timeout so far.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn lab_flush(
    py: Python<'_>,
    rows: &Bound<'_, PyDict>,
    reqs: &Bound<'_, PyDict>,
    phases: Vec<Phase>,
    timeouts: Vec<Timeout>,
    last: bool,
    source: &str,
) -> PyResult<(Batch, Batch, Batch)> {
    let s = |d: &Bound<'_, PyDict>, c: &str| col(d, c).and_then(|v| strings(&v));
    let v = |d: &Bound<'_, PyDict>, c: &str| col(d, c).and_then(|v| values(&v));
    let (kind, rid, client, url, trace_id, span_id) = (
        s(rows, "kind")?,
        s(rows, "rid")?,
        s(rows, "client")?,
        s(rows, "url")?,
        s(rows, "trace_id")?,
        s(rows, "span_id")?,
    );
    let (file, seq, line_no, rc, t, status) = (
        v(rows, "_file")?,
        v(rows, "seq")?,
        v(rows, "line_no")?,
        v(rows, "rc")?,
        v(rows, "t")?,
        v(rows, "status")?,
    );
    let (phase, error) = (s(reqs, "phase")?, s(reqs, "error")?);
    let (send, end, latency, max_tokens, stream) = (
        v(reqs, "send")?,
        v(reqs, "end")?,
        v(reqs, "latency")?,
        v(reqs, "max_tokens")?,
        v(reqs, "stream")?,
    );
    let (output_tokens, ttft, timeout, max_retries) = (
        v(reqs, "output_tokens")?,
        v(reqs, "ttft")?,
        v(reqs, "timeout")?,
        v(reqs, "max_retries")?,
    );
    let mut look = Lookups::default();
    for (f, p, c) in phases {
        look.concurrency.entry(f).or_default().insert(p.into_bytes(), c);
    }
    for (f, c, t) in timeouts {
        look.timeout.entry(f).or_default().insert(c.into_bytes(), t);
    }
    let source = source.as_bytes().to_vec();
    let out = py.detach(move || {
        let r = Rows {
            kind: &kind,
            file: &file,
            rid: &rid,
            seq: &seq,
            line_no: &line_no,
            client: &client,
            url: &url,
            trace_id: &trace_id,
            span_id: &span_id,
            rc: &rc,
            t: &t,
            status: &status,
        };
        let q = Reqs {
            phase: &phase,
            send: &send,
            end: &end,
            error: &error,
            latency: &latency,
            max_tokens: &max_tokens,
            stream: &stream,
            output_tokens: &output_tokens,
            ttft: &ttft,
            timeout: &timeout,
            max_retries: &max_retries,
        };
        (r.even() && q.even()).then(|| flush(&r, &q, &look, last, &source))
    });
    let f = out.ok_or_else(|| PyValueError::new_err("the columns differ in length"))?;
    let mut carry = BoolColumn::default();
    f.carry.iter().for_each(|&c| carry.push(Some(c)));
    let mut t = Table::default();
    t.add("carry", Column::Bool(carry));
    Ok((Batch::new(f.attempts), Batch::new(f.requests), Batch::new(t)))
}
