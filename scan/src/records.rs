//! vLLM's record logic (parsers/_vllm_records.py): one sequential pass over a chunk's rows, already cut by the header
//! scan, that says of each row whether it continues the record before it (a multi-line record, a raw traceback, a
//! hard-wrapped line), which record it is in, what kind of row it is (traceback, noise, unknown) and whether it is
//! recognised, with the state carried to the next chunk. A cumulative sum over polars columns cannot carry "the
//! previous row's record was open" from row to row; this pass does, in one walk.
//!
//! The flags follow the polars expressions they replaced (kept in tests/vllm_classify_before.py) with their nulls:
//! `K` is a Kleene boolean (None: null), and `and` / `or` / `not` are polars' `&`, `|` and `~` on them.

use memchr::memmem;
use regex::bytes::Regex;

use crate::column::{BoolColumn, Column, I64Column, Table};

use crate::kleene::{K, and, not, or};

/// The patterns and literals the pass tests rows with: they live with the parser (parsers/_vllm_lines.py,
/// parsers/_vllm_events.py), compiled once.
pub struct Rules {
    /// a traceback-shaped line (`_TB`), a line only a traceback prints (`_TB_STRONG`), third-party output (`_NOISE`)
    pub tb: Regex,
    pub strong: Regex,
    pub noise: Regex,
    /// the stream is shutting down: a message starting with one of `stop_leads` or holding `stop_any`; starting
    /// again: one starting with one of `start_leads`
    pub stop_leads: Vec<Vec<u8>>,
    pub stop_any: memmem::Finder<'static>,
    pub start_leads: Vec<Vec<u8>>,
    /// a request's lifecycle line (`_REQUEST_LINE`), and the words that make a record an event (`_EVENT_KW`), both
    /// tested on a record's first row only (parsers/_vllm_events.py)
    pub request_line: Regex,
    pub event_words: Regex,
}

/// What a chunk leaves for the next (`state["prev"]`, `state["rec"]`, ... in the parser).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Carried {
    /// the last row's byte length, its record still open, its CR, its record's key, its record's start recognised
    pub plen: i64,
    pub open: bool,
    pub cr: bool,
    pub key: Option<Vec<u8>>,
    pub rec_ok: bool,
    /// the last record's id, whether any line so far ended with CR, whether the stream is shutting down
    pub rec: i64,
    pub has_cr: bool,
    pub stopping: bool,
}

/// A chunk's rows as the header scan cut them.
pub struct Rows<'a> {
    pub msg: Vec<Option<&'a [u8]>>,
    pub lvl: Vec<Option<&'a [u8]>>,
    pub uv: Vec<Option<&'a [u8]>>,
    pub pyname: Vec<Option<&'a [u8]>>,
    pub key: Vec<Option<&'a [u8]>>,
    pub plen: Vec<Option<i64>>,
    pub cr: Vec<Option<i64>>,
    pub joined: Vec<Option<i64>>,
}

fn flag(v: Option<i64>) -> K {
    v.map(|x| x != 0)
}

fn starts_any(m: &[u8], leads: &[Vec<u8>]) -> bool {
    leads.iter().any(|l| m.starts_with(l))
}

/// Python's / polars' `strip_chars() == ""`: only Unicode white space.
fn blank(m: &[u8]) -> bool {
    std::str::from_utf8(m).is_ok_and(|s| s.trim().is_empty())
}

const FLAT_CALL: &[u8] = b"(most recent call last)";
const FLAT_LINE: &[u8] = b"\", line ";
const FLAT_IN: &[u8] = b", in ";

fn holds(m: &[u8], lit: &[u8]) -> bool {
    memmem::find(m, lit).is_some()
}

#[derive(Default)]
struct Out {
    uvr: BoolColumn,
    noise: BoolColumn,
    tbs: BoolColumn,
    other: BoolColumn,
    strong: BoolColumn,
    cont: BoolColumn,
    wrap: BoolColumn,
    ok: BoolColumn,
    stopping: BoolColumn,
    rec: Vec<i64>,
    lead: BoolColumn,
    evt: BoolColumn,
    bare: BoolColumn,
}

