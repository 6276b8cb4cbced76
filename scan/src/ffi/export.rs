//! The export side of the Arrow C data interface: a scanner's table handed out as a struct array whose buffers stay
//! where Rust built them until the consumer releases them.

use std::ffi::{CString, c_void};
use std::ptr;

use super::{ArrowArray, ArrowSchema, NULLABLE};
use crate::column::{Column, Table, Validity};

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
