//! Columns built by the scanner, owned by Rust until they are handed to Python through the Arrow C data interface
//! (`ffi`): plain buffers laid out as Arrow lays them out, so that the hand-over copies nothing.

/// A validity bitmap (bit set: the value is there), kept only once a null has been seen.
#[derive(Default)]
pub struct Validity {
    bits: Vec<u8>,
    len: usize,
    nulls: usize,
}

impl Validity {
    #[inline]
    fn push(&mut self, valid: bool) {
        if valid && self.nulls == 0 {
            self.len += 1;
            return;
        }
        if !valid && self.nulls == 0 {
            // the first null: every value before it was there
            self.bits = vec![0xff; self.len.div_ceil(8)];
            if !self.len.is_multiple_of(8) {
                let last = self.bits.len() - 1;
                self.bits[last] = (1u8 << (self.len % 8)) - 1;
            }
        }
        if self.nulls > 0 || !valid {
            if self.len.is_multiple_of(8) {
                self.bits.push(0);
            }
            if valid {
                self.bits[self.len / 8] |= 1 << (self.len % 8);
            }
        }
        if !valid {
            self.nulls += 1;
        }
        self.len += 1;
    }

    /// `n` more values, all null (the bits past `len` are kept clear, so the new bytes are the nulls).
    pub fn extend_null(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        if self.nulls == 0 {
            self.bits = vec![0xff; self.len.div_ceil(8)];
            if !self.len.is_multiple_of(8) {
                let last = self.bits.len() - 1;
                self.bits[last] = (1u8 << (self.len % 8)) - 1;
            }
        }
        self.len += n;
        self.nulls += n;
        self.bits.resize(self.len.div_ceil(8), 0);
    }

    /// `n` more values, all there.
    pub fn extend_valid(&mut self, n: usize) {
        if self.nulls == 0 {
            self.len += n;
        } else {
            for _ in 0..n {
                self.push(true);
            }
        }
    }

    pub fn nulls(&self) -> usize {
        self.nulls
    }

    /// The bitmap, or None when every value is there.
    pub fn into_bits(self) -> Option<Vec<u8>> {
        (self.nulls > 0).then_some(self.bits)
    }

    pub fn is_valid(&self, i: usize) -> bool {
        self.nulls == 0 || self.bits[i / 8] & (1 << (i % 8)) != 0
    }
}

/// UTF-8 strings as an Arrow string view column: 16-byte views, strings of up to 12 bytes inline, longer ones in
/// data buffers (each under 2 GiB, so that a view's u32 offset always reaches).
#[derive(Default)]
pub struct StrColumn {
    pub views: Vec<u128>,
    pub buffers: Vec<Vec<u8>>,
    pub validity: Validity,
}

const BUFFER_CAP: usize = 1 << 31;

impl StrColumn {
    #[inline]
    pub fn push(&mut self, s: &[u8]) {
        let len = s.len();
        let mut raw = [0u8; 16];
        raw[..4].copy_from_slice(&(len as u32).to_le_bytes());
        if len <= 12 {
            raw[4..4 + len].copy_from_slice(s);
        } else {
            let full = self.buffers.last().is_none_or(|b| b.len() + len > BUFFER_CAP);
            if full {
                self.buffers.push(Vec::with_capacity(len.max(1 << 20)));
            }
            let idx = self.buffers.len() - 1;
            let buf = &mut self.buffers[idx];
            let offset = buf.len();
            buf.extend_from_slice(s);
            raw[4..8].copy_from_slice(&s[..4]);
            raw[8..12].copy_from_slice(&(idx as u32).to_le_bytes());
            raw[12..16].copy_from_slice(&(offset as u32).to_le_bytes());
        }
        self.views.push(u128::from_le_bytes(raw));
        self.validity.push(true);
    }

    /// Strings that are spans of one text: views into it, the text kept whole as the column's one data buffer (no
    /// span copied on its own).
    pub fn from_spans(text: Vec<u8>, spans: &[(usize, usize)]) -> StrColumn {
        if text.len() >= BUFFER_CAP {
            let mut c = StrColumn::default();
            for &(a, b) in spans {
                c.push(&text[a..b]);
            }
            return c;
        }
        let views = spans
            .iter()
            .map(|&(a, b)| {
                let s = &text[a..b];
                let mut raw = [0u8; 16];
                raw[..4].copy_from_slice(&(s.len() as u32).to_le_bytes());
                if s.len() <= 12 {
                    raw[4..4 + s.len()].copy_from_slice(s);
                } else {
                    raw[4..8].copy_from_slice(&s[..4]);
                    raw[12..16].copy_from_slice(&(a as u32).to_le_bytes()); // buffer 0
                }
                u128::from_le_bytes(raw)
            })
            .collect();
        let mut validity = Validity::default();
        validity.extend_valid(spans.len());
        StrColumn {
            views,
            buffers: vec![text],
            validity,
        }
    }

    pub fn push_null(&mut self) {
        self.views.push(0);
        self.validity.push(false);
    }

    pub fn push_nulls(&mut self, n: usize) {
        self.views.resize(self.views.len() + n, 0);
        self.validity.extend_null(n);
    }

