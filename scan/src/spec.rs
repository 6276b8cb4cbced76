//! A format's description (Python lists and dicts, as a parser module or the file beside it writes them) compiled
//! into the steps `plan` executes, and the execution over a chunk's lines into columns.
//!
//! A kind: `{"name": str, "steps": [step, ...], "anchors": [str, ...]}` (anchors: literals a line must hold for the
//! steps to be tried). A step is a dict of one of these shapes:
//! `{"lit": s}`, `{"until": s}`, `{"run": class, "min": n, "max": n}`, `{"rest": true}`, `{"lazy": true}`,
//! `{"quoted": true}`, `{"find": s}`, `{"optional": [steps]}`, `{"either": [[steps], ...]}`,
//! `{"repeat": [steps], "min": n, "max": n}`, `{"start": true}`, `{"end": true, "cr": bool}`, and a field:
//! `{"field": name, ...one of the shapes above, or "steps": [steps]}`, whose value is the span it covered.

use memchr::memmem;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::column::{Column, I64Column, StrColumn, Table};
use crate::pairs::Pairs;
use crate::plan::{Class, Kind, Step, first_match, first_match_into};

pub struct Compiled {
    pub kinds: Vec<Kind>,
    pub fields: Vec<Field>,
}

/// A field every kind that holds it names alike; a field of `name="value"` pairs also gives its kept pairs
/// (`NAME_kept`) and picked values (`NAME_PICK`).
pub struct Field {
    pub name: String,
    pub pairs: Option<Pairs>,
}

fn err(msg: String) -> PyErr {
    PyValueError::new_err(msg)
}

fn finder(s: &str) -> memmem::Finder<'static> {
    memmem::Finder::new(s.as_bytes()).into_owned()
}

fn count(d: &Bound<'_, PyDict>, key: &str, default: usize) -> PyResult<usize> {
    match d.get_item(key)? {
        Some(v) if !v.is_none() => v.extract(),
        _ => Ok(default),
    }
}

fn steps(obj: &Bound<'_, PyAny>, fields: &mut Vec<Field>) -> PyResult<Vec<Step>> {
    obj.try_iter()?.map(|s| step(&s?, fields)).collect()
}

/// The shape a step dict spells, ignoring a "field" key.
fn shape(d: &Bound<'_, PyDict>, fields: &mut Vec<Field>) -> PyResult<Step> {
    let get = |k: &str| d.get_item(k);
    if let Some(v) = get("lit")? {
        return Ok(Step::Lit(v.extract::<String>()?.into_bytes()));
    }
    if let Some(v) = get("until")? {
        return Ok(Step::Until(finder(&v.extract::<String>()?)));
    }
    if let Some(v) = get("run")? {
        let class = Class::parse(&v.extract::<String>()?).map_err(err)?;
        return Ok(Step::Run {
            class,
            min: count(d, "min", 0)?,
            max: count(d, "max", usize::MAX)?,
        });
    }
    if get("rest")?.is_some() {
        return Ok(Step::Rest);
    }
    if get("lazy")?.is_some() {
        return Ok(Step::Lazy);
    }
    if get("quoted")?.is_some() {
        return Ok(Step::Quoted);
    }
    if let Some(v) = get("find")? {
        return Ok(Step::Find(finder(&v.extract::<String>()?)));
    }
    if let Some(v) = get("optional")? {
        return Ok(Step::opt(steps(&v, fields)?));
    }
    if let Some(v) = get("either")? {
        let alts = v
            .try_iter()?
            .map(|a| steps(&a?, fields))
            .collect::<PyResult<_>>()?;
        return Ok(Step::alt(alts));
    }
    if let Some(v) = get("repeat")? {
        let inner = steps(&v, fields)?;
        return Ok(Step::repeat(
            inner,
            count(d, "min", 0)?,
            count(d, "max", usize::MAX)?,
        ));
    }
    if get("start")?.is_some() {
        return Ok(Step::Start);
    }
    if get("end")?.is_some() {
        let cr = get("cr")?
            .map(|v| v.is_truthy())
            .transpose()?
            .unwrap_or(false);
        return Ok(Step::End { cr });
    }
    Err(err(format!("a step of no known shape: {d}")))
}

