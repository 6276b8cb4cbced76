//! A format's description (Python lists and dicts, as a parser module or the file beside it writes them) compiled
//! into the steps `plan` executes (the execution into columns: `output`).
//!
//! A kind: `{"name": str, "steps": [step, ...], "anchors": [str, ...], "split": {...}}` (anchors: literals a line
//! must hold for the steps to be tried; split: below). A step is a dict of one of these shapes:
//! `{"lit": s}`, `{"until": s}`, `{"run": class, "min": n, "max": n}`, `{"rest": true}`, `{"lazy": true}`,
//! `{"quoted": true}`, `{"find": s}`, `{"optional": [steps]}`, `{"either": [[steps], ...]}`,
//! `{"repeat": [steps], "min": n, "max": n}`, `{"start": true}`, `{"end": true, "cr": bool}`, and a field:
//! `{"field": name, ...one of the shapes above, or "steps": [steps]}`, whose value is the span it covered. A field
//! may say how its text is read: `"type"` ("str", "int", "float": `convert`), `"null"` (spellings of null, e.g.
//! `["-", ""]`), `"unescape": "json"`, and `"pairs": {"drop": [...], "pick": [...]}` (`pairs`).
//!
//! `split`: `{"fields": [names], "sep": ", ", "group": " : ", "mark": ":"}`: a line of the kind gives one row per
//! item of these fields (as many as the longest has): each value (but a null spelling) is cut at every `sep`, and at
//! every `group` (a separator that marks the next item: `group` is first read as `sep` + `mark`); an item's leading
//! `mark` is taken off and marks its row. nginx's `$upstream_*` lists: ", " between attempts, " : " before an
//! internal redirect's.

use memchr::memmem;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::Type;
use crate::pairs::Pairs;
use crate::plan::{Class, Kind, Step};

pub struct Compiled {
    pub kinds: Vec<Kind>,
    pub fields: Vec<Field>,
    /// per kind, per field: how that kind's capture of it is read (None: the kind does not capture it)
    pub convs: Vec<Vec<Option<Conv>>>,
    /// per kind: the fields whose items become rows
    pub splits: Vec<Option<Split>>,
}

/// A field every kind that holds it names alike, of one type; a field of `name="value"` pairs also gives its kept
/// pairs (`NAME_kept`) and picked values (`NAME_PICK`).
pub struct Field {
    pub name: String,
    pub ty: Type,
    pub pairs: Option<Pairs>,
}

/// How one kind reads a field's text before its type: spellings of null, JSON escapes.
#[derive(Clone, Default)]
pub struct Conv {
    pub nulls: Vec<Vec<u8>>,
    pub unescape: bool,
}

/// A kind's list fields, cut into items (one row per item).
#[derive(Clone)]
pub struct Split {
    pub fields: Vec<usize>,
    pub sep: Vec<u8>,
    pub group: Vec<u8>,
    pub mark: Vec<u8>,
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

fn string(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<String>> {
    d.get_item(key)?.map(|v| v.extract()).transpose()
}

fn names(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Vec<Vec<u8>>> {
    match d.get_item(key)? {
        Some(v) => v
            .extract::<Vec<String>>()
            .map(|v| v.into_iter().map(String::into_bytes).collect()),
        None => Ok(vec![]),
    }
}

/// What compiling a kind collects: the format's fields, and this kind's reading of each.
struct Builder {
    fields: Vec<Field>,
    convs: Vec<Option<Conv>>,
}

impl Builder {
    fn steps(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<Vec<Step>> {
        obj.try_iter()?.map(|s| self.step(&s?)).collect()
    }

    /// The shape a step dict spells, ignoring a "field" key.
    fn shape(&mut self, d: &Bound<'_, PyDict>) -> PyResult<Step> {
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
            return Ok(Step::opt(self.steps(&v)?));
        }
        if let Some(v) = get("either")? {
            let alts = v.try_iter()?.map(|a| self.steps(&a?)).collect::<PyResult<_>>()?;
            return Ok(Step::alt(alts));
        }
        if let Some(v) = get("repeat")? {
            let inner = self.steps(&v)?;
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
            let cr = get("cr")?.map(|v| v.is_truthy()).transpose()?.unwrap_or(false);
            return Ok(Step::End { cr });
        }
        Err(err(format!("a step of no known shape: {d}")))
    }

    fn step(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<Step> {
        let d = obj.cast::<PyDict>()?;
        let Some(name) = d.get_item("field")? else {
            return self.shape(d);
        };
        let name: String = name.extract()?;
        let ty = Type::parse(&string(d, "type")?.unwrap_or_else(|| "str".into())).map_err(err)?;
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
        let slot = match self.fields.iter().position(|f| f.name == name) {
            Some(i) if self.fields[i].ty != ty => {
                return Err(err(format!("field {name:?} is of two types")));
            }
            Some(i) => i,
            None => {
                self.fields.push(Field { name, ty, pairs });
                self.convs.push(None);
                self.fields.len() - 1
            }
        };
        let unescape = match string(d, "unescape")?.as_deref() {
            None => false,
            Some("json") => true,
            Some(other) => return Err(err(format!("no unescape {other:?} (json)"))),
        };
        self.convs[slot] = Some(Conv {
            nulls: names(d, "null")?,
            unescape,
        });
        let inner = match d.get_item("steps")? {
            Some(v) => self.steps(&v)?,
            None => vec![self.shape(d)?],
        };
        Ok(Step::Capture { slot, steps: inner })
    }
}

/// Compile a list of kinds.
pub fn compile(kinds: &Bound<'_, PyAny>) -> PyResult<Compiled> {
    let mut b = Builder {
        fields: Vec::new(),
        convs: Vec::new(),
    };
    let (mut out, mut convs, mut splits) = (Vec::new(), Vec::new(), Vec::new());
    for kind in kinds.try_iter()? {
        let kind = kind?;
        let d = kind.cast::<PyDict>()?;
        let name = string(d, "name")?.unwrap_or_default();
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
        b.convs.iter_mut().for_each(|c| *c = None);
        let steps = b.steps(&body)?;
        let split = match d.get_item("split")? {
            Some(v) => {
                let s = v.cast::<PyDict>()?;
                let fields = names(s, "fields")?
                    .into_iter()
                    .map(|f| {
                        b.fields
                            .iter()
                            .position(|x| x.name.as_bytes() == f.as_slice())
                            .ok_or_else(|| err(format!("kind {name:?} splits an unknown field")))
                    })
                    .collect::<PyResult<Vec<_>>>()?;
                let text = |k: &str| Ok::<_, PyErr>(string(s, k)?.unwrap_or_default().into_bytes());
                Some(Split {
                    fields,
                    sep: text("sep")?,
                    group: text("group")?,
                    mark: text("mark")?,
                })
            }
            None => None,
        };
        out.push(Kind { name, anchors, steps });
        convs.push(b.convs.clone());
        splits.push(split);
    }
    // kinds compiled before a later field was added: that field is none of theirs
    let n = b.fields.len();
    convs.iter_mut().for_each(|c| c.resize(n, None));
    Ok(Compiled {
        kinds: out,
        fields: b.fields,
        convs,
        splits,
    })
}
