//! A format's description (Python lists and dicts, as a parser module or the file beside it writes them) compiled
//! into the steps `plan` executes (the execution into columns: `output`).
//!
//! A kind: `{"name": str, "steps": [step, ...], "anchors": [str, ...], "split": {...}}` (anchors: literals a line
//! must hold for the steps to be tried; split: below). A step is a dict of one of these shapes:
//! `{"lit": s}`, `{"until": s}`, `{"run": class, "min": n, "max": n, "lazy": bool}`, `{"rest": true}`, `{"lazy": true}`,
//! `{"quoted": true}` (a JSON string's inside; `{"quoted": "'"}`: a Python repr's), `{"find": s}`, `{"optional": [steps]}`, `{"either": [[steps], ...]}`,
//! `{"repeat": [steps], "min": n, "max": n}`, `{"start": true}`, `{"end": true, "cr": bool}`, and a field:
//! `{"field": name, ...one of the shapes above, or "steps": [steps]}`, whose value is the span it covered. A field
//! may say how its text is read: `"type"` ("str", "int", "float": `convert`), `"null"` (spellings of null, e.g.
//! `["-", ""]`), `"unescape": "json"`, `"code": name` (a `lit` field: its value is `name`, not the literal's text: a
//! message's kind named by the lead its alternative took; a kind's field whose captures name codes is null where the
//! text it took names none), and `"pairs": {"drop": [...], "pick": [...]}` (`pairs`).
//!
//! `lookups`: `[{"field": name, "keys": [s, ...], "chars": n, "steps": [steps], "stop": s, "type": ...}, ...]`:
//! fields of a matched line found by a key, in any order (`SamplingParams(n=1, ..., max_tokens=256, ...)`): after the
//! leftmost occurrence of any key, the span `steps` match at the start of the next `chars` characters, or the text up
//! to the next `stop` (no key, no stop: null; the steps hold no field). `outside`: `{"field": name, "mark": s}`: the keys are looked up in the line with that
//! field's span replaced by `mark` (a prompt's text is never read as fields).
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
use crate::lookup::{Lookup, Outside};
use crate::pairs::Pairs;
use crate::plan::{Class, Kind, Step, captures, lazy_at};