fn names(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Vec<Vec<u8>>> {
    match d.get_item(key)? {
        Some(v) => v
            .extract::<Vec<String>>()
            .map(|v| v.into_iter().map(String::into_bytes).collect()),
        None => Ok(vec![]),
    }
}

fn step(obj: &Bound<'_, PyAny>, fields: &mut Vec<Field>) -> PyResult<Step> {
    let d = obj.cast::<PyDict>()?;
    let Some(name) = d.get_item("field")? else {
        return shape(d, fields);
    };
    let name: String = name.extract()?;
    let pairs = match d.get_item("pairs")? {
        Some(v) => {
            let p = v.cast::<PyDict>()?;
            Some(Pairs {
                drop: names(p, "drop")?,
                pick: names(p, "pick")?,
            })
        }
        None => None,
    };
    let slot = match fields.iter().position(|f| f.name == name) {
        Some(i) => i,
        None => {
            fields.push(Field { name, pairs });
            fields.len() - 1
        }
    };
    let inner = match d.get_item("steps")? {
        Some(v) => steps(&v, fields)?,
        None => vec![shape(d, fields)?],
    };
    Ok(Step::Capture { slot, steps: inner })
}

/// Compile a list of kinds.
pub fn compile(kinds: &Bound<'_, PyAny>) -> PyResult<Compiled> {
    let mut fields = Vec::new();
    let mut out = Vec::new();
    for kind in kinds.try_iter()? {
        let kind = kind?;
        let d = kind.cast::<PyDict>()?;
        let name: String = d
            .get_item("name")?
            .map(|v| v.extract())
            .transpose()?
            .unwrap_or_default();
        let anchors = match d.get_item("anchors")? {
            Some(v) => v
                .try_iter()?
                .map(|a| Ok(finder(&a?.extract::<String>()?)))
                .collect::<PyResult<_>>()?,
            None => vec![],
        };
        let body = d
            .get_item("steps")?
            .ok_or_else(|| err(format!("kind {name:?} has no steps")))?;
        out.push(Kind {
            name,
            anchors,
            steps: steps(&body, &mut fields)?,
        });
    }
    Ok(Compiled { kinds: out, fields })
}

impl Compiled {
    /// Each line's kind (null: none) and fields (null where its kind has none, or did not take that part).
    pub fn scan(&self, lines: &[&[u8]]) -> Table {
        let n = self.fields.len();
        let mut kind = I64Column::default();
        let mut cols: Vec<StrColumn> = (0..n).map(|_| StrColumn::default()).collect();
        // per pairs field: its kept pairs, then one column per picked name
        let mut derived: Vec<Vec<StrColumn>> = self
            .fields
            .iter()
            .map(|f| f.pairs.as_ref().map_or(0, |p| 1 + p.pick.len()))
            .map(|k| (0..k).map(|_| StrColumn::default()).collect())
            .collect();
        let mut spans = vec![(u32::MAX, u32::MAX); n];
        for line in lines {
            let k = first_match_into(&self.kinds, line, &mut spans);
            kind.push(k.map(|k| k as i64));
            for (i, col) in cols.iter_mut().enumerate() {
                let (a, b) = spans[i];
                let value = (k.is_some() && a != u32::MAX).then(|| &line[a as usize..b as usize]);
                col.push_opt(value);
                if let Some(p) = &self.fields[i].pairs {
                    let out = &mut derived[i];
                    match value {
                        Some(v) => {
                            let (kept, picked) = p.read(v);
                            out[0].push(&kept);
                            for (c, v) in out[1..].iter_mut().zip(picked) {
                                c.push_opt(v.as_deref());
                            }
                        }
                        None => out.iter_mut().for_each(StrColumn::push_null),
                    }
                }
            }
        }
        let mut table = Table::default();
        table.add("kind", Column::I64(kind));
        for ((field, col), more) in self.fields.iter().zip(cols).zip(derived) {
            table.add(&field.name, Column::Str(col));
            if let Some(p) = &field.pairs {
                let names = std::iter::once("kept".to_string()).chain(
                    p.pick
                        .iter()
                        .map(|n| String::from_utf8_lossy(n).into_owned()),
                );
                for (suffix, c) in names.zip(more) {
                    table.add(&format!("{}_{suffix}", field.name), Column::Str(c));
                }
            }
        }
        table
    }

    /// How many lines some kind matches.
    pub fn count(&self, lines: &[&[u8]]) -> usize {
        lines
            .iter()
            .filter(|line| first_match(&self.kinds, line, self.fields.len()).is_some())
            .count()
    }

    /// Where the first record of a line ends: the first kind that matches at its start, as far as its steps go.
    pub fn first_record(&self, line: &[u8]) -> Option<usize> {
        crate::plan::first_end(&self.kinds, line)
    }
}