    pub fn push_opt(&mut self, s: Option<&[u8]>) {
        match s {
            Some(s) => self.push(s),
            None => self.push_null(),
        }
    }

    pub fn len(&self) -> usize {
        self.views.len()
    }

    pub fn is_empty(&self) -> bool {
        self.views.is_empty()
    }

    /// The i-th string, copied (a null reads as "").
    pub fn get(&self, i: usize) -> Vec<u8> {
        let raw = self.views[i].to_le_bytes();
        let len = u32::from_le_bytes(raw[..4].try_into().unwrap()) as usize;
        if len <= 12 {
            return raw[4..4 + len].to_vec();
        }
        let idx = u32::from_le_bytes(raw[8..12].try_into().unwrap()) as usize;
        let off = u32::from_le_bytes(raw[12..16].try_into().unwrap()) as usize;
        self.buffers[idx][off..off + len].to_vec()
    }
}

/// 64-bit integers with nulls.
#[derive(Default)]
pub struct I64Column {
    pub values: Vec<i64>,
    pub validity: Validity,
}

impl I64Column {
    pub fn all_valid(values: Vec<i64>) -> I64Column {
        let mut validity = Validity::default();
        validity.extend_valid(values.len());
        I64Column { values, validity }
    }

    pub fn push(&mut self, v: Option<i64>) {
        self.values.push(v.unwrap_or(0));
        self.validity.push(v.is_some());
    }

    pub fn push_nulls(&mut self, n: usize) {
        self.values.resize(self.values.len() + n, 0);
        self.validity.extend_null(n);
    }
}

/// 64-bit floats with nulls.
#[derive(Default)]
pub struct F64Column {
    pub values: Vec<f64>,
    pub validity: Validity,
}

impl F64Column {
    pub fn push(&mut self, v: Option<f64>) {
        self.values.push(v.unwrap_or(0.0));
        self.validity.push(v.is_some());
    }

    pub fn push_nulls(&mut self, n: usize) {
        self.values.resize(self.values.len() + n, 0.0);
        self.validity.extend_null(n);
    }
}

/// Booleans with nulls, bit-packed as Arrow packs them.
#[derive(Default)]
pub struct BoolColumn {
    pub bits: Vec<u8>,
    pub len: usize,
    pub validity: Validity,
}

impl BoolColumn {
    pub fn push(&mut self, v: Option<bool>) {
        if self.len.is_multiple_of(8) {
            self.bits.push(0);
        }
        if v == Some(true) {
            self.bits[self.len / 8] |= 1 << (self.len % 8);
        }
        self.len += 1;
        self.validity.push(v.is_some());
    }
}

/// A column of any kind the scanner makes.
pub enum Column {
    Str(StrColumn),
    I64(I64Column),
    F64(F64Column),
    Bool(BoolColumn),
    /// microseconds since the epoch, UTC
    Micros(I64Column),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::Str(c) => c.views.len(),
            Column::I64(c) | Column::Micros(c) => c.values.len(),
            Column::F64(c) => c.values.len(),
            Column::Bool(c) => c.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Named columns of one length: a table, handed to Python as an Arrow struct array (a polars DataFrame).
#[derive(Default)]
pub struct Table {
    pub names: Vec<String>,
    pub columns: Vec<Column>,
}

impl Table {
    pub fn add(&mut self, name: &str, column: Column) {
        self.names.push(name.to_string());
        self.columns.push(column);
    }

    pub fn len(&self) -> usize {
        self.columns.first().map_or(0, Column::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_starts_when_a_null_comes() {
        let mut v = Validity::default();
        for i in 0..11 {
            v.push(i != 9);
        }
        assert_eq!(v.nulls(), 1);
        assert!(v.is_valid(8) && !v.is_valid(9) && v.is_valid(10));
        assert_eq!(v.into_bits().unwrap(), vec![0xff, 0b101]);
    }

    #[test]
    fn nulls_in_runs_as_one_by_one() {
        for (before, run, after) in [(0, 3, 2), (5, 11, 1), (8, 8, 3), (13, 1, 0), (3, 0, 4)] {
            let (mut one, mut runs) = (Validity::default(), Validity::default());
            for _ in 0..before {
                one.push(true);
                runs.push(true);
            }
            for _ in 0..run {
                one.push(false);
            }
            runs.extend_null(run);
            for _ in 0..after {
                one.push(true);
                runs.push(true);
            }
            runs.extend_null(0);
            assert_eq!((one.len, one.nulls), (runs.len, runs.nulls));
            assert_eq!(one.into_bits(), runs.into_bits(), "{before} {run} {after}");
        }
    }

    #[test]
    fn strings_inline_and_in_buffers() {
        let mut c = StrColumn::default();
        c.push(b"short");
        c.push(b"a string longer than twelve bytes");
        c.push_null();
        assert_eq!(c.get(0), b"short");
        assert_eq!(c.get(1), b"a string longer than twelve bytes");
        assert_eq!(c.get(2), b"");
        assert_eq!(c.validity.nulls(), 1);
    }
}