/// Each row's flags and record id, and the state after the chunk (`prev`: the state before it; `prev.key` is None and
/// the row fields default when the stream has no row yet).
pub fn classify(rules: &Rules, rows: &Rows<'_>, prev: &Carried) -> (Table, Carried) {
    let n = rows.msg.len();
    let has_cr = prev.has_cr || rows.cr.contains(&Some(1));
    let mut o = Out::default();
    let mut next = prev.clone();
    next.has_cr = has_cr;
    // the previous row's values (the carried state's for the first row)
    let (mut p_plen, mut p_open0, mut p_open1, mut p_cr) =
        (Some(prev.plen), prev.open, Some(prev.open), Some(prev.cr));
    // `_ffk`, the key of the record the previous row belongs to, forward-filled within the chunk only (the carried key
    // stands in for it until the chunk has one)
    let mut ffk: Option<&[u8]> = None;
    let mut rec = prev.rec;
    let mut rec_ok_chunk: Option<bool> = None; // the last non-null `rec_ok` start of this chunk
    let mut life: Option<bool> = None; // shutting down (true) or started again (false), within this chunk
    let (mut last_open, mut last_rec_ok) = (prev.open, prev.rec_ok);
    for i in 0..n {
        let msg = rows.msg[i];
        let lvl = rows.lvl[i];
        let lvl_null = lvl.is_none();
        let uv_null = rows.uv[i].is_none();
        let joined = flag(rows.joined[i]);
        // traceback-shaped: tested only where it decides something (rows without a header, a repeated header)
        let mut tbm_memo: Option<K> = None;
        let mut tbm = || *tbm_memo.get_or_insert_with(|| msg.map(|m| rules.tb.is_match(m)));
        let noise: K = if lvl_null && uv_null {
            let otel = rows.pyname[i].is_some_and(|p| holds(p, b"opentelemetry"));
            or(msg.map(|m| rules.noise.is_match(m)), Some(otel))
        } else {
            Some(false)
        };
        let uvr = lvl_null && !uv_null;
        let raw = and(
            and(and(Some(lvl_null), Some(!uvr)), not(noise)),
            and(Some(rows.pyname[i].is_none()), not(joined)),
        );
        let raw_tbm = if raw == Some(false) { None } else { tbm() }; // `raw & x` is false whatever x
        // a raw traceback flattened onto one line (only raw rows are searched)
        let flat = match (and(raw, not(raw_tbm)), msg) {
            (Some(true), Some(m)) => holds(m, FLAT_CALL) || (holds(m, FLAT_LINE) && holds(m, FLAT_IN)),
            _ => false,
        };
        let tbs = and(raw, or(raw_tbm, Some(flat)));
        let other = and(and(raw, not(raw_tbm)), Some(!flat));
        let in_lvl = |names: &[&[u8]]| lvl.map(|l| names.contains(&l));
        let open0 = or(or(in_lvl(&[b"WARNING", b"ERROR", b"CRITICAL"]), noise), tbs).unwrap_or(false);
        let long_before = p_plen.map(|x| x >= 80);
        // a hard-wrapped paste: an unknown line right after a long line of an open record continues it
        let wrap1 = and(and(other, Some(p_open0)), long_before);
        let open1 = or(Some(open0), wrap1);
        let wrap = and(and(other, p_open1), long_before);
        let key = rows.key[i];
        let prev_key = ffk.or(prev.key.as_deref());
        let same_key = matches!((key, prev_key), (Some(a), Some(b)) if a == b);
        let vcont = if !same_key {
            Some(false)
        } else if has_cr {
            p_cr
        } else {
            let err = in_lvl(&[b"ERROR", b"CRITICAL"]);
            if err == Some(true) { err } else { or(err, tbm()) }
        };
        let cont = or(or(or(vcont, and(tbs, p_open1)), wrap), joined).unwrap_or(false);
        let wrap = wrap.unwrap_or(false);
        let strong = if tbs == Some(true) {
            or(msg.map(|m| rules.strong.is_match(m)), Some(flat))
        } else {
            Some(false)
        };
        if !cont {
            rec += 1;
        }
        let start_ok = or(or(Some(!lvl_null), Some(uvr)), or(noise, strong));
        if !cont && start_ok.is_some() {
            rec_ok_chunk = start_ok;
        }
        let rec_ok = rec_ok_chunk.unwrap_or(prev.rec_ok);
        let blank_row = if and(Some(lvl_null), not(joined)) == Some(true) {
            msg.map(blank)
        } else {
            Some(false)
        };
        let ok = or(
            or(Some(!lvl_null || uvr), or(noise, blank_row)),
            and(or(tbs, Some(wrap)), Some(rec_ok)),
        );
        if let Some(m) = msg {
            if starts_any(m, &rules.stop_leads) || rules.stop_any.find(m).is_some() {
                life = Some(true);
            } else if starts_any(m, &rules.start_leads) {
                life = Some(false);
            }
        }
        // the key the next row compares with: a uvicorn or noise row ends a record whatever its header
        let ffk_here: Option<&[u8]> = if or(Some(uvr), noise) == Some(true) {
            Some(b"~")
        } else {
            key
        };
        if ffk_here.is_some() {
            ffk = ffk_here;
        }
        o.uvr.push(Some(uvr));
        o.noise.push(noise);
        o.tbs.push(tbs);
        o.other.push(other);
        o.strong.push(strong);
        o.cont.push(Some(cont));
        o.wrap.push(Some(wrap));
        o.ok.push(ok);
        o.stopping.push(Some(life.unwrap_or(prev.stopping)));
        o.rec.push(rec);
        // a record's first row, not a request line (most of a log's rows), and whether it makes its record an event
        // by itself: an error, a traceback, or a keyword (`_events` adds a record of several rows)
        let lead = !cont && msg.is_some_and(|m| !rules.request_line.is_match(m));
        let evt = lead
            && (in_lvl(&[b"ERROR", b"CRITICAL"]) == Some(true)
                || tbs == Some(true)
                || msg.is_some_and(|m| rules.event_words.is_match(m)));
        o.lead.push(Some(lead));
        o.evt.push(Some(evt));
        // a record's first line without any header, not a raw traceback (Python prints those without one): a repair
        let bare = and(
            and(or(other, and(tbs, not(strong))), Some(!cont)),
            msg.map(|m| !blank(m)),
        );
        o.bare.push(bare);
        p_plen = rows.plen[i];
        p_open0 = open0;
        p_open1 = open1;
        p_cr = flag(rows.cr[i]);
        last_open = open1.unwrap_or(false);
        last_rec_ok = rec_ok;
    }
    if n > 0 {
        next.plen = rows.plen[n - 1].unwrap_or(0);
        next.open = last_open;
        next.cr = rows.cr[n - 1] == Some(1);
        next.key = ffk.map(<[u8]>::to_vec);
        next.rec_ok = last_rec_ok;
        next.rec = rec;
        next.stopping = life.unwrap_or(prev.stopping);
    }
    let mut t = Table::default();
    t.add("uvr", Column::Bool(o.uvr));
    t.add("noise", Column::Bool(o.noise));
    t.add("tbs", Column::Bool(o.tbs));
    t.add("other", Column::Bool(o.other));
    t.add("strong", Column::Bool(o.strong));
    t.add("cont", Column::Bool(o.cont));
    t.add("wrap", Column::Bool(o.wrap));
    t.add("ok", Column::Bool(o.ok));
    t.add("stopping", Column::Bool(o.stopping));
    t.add("rec", Column::I64(I64Column::all_valid(o.rec)));
    t.add("lead", Column::Bool(o.lead));
    t.add("evt", Column::Bool(o.evt));
    t.add("bare", Column::Bool(o.bare));
    (t, next)
}

