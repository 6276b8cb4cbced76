//! A parser's regexes compiled once and run over a few polars columns (parsers/_vllm_events.py: vLLM's event kinds and
//! the fields read off them). polars compiles a pattern again whenever it has left its small cache, and a chunk of a
//! vLLM log uses more patterns than the cache holds: each chunk paid for every event pattern's compilation (about a
//! tenth of the parser's time), though the rows they ran on are a few dozen.
//!
//! The engine is the `regex` crate, as in polars, on the strings as `str`: `first` gives what a chain of
//! `pl.when(col.str.contains(p)).then(i)` gives (the first rule that matches; a null string matches none), `extract`
//! what `col.str.extract(p)` gives (the first match's group 1; null when nothing matches or the group took no part).

use memchr::memmem;
use regex::Regex;

use crate::column::{Column, I64Column, StrColumn, Table};

/// A rule: its pattern, the column it reads, and literals one of which every match holds (the pattern is not run on a
/// value that holds none of them).
pub struct Rule {
    pub rx: Regex,
    pub col: usize,
    pub lits: Vec<memmem::Finder<'static>>,
}

impl Rule {
    fn matches(&self, v: Option<&[u8]>) -> bool {
        v.is_some_and(|b| self.lits.iter().any(|f| f.find(b).is_some()))
            && text(v).is_some_and(|s| self.rx.is_match(s))
    }
}

/// The first rule that matches its column's value, for each row (`cols[c][row]`).
pub fn first(rules: &[Rule], cols: &[Vec<Option<&[u8]>>]) -> I64Column {
    let n = cols.first().map_or(0, Vec::len);
    let mut out = I64Column::default();
    (0..n).for_each(|row| {
        let hit = rules.iter().position(|r| r.matches(cols[r.col][row]));
        out.push(hit.map(|i| i as i64));
    });
    out
}

/// One pattern's group 1 in every row of its column, null in the rows whose `kind` is not one of `kinds` (polars'
/// `pl.when(kind.is_in(kinds)).then(col.str.extract(p))`).
pub struct Field {
    pub name: String,
    pub rx: Regex,
    pub col: usize,
    pub kinds: Vec<Vec<u8>>,
}

pub fn extract(fields: &[Field], cols: &[Vec<Option<&[u8]>>], kind: &[Option<&[u8]>]) -> Table {
    let mut table = Table::default();
    for f in fields {
        let mut out = StrColumn::default();
        for (row, k) in kind.iter().enumerate() {
            let wanted = k.is_some_and(|k| f.kinds.iter().any(|w| w == k));
            let got = wanted
                .then(|| text(cols[f.col][row]))
                .flatten()
                .and_then(|s| f.rx.captures(s))
                .and_then(|c| c.get(1));
            out.push_opt(got.map(|m| m.as_str().as_bytes()));
        }
        table.add(&f.name, Column::Str(out));
    }
    table
}

/// A value as `str` (polars' strings are UTF-8; a value that is not reads as null).
fn text(v: Option<&[u8]>) -> Option<&str> {
    v.and_then(|b| std::str::from_utf8(b).ok())
}

// ---------------------------------------------------------------------------------------------------------------
// the Python classes (`logscope._scan.Rules`, `logscope._scan.Fields`)

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::Batch;
use crate::records::strings;

fn compile(pattern: &str) -> PyResult<Regex> {
    Regex::new(pattern).map_err(|e| PyValueError::new_err(format!("{pattern:?}: {e}")))
}

fn same_length(cols: &[crate::ffi::Lines]) -> PyResult<Vec<Vec<Option<&[u8]>>>> {
    let got: Vec<_> = cols.iter().map(crate::ffi::Lines::values).collect();
    if got.windows(2).any(|w| w[0].len() != w[1].len()) {
        return Err(PyValueError::new_err("the columns differ in length"));
    }
    Ok(got)
}

/// Rules tried in order, each a pattern over one of the columns given (`(column index, pattern, literals)`).
#[pyclass(module = "logscope._scan", frozen)]
pub struct Rules {
    // in a Vec (on the heap): memchr's finders hold 32-byte aligned vectors, a Python object's memory is 16-byte aligned
    rules: Vec<Rule>,
}

#[pymethods]
impl Rules {
    #[new]
    fn new(rules: Vec<(usize, String, Vec<String>)>) -> PyResult<Rules> {
        let rules = rules
            .into_iter()
            .map(|(col, pat, lits)| {
                Ok(Rule {
                    rx: compile(&pat)?,
                    col,
                    lits: lits
                        .iter()
                        .map(|l| memmem::Finder::new(l.as_bytes()).into_owned())
                        .collect(),
                })
            })
            .collect::<PyResult<_>>()?;
        Ok(Rules { rules })
    }

