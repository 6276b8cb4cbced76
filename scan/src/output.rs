//! A compiled format (`spec`) run over a chunk's lines into columns: one row per line (`scan`), or one row per item
//! of a kind's list fields (`rows`), each field read by its kind's conversion into its type.

use crate::column::{BoolColumn, Column, F64Column, I64Column, StrColumn, Table};
use crate::convert::{self, Type};
use crate::lookup;
use crate::plan::{Spans, first_end, first_match, first_match_into};
use crate::spec::{Compiled, Conv, Split};

/// The column of one field, of its type.
enum Col {
    Str(StrColumn),
    I64(I64Column),
    F64(F64Column),
    Items(I64Column),
}

impl Col {
    fn new(ty: Type) -> Col {
        match ty {
            Type::Str => Col::Str(StrColumn::default()),
            Type::Int => Col::I64(I64Column::default()),
            Type::Float => Col::F64(F64Column::default()),
            Type::Items => Col::Items(I64Column::default()),
        }
    }

    fn push_null(&mut self) {
        match self {
            Col::Str(c) => c.push_null(),
            Col::I64(c) | Col::Items(c) => c.push(None),
            Col::F64(c) => c.push(None),
        }
    }

    /// A value read as its kind reads it: a null spelling is null, JSON escapes undone, then the type.
    fn push(&mut self, v: Option<&[u8]>, conv: Option<&Conv>) {
        let Some(v) = v else {
            return self.push_null();
        };
        if conv.is_some_and(|c| c.nulls.iter().any(|n| n.as_slice() == v)) {
            return self.push_null();
        }
        let v = match conv.filter(|c| !c.codes.is_empty()) {
            Some(c) => match c.codes.iter().find(|(text, _)| text.as_slice() == v) {
                Some((_, name)) => name.as_slice(),
                None => return self.push_null(),
            },
            None => v,
        };
        match self {
            Col::Str(c) if conv.is_some_and(|c| c.unescape) && memchr::memchr(b'\\', v).is_some() => {
                c.push(&convert::unescape_json(v))
            }
            Col::Str(c) => c.push(v),
            Col::I64(c) => c.push(convert::int(v)),
            Col::F64(c) => c.push(convert::float(v)),
            Col::Items(c) => c.push(Some(convert::items(v))),
        }
    }

    /// `n` more nulls.
    fn push_nulls(&mut self, n: usize) {
        match self {
            Col::Str(c) => c.push_nulls(n),
            Col::I64(c) | Col::Items(c) => c.push_nulls(n),
            Col::F64(c) => c.push_nulls(n),
        }
    }

    /// Room for `n` more values (a chunk's lines: no growth while they are pushed).
    fn reserve(&mut self, n: usize) {
        match self {
            Col::Str(c) => c.views.reserve(n),
            Col::I64(c) | Col::Items(c) => c.values.reserve(n),
            Col::F64(c) => c.values.reserve(n),
        }
    }

    fn into_column(self) -> Column {
        match self {
            Col::Str(c) => Column::Str(c),
            Col::I64(c) | Col::Items(c) => Column::I64(c),
            Col::F64(c) => Column::F64(c),
        }
    }
}

/// A list value's items, each with whether it was marked (`Split`).
type Items = Vec<(Vec<u8>, bool)>;

/// A split list value's items.
fn split_items(v: &[u8], s: &Split) -> Items {
    let joined: Vec<u8>;
    let text = if s.group.is_empty() || memchr::memmem::find(v, &s.group).is_none() {
        v
    } else {
        let mut out = Vec::with_capacity(v.len() + 4);
        let mut at = 0;
        while let Some(i) = memchr::memmem::find(&v[at..], &s.group) {
            out.extend_from_slice(&v[at..at + i]);
            out.extend_from_slice(&s.sep);
            out.extend_from_slice(&s.mark);
            at += i + s.group.len();
        }
        out.extend_from_slice(&v[at..]);
        joined = out;
        &joined
    };
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let end = if s.sep.is_empty() {
            None
        } else {
            memchr::memmem::find(&text[at..], &s.sep)
        };
        let item = &text[at..end.map_or(text.len(), |i| at + i)];
        let marked = !s.mark.is_empty() && item.starts_with(&s.mark);
        out.push((
            if marked {
                item[s.mark.len()..].to_vec()
            } else {
                item.to_vec()
            },
            marked,
        ));
        match end {
            Some(i) => at += i + s.sep.len(),
            None => break,
        }
    }
    out
}

