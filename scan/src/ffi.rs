//! The Arrow C data interface (https://arrow.apache.org/docs/format/CDataInterface.html): the scanner's tables are
//! handed to polars / pyarrow as an `ArrowSchema` and an `ArrowArray` whose buffers stay where Rust built them (the
//! consumer calls `release` when it is done), and a polars column of lines is read through an `ArrowArrayStream`
//! without copying it. This module is the crate's only `unsafe` code: raw pointers and C callbacks are what the
//! interface is made of.

use std::ffi::{CString, c_char, c_int, c_void};
use std::ptr;

use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods};

use crate::column::{Column, Table, Validity};

#[repr(C)]
pub struct ArrowSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut ArrowSchema,
    dictionary: *mut ArrowSchema,
    release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    private_data: *mut c_void,
}

#[repr(C)]
pub struct ArrowArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut ArrowArray,
    dictionary: *mut ArrowArray,
    release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    private_data: *mut c_void,
}

#[repr(C)]
pub struct ArrowArrayStream {
    get_schema: Option<unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowSchema) -> c_int>,
    get_next: Option<unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowArray) -> c_int>,
    get_last_error: Option<unsafe extern "C" fn(*mut ArrowArrayStream) -> *const c_char>,
    release: Option<unsafe extern "C" fn(*mut ArrowArrayStream)>,
    private_data: *mut c_void,
}

// SAFETY: an exported schema or array owns what its private data points to (Rust buffers, or an imported
// producer's); nothing in it is tied to the thread that made it, and the C data interface lets its consumer release
// it from any thread.
unsafe impl Send for ArrowSchema {}
// SAFETY: as for ArrowSchema.
unsafe impl Send for ArrowArray {}

const NULLABLE: i64 = 2; // ARROW_FLAG_NULLABLE

const EMPTY_SCHEMA: ArrowSchema = ArrowSchema {
    format: ptr::null(),
    name: ptr::null(),
    metadata: ptr::null(),
    flags: 0,
    n_children: 0,
    children: ptr::null_mut(),
    dictionary: ptr::null_mut(),
    release: None,
    private_data: ptr::null_mut(),
};

const EMPTY_ARRAY: ArrowArray = ArrowArray {
    length: 0,
    null_count: 0,
    offset: 0,
    n_buffers: 0,
    n_children: 0,
    buffers: ptr::null_mut(),
    children: ptr::null_mut(),
    dictionary: ptr::null_mut(),
    release: None,
    private_data: ptr::null_mut(),
};

// ---------------------------------------------------------------------------------------------------------------
// export: a Table as a struct array

struct SchemaPrivate {
    _format: CString,
    _name: CString,
    children: Vec<*mut ArrowSchema>,
}

