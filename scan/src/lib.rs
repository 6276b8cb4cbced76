//! logscope's compiled scanner (the Python module `logscope._scan`): the bytes of a log into Arrow columns that
//! polars and pyarrow take without a copy. `lines` splits a block into lines; the formats moved into the core are
//! described as data beside their parser modules (parsers/*.py) and executed by `plan`.

pub mod attempts;
pub mod column;
pub mod convert;
pub mod events;
pub mod ffi;
pub mod jsonl;
pub mod kleene;
pub mod lab;
pub mod lines;
pub mod lookup;
pub mod output;
pub mod pairs;
pub mod plan;
pub mod records;
pub mod regexes;
pub mod spec;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

use crate::column::Table;

/// A table built by the scanner, handed to polars (`pl.DataFrame(batch)`) or pyarrow through the Arrow PyCapsule
/// protocol. Its buffers move to the consumer: a batch is taken once.
#[pyclass(module = "logscope._scan")]
pub struct Batch {
    table: Option<Table>,
    height: usize,
}

impl Batch {
    pub fn new(table: Table) -> Batch {
        let height = table.len();
        Batch {
            table: Some(table),
            height,
        }
    }
}

#[pymethods]
impl Batch {
    fn __len__(&self) -> usize {
        self.height
    }

    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &mut self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema; // the table is given as it was built
        let table = self
            .table
            .take()
            .ok_or_else(|| PyValueError::new_err("this batch was taken already"))?;
        let (schema, array) = ffi::export_table(table);
        let schema = PyCapsule::new_with_destructor(py, schema, Some(c"arrow_schema".into()), |s, _| {
            ffi::drop_schema(s)
        })?;
        let array = PyCapsule::new_with_destructor(py, array, Some(c"arrow_array".into()), |a, _| {
            ffi::drop_array(a)
        })?;
        PyTuple::new(py, [schema.into_any(), array.into_any()])
    }
}

/// The lines of a block of a log (`line_no` from `first + 1`, `line`), each cut to `max_chars` characters, and how many
/// were cut; None when the block is not valid UTF-8.
#[pyfunction]
fn split_lines(
    py: Python<'_>,
    data: PyBuffer<u8>,
    first: i64,
    cr: bool,
    max_chars: usize,
) -> PyResult<Option<(Batch, usize)>> {
    let text = data.to_vec(py)?; // bytes or a memoryview of them: one copy, which the lines' views then point into
    Ok(py
        .detach(move || lines::split(text, first, cr, max_chars))
        .map(|(t, cut)| (Batch::new(t), cut)))
}

/// A format's line kinds, compiled from their description (parsers/*.py and the files beside them; `spec`).
#[pyclass(module = "logscope._scan", frozen)]
pub struct Plan {
    plan: spec::Compiled,
}

#[pymethods]
impl Plan {
    #[new]
    fn new(kinds: &Bound<'_, PyAny>) -> PyResult<Plan> {
        Ok(Plan {
            plan: spec::compile(kinds)?,
        })
    }

    /// The kind of every line of a polars column (`kind`: its index, null when none matches) and the fields it gave.
    fn scan(&self, py: Python<'_>, lines: &Bound<'_, PyAny>) -> PyResult<Batch> {
        let lines = import_lines(lines)?;
        Ok(Batch::new(py.detach(move || self.plan.scan(&lines.slices()))))
    }

    /// Each line's kind, and the rows of the lines some kind matches (one per item of its list fields, `split`).
    fn rows(&self, py: Python<'_>, lines: &Bound<'_, PyAny>) -> PyResult<(Batch, Batch)> {
        let lines = import_lines(lines)?;
        let (kinds, rows) = py.detach(move || self.plan.rows(&lines.slices()));
        Ok((Batch::new(kinds), Batch::new(rows)))
    }

    /// How many of these lines some kind matches.
    fn count(&self, py: Python<'_>, lines: &Bound<'_, PyAny>) -> PyResult<usize> {
        let lines = import_lines(lines)?;
        Ok(py.detach(move || self.plan.count(&lines.slices())))
    }

    /// The records the kinds find in one line, leftmost first and none overlapping (records glued without their
    /// newlines), as strings.
    fn find_all(&self, line: &str) -> Vec<String> {
        plan::find_all(&self.plan.kinds, line.as_bytes())
            .into_iter()
            .map(|(a, b)| line[a..b].to_string())
            .collect()
    }

    /// Each line's first record: the longest start of it some kind matches, the first kind first (None: none does).
    fn first_records(&self, lines: Vec<String>) -> Vec<Option<String>> {
        lines
            .iter()
            .map(|line| {
                self.plan
                    .first_record(line.as_bytes())
                    .map(|end| line[..end].to_string())
            })
            .collect()
    }

    fn kinds(&self) -> Vec<String> {
        self.plan.kinds.iter().map(|k| k.name.clone()).collect()
    }
}

/// The lines of a polars Series (or any object that gives an Arrow stream of strings).
fn import_lines(obj: &Bound<'_, PyAny>) -> PyResult<ffi::Lines> {
    let capsule = obj.call_method0("__arrow_c_stream__")?;
    ffi::Lines::import(capsule.cast::<PyCapsule>()?).map_err(PyValueError::new_err)
}

#[pymodule]
fn _scan(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Batch>()?;
    m.add_class::<Plan>()?;
    m.add_class::<records::Records>()?;
    m.add_class::<regexes::Rules>()?;
    m.add_class::<regexes::Fields>()?;
    m.add_class::<jsonl::py::JsonKeys>()?;
    m.add_class::<events::OpenaiEvents>()?;
    m.add_function(wrap_pyfunction!(split_lines, m)?)?;
    m.add_function(wrap_pyfunction!(attempts::openai_attempts, m)?)?;
    m.add_function(wrap_pyfunction!(lab::lab_flush, m)?)?;
    Ok(())
}
