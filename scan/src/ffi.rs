//! The Arrow C data interface (https://arrow.apache.org/docs/format/CDataInterface.html): the scanner's tables are
//! handed to polars / pyarrow as an `ArrowSchema` and an `ArrowArray` whose buffers stay where Rust built them (the
//! consumer calls `release` when it is done), and a polars column of lines is read through an `ArrowArrayStream`
//! without copying it. This module is the crate's only `unsafe` code: raw pointers and C callbacks are what the
//! interface is made of.
//!
//! Here: the interface's C structs; `export` hands a table out, `stream` takes an `ArrowArrayStream` out of its
//! capsule, `import` reads the arrays it gave (lines, flags and lengths) where they lie.

use std::ffi::{c_char, c_int, c_void};
use std::ptr;

mod export;
mod import;
mod stream;

pub use export::{drop_array, drop_schema, export_table};
pub use import::{Lines, Values};

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