/// A buffer an exported array keeps alive until its consumer releases it.
enum Owned {
    U8(Vec<u8>),
    U128(Vec<u128>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl Owned {
    fn ptr(&self) -> *const c_void {
        match self {
            Owned::U8(v) => v.as_ptr().cast(),
            Owned::U128(v) => v.as_ptr().cast(),
            Owned::I64(v) => v.as_ptr().cast(),
            Owned::F64(v) => v.as_ptr().cast(),
        }
    }
}

struct ArrayPrivate {
    _owned: Vec<Owned>,
    buffers: Vec<*const c_void>,
    children: Vec<*mut ArrowArray>,
}

fn schema_node(format: &str, name: &str, children: Vec<ArrowSchema>) -> ArrowSchema {
    let format = CString::new(format).expect("format has no NUL");
    let name = CString::new(name.replace('\0', "")).expect("NULs removed");
    let children: Vec<*mut ArrowSchema> = children.into_iter().map(|c| Box::into_raw(Box::new(c))).collect();
    let mut private = Box::new(SchemaPrivate {
        _format: format,
        _name: name,
        children,
    });
    ArrowSchema {
        format: private._format.as_ptr(),
        name: private._name.as_ptr(),
        metadata: ptr::null(),
        flags: NULLABLE,
        n_children: private.children.len() as i64,
        children: private.children.as_mut_ptr(),
        dictionary: ptr::null_mut(),
        release: Some(release_schema),
        private_data: Box::into_raw(private).cast(),
    }
}

unsafe extern "C" fn release_schema(schema: *mut ArrowSchema) {
    // SAFETY: called by the consumer once, on a schema `schema_node` made: its private data is a boxed
    // SchemaPrivate and its children were boxed there; a child the consumer moved out has its release unset.
    unsafe {
        let schema = &mut *schema;
        let private = Box::from_raw(schema.private_data.cast::<SchemaPrivate>());
        for &child in &private.children {
            if let Some(release) = (*child).release {
                release(child);
            }
            drop(Box::from_raw(child));
        }
        schema.release = None;
    }
}

fn array_node(
    length: usize,
    nulls: usize,
    owned: Vec<Option<Owned>>,
    children: Vec<ArrowArray>,
) -> ArrowArray {
    let buffers: Vec<*const c_void> = owned
        .iter()
        .map(|b| b.as_ref().map_or(ptr::null(), Owned::ptr))
        .collect();
    let children: Vec<*mut ArrowArray> = children.into_iter().map(|c| Box::into_raw(Box::new(c))).collect();
    let mut private = Box::new(ArrayPrivate {
        _owned: owned.into_iter().flatten().collect(),
        buffers,
        children,
    });
    ArrowArray {
        length: length as i64,
        null_count: nulls as i64,
        offset: 0,
        n_buffers: private.buffers.len() as i64,
        n_children: private.children.len() as i64,
        buffers: private.buffers.as_mut_ptr(),
        children: private.children.as_mut_ptr(),
        dictionary: ptr::null_mut(),
        release: Some(release_array),
        private_data: Box::into_raw(private).cast(),
    }
}

unsafe extern "C" fn release_array(array: *mut ArrowArray) {
    // SAFETY: called by the consumer once, on an array `array_node` made: its private data is a boxed
    // ArrayPrivate owning the buffers, its children were boxed there; a moved-out child has its release unset.
    unsafe {
        let array = &mut *array;
        let private = Box::from_raw(array.private_data.cast::<ArrayPrivate>());
        for &child in &private.children {
            if let Some(release) = (*child).release {
                release(child);
            }
            drop(Box::from_raw(child));
        }
        array.release = None;
    }
}

fn validity(v: Validity) -> (usize, Option<Owned>) {
    let nulls = v.nulls();
    (nulls, v.into_bits().map(Owned::U8))
}

fn export_column(name: &str, column: Column) -> (ArrowSchema, ArrowArray) {
    let len = column.len();
    match column {
        Column::Str(c) => {
            let (nulls, valid) = validity(c.validity);
            let sizes: Vec<i64> = c.buffers.iter().map(|b| b.len() as i64).collect();
            let mut owned = vec![valid, Some(Owned::U128(c.views))];
            owned.extend(c.buffers.into_iter().map(|b| Some(Owned::U8(b))));
            owned.push(Some(Owned::I64(sizes))); // the C interface's extra buffer: the data buffers' sizes
            (
                schema_node("vu", name, vec![]),
                array_node(len, nulls, owned, vec![]),
            )
        }
        Column::I64(c) => {
            let (nulls, valid) = validity(c.validity);
            (
                schema_node("l", name, vec![]),
                array_node(len, nulls, vec![valid, Some(Owned::I64(c.values))], vec![]),
            )
        }
        Column::Micros(c) => {
            let (nulls, valid) = validity(c.validity);
            let array = array_node(len, nulls, vec![valid, Some(Owned::I64(c.values))], vec![]);
            (schema_node("tsu:UTC", name, vec![]), array)
        }
        Column::F64(c) => {
            let (nulls, valid) = validity(c.validity);
            (
                schema_node("g", name, vec![]),
                array_node(len, nulls, vec![valid, Some(Owned::F64(c.values))], vec![]),
            )
        }
        Column::Bool(c) => {
            let (nulls, valid) = validity(c.validity);
            (
                schema_node("b", name, vec![]),
                array_node(len, nulls, vec![valid, Some(Owned::U8(c.bits))], vec![]),
            )
        }
    }
}

/// A table as the schema and array of an Arrow struct array: what a polars DataFrame is made from.
pub fn export_table(table: Table) -> (ArrowSchema, ArrowArray) {
    let len = table.len();
    let (schemas, arrays): (Vec<_>, Vec<_>) = table
        .names
        .iter()
        .zip(table.columns)
        .map(|(name, column)| export_column(name, column))
        .unzip();
    let mut schema = schema_node("+s", "", schemas);
    schema.flags = 0;
    (schema, array_node(len, 0, vec![None], arrays))
}

/// Release what a capsule still holds when Python drops it (a consumer that took the struct left `release` unset).
pub fn drop_schema(mut schema: ArrowSchema) {
    if let Some(release) = schema.release {
        // SAFETY: the schema was made by `schema_node` and not taken by a consumer: releasing it once is ours to do.
        unsafe { release(&mut schema) }
    }
}

/// As `drop_schema`, for an array.
pub fn drop_array(mut array: ArrowArray) {
    if let Some(release) = array.release {
        // SAFETY: as in `drop_schema`.
        unsafe { release(&mut array) }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// import: a stream of string arrays (a polars column of lines)

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

/// Take the stream an `arrow_array_stream` capsule holds (moving it out, as the PyCapsule protocol says) and read all
/// its arrays: the schema's format and the arrays, each to be released by whoever keeps it.
fn take_stream(capsule: &Bound<'_, PyCapsule>) -> Result<(String, Vec<ArrowArray>), String> {
    let src = capsule
        .pointer_checked(Some(c"arrow_array_stream"))
        .map_err(|e| e.to_string())?;
    // SAFETY: a capsule of this name holds a valid ArrowArrayStream (the PyCapsule protocol); moving it out
    // leaves the capsule's copy released-looking (release unset), so the capsule's own destructor does nothing.
    let mut stream: ArrowArrayStream = unsafe {
        let src = src.as_ptr().cast::<ArrowArrayStream>();
        let taken = ptr::read(src);
        (*src).release = None;
        taken
    };
    let result = (|| {
        let mut schema = EMPTY_SCHEMA;
        let get_schema = stream.get_schema.ok_or("stream has no get_schema")?;
        // SAFETY: calling the producer's callbacks on its own stream, as the interface prescribes.
        if unsafe { get_schema(&mut stream, &mut schema) } != 0 {
            return Err("the stream gave no schema".to_string());
        }
        // SAFETY: a schema the producer just filled in: its format is a NUL-terminated string.
        let format = unsafe { std::ffi::CStr::from_ptr(schema.format) }
            .to_string_lossy()
            .into_owned();
        if let Some(release) = schema.release {
            // SAFETY: we own the schema the producer gave us; released once.
            unsafe { release(&mut schema) }
        }
        let get_next = stream.get_next.ok_or("stream has no get_next")?;
        let mut chunks = Vec::new();
        loop {
            let mut array = EMPTY_ARRAY;
            // SAFETY: as for get_schema.
            if unsafe { get_next(&mut stream, &mut array) } != 0 {
                return Err("the stream failed to give its next array".to_string());
            }
            if array.release.is_none() {
                break; // the end of the stream
            }
            chunks.push(array);
        }
        Ok((format, chunks))
    })();
    if let Some(release) = stream.release {
        // SAFETY: the stream is ours since we moved it out; its arrays live on after it (the interface allows).
        unsafe { release(&mut stream) }
    }
    result
}

fn release_arrays(arrays: Vec<ArrowArray>) {
    for mut array in arrays {
        if let Some(release) = array.release {
            // SAFETY: an array moved out of its producer's stream by `take_stream`, released once.
            unsafe { release(&mut array) }
        }
    }
}

/// A column of Arrow booleans or 64-bit integers another library made (polars), read where it lies: the record pass's
/// flags and lengths (`records`).
pub struct Values {
    arrays: Vec<ArrowArray>,
    ints: bool,
}

// SAFETY: as for Lines.
unsafe impl Send for Values {}

impl Drop for Values {
    fn drop(&mut self) {
        release_arrays(std::mem::take(&mut self.arrays));
    }
}

impl Values {
    /// Take a stream of booleans (`b`) or of 64-bit integers (`l`), as `Lines::import` takes strings.
    pub fn import(capsule: &Bound<'_, PyCapsule>) -> Result<Values, String> {
        let (format, arrays) = take_stream(capsule)?;
        let ints = match format.as_str() {
            "b" => false,
            "l" => true,
            other => {
                release_arrays(arrays);
                return Err(format!(
                    "values must be booleans or int64, not Arrow format {other:?}"
                ));
            }
        };
        Ok(Values { arrays, ints })
    }

    /// Every value (booleans as 0 and 1; None: null).
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
