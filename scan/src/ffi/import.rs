//! The import side: the arrays of a stream another library made (polars), read where they lie: a column of lines
//! (strings), or of the record pass's flags and lengths.

use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use super::ArrowArray;
use super::stream::{release_arrays, take_stream};

/// One imported array of strings: its buffers, read in place until `drop` releases it to its producer.
struct Chunk {
    array: ArrowArray,
    kind: StrKind,
}

#[derive(Clone, Copy)]
enum StrKind {
    View,
    Utf8,
    LargeUtf8,
    Null, // a column of nulls only (an empty polars column has this type)
}

/// The lines of a column another library made (polars), read where they lie.
pub struct Lines {
    chunks: Vec<Chunk>,
}

// SAFETY: the imported arrays' buffers are immutable while we hold them, and their producer (polars, pyarrow) allows
// release from any thread.
unsafe impl Send for Lines {}

impl Drop for Lines {
    fn drop(&mut self) {
        for chunk in &mut self.chunks {
            if let Some(release) = chunk.array.release {
                // SAFETY: each array was moved out of its producer's stream by `Lines::import` and is released once.
                unsafe { release(&mut chunk.array) }
            }
        }
    }
}

impl Lines {
    /// Take the stream an `arrow_array_stream` capsule holds (moving it out, as the PyCapsule protocol says) and
    /// read all its arrays; the schema must be a string type.
    pub fn import(capsule: &Bound<'_, PyCapsule>) -> Result<Lines, String> {
        let (format, arrays) = take_stream(capsule)?;
        let kind = match format.as_str() {
            "vu" => StrKind::View,
            "u" => StrKind::Utf8,
            "U" => StrKind::LargeUtf8,
            "n" => StrKind::Null,
            other => {
                release_arrays(arrays);
                return Err(format!("lines must be strings, not Arrow format {other:?}"));
            }
        };
        let chunks = arrays.into_iter().map(|array| Chunk { array, kind }).collect();
        Ok(Lines { chunks })
    }

    /// Every line's bytes, in order, None for a null.
    pub fn values(&self) -> Vec<Option<&[u8]>> {
        let valid = self.valid();
        self.slices()
            .into_iter()
            .zip(valid)
            .map(|(s, v)| v.then_some(s))
            .collect()
    }

    /// Which lines are there (not null).
    fn valid(&self) -> Vec<bool> {
        let mut out = Vec::new();
        for chunk in &self.chunks {
            let a = &chunk.array;
            let (n, off) = (a.length as usize, a.offset as usize);
            if let StrKind::Null = chunk.kind {
                out.extend(std::iter::repeat_n(false, n));
                continue;
            }
            // SAFETY: the validity buffer of a valid array, read within its length and offset.
            unsafe {
                let valid = (*a.buffers).cast::<u8>();
                out.extend(
                    (off..off + n).map(|i| valid.is_null() || (*valid.add(i / 8) >> (i % 8)) & 1 == 1),
                );
            }
        }
        out
    }

    /// How many lines.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.array.length as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The line at row `i` of the chunks in order (None: null, or past the end), read in place: a pass that reads a
    /// few columns' rows one by one allocates nothing (a fresh vector of every row per column cost more in page
    /// faults than the pass itself).
    pub fn at(&self, mut i: usize) -> Option<&[u8]> {
        for chunk in &self.chunks {
            let a = &chunk.array;
            let n = a.length as usize;
            if i >= n {
                i -= n;
                continue;
            }
            if let StrKind::Null = chunk.kind {
                return None; // no buffers
            }
            let j = i + a.offset as usize;
            // SAFETY: the buffers of a valid array of this type, read at one row within its length and offset; the
            // slice borrows `self`, which keeps the array alive.
            return unsafe {
                let buffers = std::slice::from_raw_parts(a.buffers, a.n_buffers as usize);
                let valid = buffers[0].cast::<u8>();
                if !valid.is_null() && (*valid.add(j / 8) >> (j % 8)) & 1 == 0 {
                    return None;
                }
                match chunk.kind {
                    StrKind::View => {
                        let view = &*buffers[1].cast::<[u8; 16]>().add(j);
                        let len = u32::from_le_bytes(view[..4].try_into().unwrap()) as usize;
                        if len <= 12 {
                            Some(&view[4..4 + len])
                        } else {
                            let idx = u32::from_le_bytes(view[8..12].try_into().unwrap()) as usize;
                            let at = u32::from_le_bytes(view[12..16].try_into().unwrap()) as usize;
                            Some(std::slice::from_raw_parts(
                                buffers[2 + idx].cast::<u8>().add(at),
                                len,
                            ))
                        }
                    }
                    StrKind::Utf8 => {
                        let o = buffers[1].cast::<i32>();
                        let (x, y) = (*o.add(j) as usize, *o.add(j + 1) as usize);
                        Some(std::slice::from_raw_parts(buffers[2].cast::<u8>().add(x), y - x))
                    }
                    StrKind::LargeUtf8 => {
                        let o = buffers[1].cast::<i64>();
                        let (x, y) = (*o.add(j) as usize, *o.add(j + 1) as usize);
                        Some(std::slice::from_raw_parts(buffers[2].cast::<u8>().add(x), y - x))
                    }
                    StrKind::Null => None,
                }
            };
        }
        None
    }

