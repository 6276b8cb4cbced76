//! The columns the attempts pass reads, row by row: polars' (imported, read in place: `ffi`) or vectors (the tests).

use crate::ffi::{Lines, Values};

/// A column of strings read row by row: polars' (`Lines`, read in place) or a vector (the tests).
pub trait Strs {
    fn at(&self, i: usize) -> Option<&[u8]>;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A column of numbers read row by row.
pub trait Nums<T> {
    fn at(&self, i: usize) -> Option<T>;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Strs for Lines {
    fn at(&self, i: usize) -> Option<&[u8]> {
        Lines::at(self, i)
    }
    fn len(&self) -> usize {
        Lines::len(self)
    }
}

impl Nums<i64> for Values {
    fn at(&self, i: usize) -> Option<i64> {
        Values::at(self, i)
    }
    fn len(&self) -> usize {
        Values::len(self)
    }
}

impl Nums<f64> for Values {
    fn at(&self, i: usize) -> Option<f64> {
        self.float_at(i)
    }
    fn len(&self) -> usize {
        Values::len(self)
    }
}

impl Strs for Vec<Option<&[u8]>> {
    fn at(&self, i: usize) -> Option<&[u8]> {
        self.get(i).copied().flatten()
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

impl<T: Copy> Nums<T> for Vec<Option<T>> {
    fn at(&self, i: usize) -> Option<T> {
        self.get(i).copied().flatten()
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
}