/// The j-th item of a list value, if it has one.
fn item_at(list: &Option<Items>, j: usize) -> Option<&(Vec<u8>, bool)> {
    list.as_ref().and_then(|l| l.get(j))
}

impl Compiled {
    fn columns(&self) -> Vec<Col> {
        self.fields.iter().map(|f| Col::new(f.ty)).collect()
    }

    fn table(&self, mut table: Table, cols: Vec<Col>, derived: Vec<Vec<StrColumn>>) -> Table {
        for ((field, col), more) in self.fields.iter().zip(cols).zip(derived) {
            table.add(&field.name, col.into_column());
            if let Some(p) = &field.pairs {
                let names = std::iter::once("kept".to_string())
                    .chain(p.pick.iter().map(|n| String::from_utf8_lossy(n).into_owned()));
                for (suffix, c) in names.zip(more) {
                    table.add(&format!("{}_{suffix}", field.name), Column::Str(c));
                }
            }
        }
        table
    }

    /// The text kind `k`'s lookups read in a line it matched (`buf` may hold it): the line itself when it has none.
    fn lookup_text<'a>(&self, k: usize, line: &'a [u8], spans: &Spans, buf: &'a mut Vec<u8>) -> &'a [u8] {
        if self.lookups[k].is_empty() {
            line
        } else {
            lookup::text(line, spans, self.outside[k].as_ref(), buf)
        }
    }

