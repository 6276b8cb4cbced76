//! `_scan.JsonKeys`: the keys a parser reads of its JSON lines, compiled once (parsers/client_jsonl.py).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::{Keys, decode};
use crate::Batch;
use crate::records::strings;

#[pyclass(module = "logscope._scan", frozen)]
pub struct JsonKeys {
    keys: Keys,
}

#[pymethods]
impl JsonKeys {
    /// `keys` read of every line; a record whose `kind_key` holds one of `narrow_kinds` and whose text matches `hint`
    /// gives only `narrow_keys`.
    #[new]
    fn new(
        keys: Vec<String>,
        kind_key: &str,
        narrow_kinds: Vec<String>,
        narrow_keys: Vec<String>,
        hint: &str,
    ) -> PyResult<JsonKeys> {
        let pos = |k: &str| keys.iter().position(|n| n == k);
        if let Some(k) = narrow_keys.iter().find(|k| pos(k).is_none()) {
            return Err(PyValueError::new_err(format!("narrow key {k:?} is not a key")));
        }
        let hint =
            regex::bytes::Regex::new(hint).map_err(|e| PyValueError::new_err(format!("{hint:?}: {e}")))?;
        let (kind, narrow) = (
            pos(kind_key),
            keys.iter().map(|k| narrow_keys.contains(k)).collect(),
        );
        Ok(JsonKeys {
            keys: Keys::new(
                keys.into_iter().map(String::into_bytes).collect(),
                kind,
                narrow_kinds.into_iter().map(String::into_bytes).collect(),
                narrow,
                Some(hint),
            ),
        })
    }

    /// `row` (the index of the line) and each key's text, for the lines of a polars string Series that are one JSON
    /// object each and decode.
    fn decode(&self, py: Python<'_>, lines: &Bound<'_, PyAny>) -> PyResult<Batch> {
        let lines = strings(lines)?;
        let keys = &self.keys;
        let table = py.detach(move || decode(keys, (0..lines.len()).map(|i| lines.at(i))));
        Ok(Batch::new(table))
    }
}
