//! `_scan.OpenaiEvents`: the event rows' pass as the parser calls it (parsers/_openai_lines.py, `_events`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use regex::bytes::Regex;

use super::{Patterns, STR, Scanned, events};
use crate::Batch;
use crate::attempts::Strs;
use crate::column::{Column, Table};
use crate::ffi::{Lines, Values};
use crate::records::{strings, values};

#[pyclass(module = "logscope._scan", frozen)]
pub struct OpenaiEvents {
    p: Patterns,
}

fn regex(p: &Bound<'_, PyDict>, name: &str) -> PyResult<Regex> {
    let v: String = p
        .get_item(name)?
        .ok_or_else(|| PyValueError::new_err(format!("no pattern {name:?}")))?
        .extract()?;
    Regex::new(&v).map_err(|e| PyValueError::new_err(e.to_string()))
}

#[pymethods]
impl OpenaiEvents {
    /// The parser's patterns by name (`level`, `console`, `final_words`, `final_timeout`, `final_conn`,
    /// `final_status`, `exc`, `not_thread`, `err_class`).
    #[new]
    fn new(patterns: &Bound<'_, PyDict>) -> PyResult<OpenaiEvents> {
        let r = |name| regex(patterns, name);
        Ok(OpenaiEvents {
            p: Patterns {
                level: r("level")?,
                console: r("console")?,
                final_words: r("final_words")?,
                final_timeout: r("final_timeout")?,
                final_conn: r("final_conn")?,
                final_status: r("final_status")?,
                exc: r("exc")?,
                not_thread: r("not_thread")?,
                err_class: r("err_class")?,
            },
        })
    }

    /// A chunk's event rows (`cols`: polars Series by name: the lines and the scan's columns, `STR` and `kind`),
    /// each line's recognition, whether a traceback is open at its end (None: no record in the chunk) and how many
    /// lines other loggers wrote.
    fn events(
        &self,
        py: Python<'_>,
        cols: &Bound<'_, PyDict>,
        in_exc: bool,
    ) -> PyResult<(Batch, Batch, Option<bool>, i64)> {
        let col = |name: &str| {
            cols.get_item(name)?
                .ok_or_else(|| PyValueError::new_err(format!("no column {name:?}")))
        };
        let s: Vec<Lines> = STR
            .iter()
            .map(|c| col(c).and_then(|v| strings(&v)))
            .collect::<PyResult<_>>()?;
        let kind: Values = col("kind").and_then(|v| values(&v))?;
        let n = s[0].len();
        if s.iter().any(|c| c.len() != n) || kind.len() != n {
            return Err(PyValueError::new_err("the columns differ in length"));
        }
        let p = &self.p;
        let got = py.detach(move || {
            let c = Scanned {
                s: std::array::from_fn(|j| &s[j] as &dyn Strs),
                kind: &kind,
            };
            events(&c, p, in_exc)
        });
        let mut ok = Table::default();
        ok.add("ok", Column::Bool(got.ok));
        Ok((Batch::new(got.events), Batch::new(ok), got.in_exc, got.other))
    }
}