// ---------------------------------------------------------------------------------------------------------------
// the Python class (`logscope._scan.Records`)

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::Batch;
use crate::ffi::{Lines, Values};

/// The carried state as Python holds it: (plen, open, cr, key, rec_ok, rec, has_cr, stopping).
type State = (i64, bool, bool, Option<String>, bool, i64, bool, bool);

/// vLLM's record pass, its patterns compiled once (parsers/_vllm_records.py).
#[pyclass(module = "logscope._scan", frozen)]
pub struct Records {
    // boxed: memchr's finders hold 32-byte aligned vectors, and a Python object's memory is only 16-byte aligned
    rules: Box<Rules>,
}

fn stream<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyCapsule>> {
    Ok(obj.call_method0("__arrow_c_stream__")?.cast_into::<PyCapsule>()?)
}

pub(crate) fn strings(obj: &Bound<'_, PyAny>) -> PyResult<Lines> {
    Lines::import(&stream(obj)?).map_err(PyValueError::new_err)
}

pub(crate) fn values(obj: &Bound<'_, PyAny>) -> PyResult<Values> {
    Values::import(&stream(obj)?).map_err(PyValueError::new_err)
}

fn regex(pattern: &str) -> PyResult<Regex> {
    Regex::new(pattern).map_err(|e| PyValueError::new_err(e.to_string()))
}