    /// The value of field `i` of a line kind `k` matched: its span in the line, or a lookup's in `text` (the lookup
    /// text: `lookup_text`; the last lookup of the field when several name it), None where it took none.
    fn value<'a>(
        &self,
        k: usize,
        i: usize,
        line: &'a [u8],
        text: &'a [u8],
        spans: &Spans,
    ) -> Option<&'a [u8]> {
        match self.lookups[k].iter().rev().find(|l| l.slot == i) {
            Some(l) => lookup::find(l, text).map(|(a, b)| &text[a..b]),
            None => {
                let (a, b) = spans[i];
                (a != u32::MAX).then(|| &line[a as usize..b as usize])
            }
        }
    }

    /// Each line's kind (null: none) and fields (null where its kind has none, or did not take that part).
    pub fn scan(&self, lines: &[&[u8]]) -> Table {
        let n = self.fields.len();
        let mut kind = I64Column::default();
        kind.values.reserve(lines.len());
        let mut cols = self.columns();
        cols.iter_mut().for_each(|c| c.reserve(lines.len()));
        // per pairs field: its kept pairs, then one column per picked name
        let mut derived: Vec<Vec<StrColumn>> = self
            .fields
            .iter()
            .map(|f| f.pairs.as_ref().map_or(0, |p| 1 + p.pick.len()))
            .map(|k| (0..k).map(|_| StrColumn::default()).collect())
            .collect();
        let mut spans = vec![(u32::MAX, u32::MAX); n];
        let mut buf = Vec::new();
        // a field's column is written where the field has a value, the nulls before it in one run: most of a format's
        // fields are null on most lines (one kind's fields each)
        let mut filled = vec![0usize; n];
        for (row, line) in lines.iter().enumerate() {
            let k = first_match_into(&self.kinds, line, &mut spans);
            kind.push(k.map(|k| k as i64));
            let Some(k) = k else { continue };
            let text = self.lookup_text(k, line, &spans, &mut buf);
            // only the fields this kind may give: the others stay null, written as runs (`filled`)
            for &i in &self.used[k] {
                let col = &mut cols[i];
                let value = self.value(k, i, line, text, &spans);
                if value.is_none() && self.fields[i].pairs.is_none() {
                    continue;
                }
                let gap = row - filled[i];
                col.push_nulls(gap);
                derived[i].iter_mut().for_each(|c| c.push_nulls(gap));
                filled[i] = row + 1;
                col.push(value, self.convs[k][i].as_ref());
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
        for ((col, more), done) in cols.iter_mut().zip(derived.iter_mut()).zip(filled) {
            col.push_nulls(lines.len() - done);
            more.iter_mut().for_each(|c| c.push_nulls(lines.len() - done));
        }
        let mut table = Table::default();
        table.add("kind", Column::I64(kind));
        self.table(table, cols, derived)
    }

    /// Each line's kind (null: none), and the rows of the lines some kind matches: one per item of the kind's list
    /// fields (`split`; one when it has none): `row` (the line's index), `item` (0, 1, ...), `items` (how many the
    /// longest list has; 0 when every list is null; null for a kind with none), `marked`, then the fields, a list
    /// field's item in its row and the line's other fields in each of its rows.
    pub fn rows(&self, lines: &[&[u8]]) -> (Table, Table) {
        let n = self.fields.len();
        let mut kind = I64Column::default();
        let (mut row, mut item, mut items, mut marked) = (
            I64Column::default(),
            I64Column::default(),
            I64Column::default(),
            BoolColumn::default(),
        );
        let mut cols = self.columns();
        let mut spans = vec![(u32::MAX, u32::MAX); n];
        let mut buf = Vec::new();
        let mut filled = vec![0usize; n]; // per field: the rows written so far
        for (r, line) in lines.iter().enumerate() {
            let Some(k) = first_match_into(&self.kinds, line, &mut spans) else {
                kind.push(None);
                continue;
            };
            kind.push(Some(k as i64));
            let text = self.lookup_text(k, line, &spans, &mut buf);
            let value = |i: usize| self.value(k, i, line, text, &spans);
            let convs = &self.convs[k];
            let split = self.splits[k].as_ref().filter(|s| !s.fields.is_empty());
            let lists: Vec<Option<Items>> = split.map_or_else(Vec::new, |s| {
                s.fields
                    .iter()
                    .map(|&f| {
                        let nulls = convs[f].as_ref().map_or(&[][..], |c| &c.nulls[..]);
                        value(f)
                            .filter(|v| !nulls.iter().any(|x| x.as_slice() == *v))
                            .map(|v| split_items(v, s))
                    })
                    .collect()
            });
            let longest = lists.iter().flatten().map(Vec::len).max();
            for j in 0..longest.unwrap_or(1) {
                let at_row = row.values.len();
                row.push(Some(r as i64));
                item.push(Some(j as i64));
                items.push(split.map(|_| longest.unwrap_or(0) as i64));
                marked.push(Some(lists.iter().any(|l| item_at(l, j).is_some_and(|(_, m)| *m))));
                // only the fields this kind may give: the others stay null, written as runs (`filled`)
                for &i in &self.used[k] {
                    let col = &mut cols[i];
                    col.push_nulls(at_row - filled[i]);
                    filled[i] = at_row + 1;
                    match split.and_then(|s| s.fields.iter().position(|&f| f == i)) {
                        Some(at) => col.push(
                            item_at(&lists[at], j).map(|(v, _)| v.as_slice()),
                            convs[i].as_ref(),
                        ),
                        None => col.push(value(i), convs[i].as_ref()),
                    }
                }
            }
        }
        let total = row.values.len();
        for (col, done) in cols.iter_mut().zip(filled) {
            col.push_nulls(total - done);
        }
        let mut kinds = Table::default();
        kinds.add("kind", Column::I64(kind));
        let mut table = Table::default();
        table.add("row", Column::I64(row));
        table.add("item", Column::I64(item));
        table.add("items", Column::I64(items));
        table.add("marked", Column::Bool(marked));
        let derived = self.fields.iter().map(|_| Vec::new()).collect();
        (kinds, self.table(table, cols, derived))
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
        first_end(&self.kinds, line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_lists_cut_into_marked_items() {
        let s = Split {
            fields: vec![],
            sep: b", ".to_vec(),
            group: b" : ".to_vec(),
            mark: b":".to_vec(),
        };
        let got: Vec<(String, bool)> = split_items(b"a, b : c, ", &s)
            .into_iter()
            .map(|(v, m)| (String::from_utf8(v).unwrap(), m))
            .collect();
        assert_eq!(
            got,
            [
                ("a".into(), false),
                ("b".into(), false),
                ("c".into(), true),
                ("".into(), false)
            ]
        );
    }
}