    /// Each row's first matching rule (`rule`: its index, null when none matches), over polars string Series.
    fn first(&self, py: Python<'_>, columns: Vec<Bound<'_, PyAny>>) -> PyResult<Batch> {
        let cols = columns.iter().map(strings).collect::<PyResult<Vec<_>>>()?;
        if self.rules.iter().any(|r| r.col >= cols.len()) {
            return Err(PyValueError::new_err("a rule reads a column not given"));
        }
        let got = same_length(&cols)?;
        let rule = py.detach(|| first(&self.rules, &got));
        let mut table = Table::default();
        table.add("rule", Column::I64(rule));
        Ok(Batch::new(table))
    }
}

/// Fields read by patterns, each `(name, column index, kinds, pattern)`.
#[pyclass(module = "logscope._scan", frozen)]
pub struct Fields {
    fields: Vec<Field>,
}

#[pymethods]
impl Fields {
    #[new]
    fn new(fields: Vec<(String, usize, Vec<String>, String)>) -> PyResult<Fields> {
        let fields = fields
            .into_iter()
            .map(|(name, col, kinds, pat)| {
                Ok(Field {
                    name,
                    rx: compile(&pat)?,
                    col,
                    kinds: kinds.into_iter().map(String::into_bytes).collect(),
                })
            })
            .collect::<PyResult<_>>()?;
        Ok(Fields { fields })
    }

    /// Every field's text (group 1 of its pattern) in the rows of its kinds, over polars string Series: `columns` the
    /// ones the fields read, `kind` each row's kind.
    fn extract(
        &self,
        py: Python<'_>,
        columns: Vec<Bound<'_, PyAny>>,
        kind: &Bound<'_, PyAny>,
    ) -> PyResult<Batch> {
        let cols = columns.iter().map(strings).collect::<PyResult<Vec<_>>>()?;
        if self.fields.iter().any(|f| f.col >= cols.len()) {
            return Err(PyValueError::new_err("a field reads a column not given"));
        }
        let kind = strings(kind)?;
        let got = same_length(&cols)?;
        let kind = kind.values();
        if got.first().is_some_and(|c| c.len() != kind.len()) {
            return Err(PyValueError::new_err("the columns differ in length"));
        }
        Ok(Batch::new(py.detach(|| extract(&self.fields, &got, &kind))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rx(p: &str) -> Regex {
        Regex::new(p).unwrap()
    }

    #[test]
    fn the_first_matching_rule_over_its_own_column() {
        // real vLLM messages (lab spike, vllm-public 09): a rule over `detail` sees the second column only
        let msg: Vec<Option<&[u8]>> = vec![
            Some(b"Started server process [3887]"),
            Some(b"vLLM API server version 0.11.0"),
            None,
            Some(b"Application startup complete."),
        ];
        let detail = msg.clone();
        let rule = |col, p, lit: &str| Rule {
            rx: rx(p),
            col,
            lits: vec![memmem::Finder::new(lit.as_bytes()).into_owned()],
        };
        let rules = [
            rule(0, r"^Started server process \[\d+\]", "Started server process ["),
            rule(1, r"version \S", "version "),
            rule(0, r"^Application", "Application"),
        ];
        let got = first(&rules, &[msg, detail]);
        assert_eq!(got.values, vec![0, 1, 0, 2]);
        assert!(got.validity.is_valid(1) && !got.validity.is_valid(2));
    }

    #[test]
    fn a_fields_group_in_the_rows_of_its_kinds() {
        // real lines (vllm-public, the lab): the group runs on over the comma after the number, as polars' did
        let msg: Vec<Option<&[u8]>> = vec![
            Some(b"# GPU blocks: 1478, # CPU blocks: 2048"),
            Some(b"# GPU blocks: 1478, # CPU blocks: 2048"),
            Some(b"KV cache size: 42,656 tokens"),
        ];
        let kind: Vec<Option<&[u8]>> = vec![Some(b"capacity"), Some(b"error"), Some(b"capacity")];
        let fields = [Field {
            name: "gpu".into(),
            rx: rx(r"blocks: ([\d,]+)"),
            col: 0,
            kinds: vec![b"capacity".to_vec()],
        }];
        let t = extract(&fields, &[msg], &kind);
        let Column::Str(c) = &t.columns[0] else { panic!() };
        assert_eq!(c.get(0), b"1478,");
        assert!(!c.validity.is_valid(1) && !c.validity.is_valid(2));
    }
}
