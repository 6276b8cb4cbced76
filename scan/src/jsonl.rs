//! JSON object lines into string columns, one per wanted key (parsers/client_jsonl.py: the lab client's records). It
//! gives what polars' `str.json_decode` with a struct of String fields gave, line by line (the parser's oracle,
//! tests/client_jsonl_before.py): a line that polars could not decode gives no row. Those rules, measured on polars:
//! - strict JSON (RFC 8259 grammar, whitespace space, tab, CR, LF), nesting at most 1,023 deep, every string and number
//!   checked wherever it sits (a float that overflows is an error);
//! - a wanted key's first occurrence wins; an object or array there is an error, at a later occurrence it is not;
//! - a value as text: strings unescaped, `true` / `false`, `null` a null, an integer as written (but `-0` is `0`), a
//!   number with a fraction or exponent as f64 printed without exponent (Rust's `Display`, as polars prints it);
//! - a high surrogate escape not followed by `\u` reads as U+0000; followed by `\u` not a low one, or a lone low
//!   one, is an error.
//!
//! A record of a `narrow` kind (the lab client's attempts, most of its lines) was decoded with a few keys only when
//! its text holds the `hint`: only those keys are given, and only they can make it an error.

mod parse;
pub mod py;
#[cfg(test)]
mod tests;

use regex::bytes::Regex;

use crate::column::{Column, I64Column, StrColumn, Table};
use parse::{Slot, object};

/// The keys wanted and the narrow kinds' rule.
pub struct Keys {
    pub names: Vec<Vec<u8>>,
    /// the keys' indices by their length (`by_len[n]`), so that a record's key is compared with a few
    by_len: Vec<Vec<usize>>,
    /// the key naming a record's kind, its narrow values, the keys given for them, and the text that must be there
    pub kind: Option<usize>,
    pub narrow_kinds: Vec<Vec<u8>>,
    pub narrow: Vec<bool>,
    pub hint: Option<Regex>,
}

impl Keys {
    pub fn new(
        names: Vec<Vec<u8>>,
        kind: Option<usize>,
        narrow_kinds: Vec<Vec<u8>>,
        narrow: Vec<bool>,
        hint: Option<Regex>,
    ) -> Keys {
        let mut by_len = vec![Vec::new(); names.iter().map(|n| n.len() + 1).max().unwrap_or(0)];
        for (i, n) in names.iter().enumerate() {
            by_len[n.len()].push(i);
        }
        Keys {
            names,
            by_len,
            kind,
            narrow_kinds,
            narrow,
            hint,
        }
    }

    fn index(&self, key: &[u8]) -> Option<usize> {
        let same = self.by_len.get(key.len())?;
        same.iter().copied().find(|&i| self.names[i] == key)
    }
}

/// `row` (the line's index among `lines`) and each key's text, for every line that is one JSON object and decodes.
pub fn decode<'a>(keys: &Keys, lines: impl Iterator<Item = Option<&'a [u8]>>) -> Table {
    let mut row = I64Column::default();
    // a key's column starts at its first value (most keys are in a few records only: no per-row pushes until then)
    let mut cols: Vec<Option<StrColumn>> = keys.names.iter().map(|_| None).collect();
    let mut slots = vec![Slot::Unset; keys.names.len()];
    let mut scratch = Vec::new();
    for (i, line) in lines.enumerate() {
        // a line holding a newline was never a candidate (the parser's object test), though JSON allows it there
        let Some(line) = line.filter(|l| memchr::memchr(b'\n', l).is_none()) else {
            continue;
        };
        slots.fill(Slot::Unset);
        scratch.clear();
        if object(line, keys, &mut slots, &mut scratch).is_err() {
            continue;
        }
        let narrow = keys.kind.is_some_and(|k| {
            let Slot::At(a, b) = slots[k] else {
                return false;
            };
            keys.narrow_kinds.iter().any(|v| v.as_slice() == &scratch[a..b])
                && keys.hint.as_ref().is_some_and(|h| h.is_match(line))
        });
        let given = |k: usize| !narrow || keys.narrow[k];
        if (0..slots.len()).any(|k| given(k) && slots[k] == Slot::Bad) {
            continue;
        }
        let n = row.values.len();
        row.push(Some(i as i64));
        for (k, col) in cols.iter_mut().enumerate() {
            match (slots[k], col) {
                (Slot::At(a, b), col) if given(k) => col
                    .get_or_insert_with(|| {
                        let mut c = StrColumn::default();
                        c.push_nulls(n);
                        c
                    })
                    .push(&scratch[a..b]),
                (_, Some(col)) => col.push_null(),
                (_, None) => {}
            }
        }
    }
    let n = row.values.len();
    let mut table = Table::default();
    table.add("row", Column::I64(row));
    for (name, col) in keys.names.iter().zip(cols) {
        let col = col.unwrap_or_else(|| {
            let mut c = StrColumn::default();
            c.push_nulls(n);
            c
        });
        table.add(&String::from_utf8_lossy(name), Column::Str(col));
    }
    table
}