#[pymethods]
impl Records {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        tb: &str,
        strong: &str,
        noise: &str,
        stop_leads: Vec<String>,
        stop_any: &str,
        start_leads: Vec<String>,
        request_line: &str,
        event_words: &str,
    ) -> PyResult<Records> {
        Ok(Records {
            rules: Box::new(Rules {
                tb: regex(tb)?,
                strong: regex(strong)?,
                noise: regex(noise)?,
                stop_leads: stop_leads.into_iter().map(String::into_bytes).collect(),
                stop_any: memmem::Finder::new(stop_any.as_bytes()).into_owned(),
                start_leads: start_leads.into_iter().map(String::into_bytes).collect(),
                request_line: regex(request_line)?,
                event_words: regex(event_words)?,
            }),
        })
    }

    /// The rows' flags and record ids (polars Series: the strings msg, lvl, uv, pyname, key; the int64 plen; the
    /// booleans cr, joined), and the state after them.
    #[allow(clippy::too_many_arguments)]
    fn classify(
        &self,
        py: Python<'_>,
        msg: &Bound<'_, PyAny>,
        lvl: &Bound<'_, PyAny>,
        uv: &Bound<'_, PyAny>,
        pyname: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        plen: &Bound<'_, PyAny>,
        cr: &Bound<'_, PyAny>,
        joined: &Bound<'_, PyAny>,
        state: State,
    ) -> PyResult<(Batch, State)> {
        let cols = (
            strings(msg)?,
            strings(lvl)?,
            strings(uv)?,
            strings(pyname)?,
            strings(key)?,
        );
        let nums = (values(plen)?, values(cr)?, values(joined)?);
        let (plen0, open, cr0, key0, rec_ok, rec, has_cr, stopping) = state;
        let prev = Carried {
            plen: plen0,
            open,
            cr: cr0,
            key: key0.map(String::into_bytes),
            rec_ok,
            rec,
            has_cr,
            stopping,
        };
        let (table, next) = py
            .detach(move || {
                let rows = Rows {
                    msg: cols.0.values(),
                    lvl: cols.1.values(),
                    uv: cols.2.values(),
                    pyname: cols.3.values(),
                    key: cols.4.values(),
                    plen: nums.0.get(),
                    cr: nums.1.get(),
                    joined: nums.2.get(),
                };
                let n = rows.msg.len();
                let same = [
                    &rows.lvl.len(),
                    &rows.uv.len(),
                    &rows.pyname.len(),
                    &rows.key.len(),
                ]
                .iter()
                .all(|&&l| l == n)
                    && [rows.plen.len(), rows.cr.len(), rows.joined.len()]
                        .iter()
                        .all(|&l| l == n);
                same.then(|| classify(&self.rules, &rows, &prev))
            })
            .ok_or_else(|| PyValueError::new_err("the columns differ in length"))?;
        let key = next.key.map(|k| String::from_utf8_lossy(&k).into_owned());
        Ok((
            Batch::new(table),
            (
                next.plen,
                next.open,
                next.cr,
                key,
                next.rec_ok,
                next.rec,
                next.has_cr,
                next.stopping,
            ),
        ))
    }
}

#[cfg(test)]
mod tests;