    /// Every line's bytes, in order (a null line reads as empty).
    pub fn slices(&self) -> Vec<&[u8]> {
        let mut out = Vec::new();
        for chunk in &self.chunks {
            let a = &chunk.array;
            let n = a.length as usize;
            let off = a.offset as usize;
            if let StrKind::Null = chunk.kind {
                out.extend(std::iter::repeat_n(&[][..], n));
                continue;
            }
            // SAFETY: the buffers of a valid array of this type, read within its length and offset; the slices
            // borrow `self`, which keeps the arrays alive.
            unsafe {
                let buffers = std::slice::from_raw_parts(a.buffers, a.n_buffers as usize);
                let valid = buffers[0].cast::<u8>();
                let is_valid = |i: usize| valid.is_null() || (*valid.add(i / 8) >> (i % 8)) & 1 == 1;
                match chunk.kind {
                    StrKind::View => {
                        let views = buffers[1].cast::<[u8; 16]>();
                        for i in off..off + n {
                            if !is_valid(i) {
                                out.push(&[][..]);
                                continue;
                            }
                            let view = &*views.add(i);
                            let len = u32::from_le_bytes(view[..4].try_into().unwrap()) as usize;
                            if len <= 12 {
                                out.push(&view[4..4 + len]);
                            } else {
                                let idx = u32::from_le_bytes(view[8..12].try_into().unwrap()) as usize;
                                let at = u32::from_le_bytes(view[12..16].try_into().unwrap()) as usize;
                                let data = buffers[2 + idx].cast::<u8>();
                                out.push(std::slice::from_raw_parts(data.add(at), len));
                            }
                        }
                    }
                    StrKind::Null => {}
                    StrKind::Utf8 | StrKind::LargeUtf8 => {
                        let data = buffers[2].cast::<u8>();
                        let bound = |i: usize| match chunk.kind {
                            StrKind::Utf8 => *buffers[1].cast::<i32>().add(i) as usize,
                            _ => *buffers[1].cast::<i64>().add(i) as usize,
                        };
                        for i in off..off + n {
                            if !is_valid(i) {
                                out.push(&[][..]);
                                continue;
                            }
                            let (a, b) = (bound(i), bound(i + 1));
                            out.push(std::slice::from_raw_parts(data.add(a), b - a));
                        }
                    }
                }
            }
        }
        out
    }
}

/// A column of Arrow booleans, 64-bit integers or 64-bit floats another library made (polars), read where it lies:
/// the record pass's flags and lengths (`records`), the openai-python event rows' numbers (`attempts`).
pub struct Values {
    arrays: Vec<ArrowArray>,
    ints: bool,
    floats: bool,
}

// SAFETY: as for Lines.
unsafe impl Send for Values {}

impl Drop for Values {
    fn drop(&mut self) {
        release_arrays(std::mem::take(&mut self.arrays));
    }
}

impl Values {
    /// Take a stream of booleans (`b`), 64-bit integers (`l`) or 64-bit floats (`g`), as `Lines::import` takes
    /// strings.
    pub fn import(capsule: &Bound<'_, PyCapsule>) -> Result<Values, String> {
        let (format, arrays) = take_stream(capsule)?;
        let (ints, floats) = match format.as_str() {
            "b" => (false, false),
            "l" => (true, false),
            "g" => (true, true),
            other => {
                release_arrays(arrays);
                return Err(format!(
                    "values must be booleans, int64 or float64, not Arrow format {other:?}"
                ));
            }
        };
        Ok(Values { arrays, ints, floats })
    }

    /// How many values.
    pub fn len(&self) -> usize {
        self.arrays.iter().map(|a| a.length as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value at row `i` of the arrays in order, as `get` gives it (None: null, or past the end), read in place.
    pub fn at(&self, mut i: usize) -> Option<i64> {
        for a in &self.arrays {
            let n = a.length as usize;
            if i >= n {
                i -= n;
                continue;
            }
            let j = i + a.offset as usize;
            // SAFETY: the validity and value buffers of a valid boolean, int64 or float64 array, read at one row
            // within its length and offset while `self` keeps the array alive.
            return unsafe {
                let buffers = std::slice::from_raw_parts(a.buffers, a.n_buffers as usize);
                let valid = buffers[0].cast::<u8>();
                let bit = |p: *const u8, i: usize| (*p.add(i / 8) >> (i % 8)) & 1 == 1;
                if !valid.is_null() && !bit(valid, j) {
                    None
                } else if self.ints {
                    Some(*buffers[1].cast::<i64>().add(j))
                } else {
                    Some(bit(buffers[1].cast::<u8>(), j) as i64)
                }
            };
        }
        None
    }

    /// The value at row `i` of a float64 column (None: null, past the end, or a column of another type).
    pub fn float_at(&self, i: usize) -> Option<f64> {
        if !self.floats {
            return None;
        }
        self.at(i).map(|b| f64::from_bits(b as u64))
    }

    /// Every value (booleans as 0 and 1, a float's bits as an integer; None: null).
    pub fn get(&self) -> Vec<Option<i64>> {
        let mut out = Vec::new();
        for a in &self.arrays {
            let (n, off) = (a.length as usize, a.offset as usize);
            // SAFETY: the validity and value buffers of a valid boolean or int64 array, read within its length and
            // offset while `self` keeps the array alive.
            unsafe {
                let buffers = std::slice::from_raw_parts(a.buffers, a.n_buffers as usize);
                let valid = buffers[0].cast::<u8>();
                let bit = |p: *const u8, i: usize| (*p.add(i / 8) >> (i % 8)) & 1 == 1;
                for i in off..off + n {
                    if !valid.is_null() && !bit(valid, i) {
                        out.push(None);
                    } else if self.ints {
                        out.push(Some(*buffers[1].cast::<i64>().add(i)));
                    } else {
                        out.push(Some(bit(buffers[1].cast::<u8>(), i) as i64));
                    }
                }
            }
        }
        out
    }
}
