//! `_scan.openai_attempts`: the attempts pass as the parser calls it (parsers/openai_client.py, `_assemble`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{Close, Events, attempts};
use crate::Batch;
use crate::records::{strings, values};

/// The attempts of a chunk's event rows (`cols`: polars Series by name, `Events`' fields; `ts` as int64 microseconds)
/// and each row's attempt, with each attempt's logical request (`requests`) closed as `done_lines`, `last` and `wait_us`
/// say (`Close`); and whether the log has shown 'done' lines.
#[pyfunction]
pub fn openai_attempts(
    py: Python<'_>,
    cols: &Bound<'_, PyDict>,
    debug: bool,
    done_lines: bool,
    last: bool,
    wait_us: i64,
) -> PyResult<(Batch, Batch, bool)> {
    let close = Close {
        done_lines,
        last,
        wait: wait_us,
    };
    let col = |name: &str| {
        cols.get_item(name)?
            .ok_or_else(|| PyValueError::new_err(format!("no column {name:?}")))
    };
    let s =
        ["kind", "key", "thread", "url", "err", "rid", "lab_err"].map(|c| col(c).and_then(|v| strings(&v)));
    let v = [
        "seq",
        "line_no",
        "ts",
        "rt",
        "status",
        "max_retries",
        "max_tokens",
        "lab_status",
        "latency",
        "delay",
    ]
    .map(|c| col(c).and_then(|v| values(&v)));
    let [kind, key, thread, url, err, rid, lab_err] = s;
    let (kind, key, thread, url, err, rid, lab_err) = (kind?, key?, thread?, url?, err?, rid?, lab_err?);
    let [
        seq,
        line_no,
        ts,
        rt,
        status,
        max_retries,
        max_tokens,
        lab_status,
        latency,
        delay,
    ] = v;
    let nums = [
        seq?,
        line_no?,
        ts?,
        rt?,
        status?,
        max_retries?,
        max_tokens?,
        lab_status?,
    ];
    let (latency, delay) = (latency?, delay?);
    let (t, rows, done_lines) = py
        .detach(move || {
            let [seq, line_no, ts, rt, status, max_retries, max_tokens, lab_status] = &nums;
            let e = Events {
                kind: &kind,
                key: &key,
                thread: &thread,
                url: &url,
                err: &err,
                rid: &rid,
                lab_err: &lab_err,
                seq,
                line_no,
                ts,
                rt,
                status,
                max_retries,
                max_tokens,
                lab_status,
                latency: &latency,
                delay: &delay,
            };
            e.even().then(|| attempts(&e, debug, &close))
        })
        .ok_or_else(|| PyValueError::new_err("the columns differ in length"))?;
    Ok((Batch::new(t), Batch::new(rows), done_lines))
}