pub struct Compiled {
    pub kinds: Vec<Kind>,
    pub fields: Vec<Field>,
    /// per kind, per field: how that kind's capture of it is read (None: the kind does not capture it)
    pub convs: Vec<Vec<Option<Conv>>>,
    /// per kind: the fields whose items become rows
    pub splits: Vec<Option<Split>>,
    /// per kind: its fields found by a key (`lookup`), and the text they are looked up in
    pub lookups: Vec<Vec<Lookup>>,
    pub outside: Vec<Option<Outside>>,
    /// per kind: the fields it may give a value (a capture or a lookup), in slot order; a line's other fields are
    /// null, so the scan touches only these (a format's kinds each hold a few of its many fields)
    pub used: Vec<Vec<usize>>,
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
    /// a field whose captures are literals that each name a code (`"code": name`): the name is its value
    pub codes: Vec<(Vec<u8>, Vec<u8>)>,
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
        let mut steps: Vec<Step> = obj.try_iter()?.map(|s| self.step(&s?)).collect::<PyResult<_>>()?;
        lazy_at(&mut steps);
        Ok(steps)
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
            let lazy = get("lazy")?.map(|v| v.is_truthy()).transpose()?.unwrap_or(false);
            return Ok(Step::Run {
                class,
                min: count(d, "min", 0)?,
                max: count(d, "max", usize::MAX)?,
                lazy,
            });
        }
        if get("rest")?.is_some() {
            return Ok(Step::Rest);
        }
        if get("lazy")?.is_some() {
            return Ok(Step::Lazy);
        }
        if let Some(v) = get("quoted")? {
            // `true`: a JSON string ('"'); or the quote itself (`"'"`: a Python repr)
            let q = match v.extract::<String>() {
                Ok(q) if q.len() == 1 && q.is_ascii() => q.as_bytes()[0],
                Ok(q) => return Err(err(format!("a quote of one ASCII character, not {q:?}"))),
                Err(_) => b'"',
            };
            return Ok(Step::Quoted(q));
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
        let slot = self.field(d, name.extract()?)?;
        let inner = match d.get_item("steps")? {
            Some(v) => self.steps(&v)?,
            None => vec![self.shape(d)?],
        };
        Ok(Step::Capture { slot, steps: inner })
    }

    /// The slot of field `name` (added when new), with this kind's reading of it (`type`, `null`, `unescape`).
    fn field(&mut self, d: &Bound<'_, PyDict>, name: String) -> PyResult<usize> {
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
        // the codes of every capture of the field in this kind (a message's leads, each the name of its kind)
        let mut codes = self.convs[slot].take().map(|c| c.codes).unwrap_or_default();
        if let Some(code) = string(d, "code")? {
            let Some(lit) = string(d, "lit")? else {
                let name = &self.fields[slot].name;
                return Err(err(format!("field {name:?}: a code names a literal (\"lit\")")));
            };
            codes.push((lit.into_bytes(), code.into_bytes()));
        }
        self.convs[slot] = Some(Conv {
            nulls: names(d, "null")?,
            unescape,
            codes,
        });
        Ok(slot)
    }

    /// A kind's fields found by a key: `{"field": name, "keys": [s, ...], "chars": n, "steps": [...], "type": ...}`.
    fn lookups(&mut self, kind: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<Lookup>> {
        let mut out = Vec::new();
        for l in v.try_iter()? {
            let l = l?;
            let d = l.cast::<PyDict>()?;
            let name: String = d
                .get_item("field")?
                .ok_or_else(|| err(format!("a lookup of kind {kind:?} names no field")))?
                .extract()?;
            let slot = self.field(d, name)?;
            let steps = match d.get_item("steps")? {
                Some(s) => self.steps(&s)?,
                None => vec![],
            };
            if captures(&steps) {
                return Err(err(format!("a lookup of kind {kind:?} holds a field")));
            }
            let keys: Vec<_> = names(d, "keys")?
                .iter()
                .map(|k| memmem::Finder::new(k).into_owned())
                .collect();
            if keys.is_empty() {
                return Err(err(format!("a lookup of kind {kind:?} has no key")));
            }
            let stop = string(d, "stop")?.map(|s| finder(&s));
            out.push(Lookup {
                slot,
                keys,
                chars: count(d, "chars", usize::MAX)?,
                steps,
                stop,
            });
        }
        Ok(out)
    }
}

/// Compile a list of kinds.
pub fn compile(kinds: &Bound<'_, PyAny>) -> PyResult<Compiled> {
    let mut b = Builder {
        fields: Vec::new(),
        convs: Vec::new(),
    };
    let (mut out, mut convs, mut splits) = (Vec::new(), Vec::new(), Vec::new());
    let (mut lookups, mut outside) = (Vec::new(), Vec::new());
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
        lookups.push(match d.get_item("lookups")? {
            Some(v) => b.lookups(&name, &v)?,
            None => vec![],
        });
        outside.push(match d.get_item("outside")? {
            Some(v) => {
                let o = v.cast::<PyDict>()?;
                let field = string(o, "field")?.unwrap_or_default();
                let slot = b
                    .fields
                    .iter()
                    .position(|f| f.name == field)
                    .ok_or_else(|| err(format!("kind {name:?} looks outside an unknown field")))?;
                Some(Outside {
                    slot,
                    mark: string(o, "mark")?.unwrap_or_default().into_bytes(),
                })
            }
            None => None,
        });
        out.push(Kind { name, anchors, steps });
        convs.push(b.convs.clone());
        splits.push(split);
    }
    // kinds compiled before a later field was added: that field is none of theirs
    let n = b.fields.len();
    convs.iter_mut().for_each(|c| c.resize(n, None));
    let used = convs
        .iter()
        .map(|c| (0..n).filter(|&i| c[i].is_some()).collect())
        .collect();
    Ok(Compiled {
        kinds: out,
        fields: b.fields,
        convs,
        splits,
        lookups,
        outside,
        used,
    })
}
