//! The stream reader: an `ArrowArrayStream` moved out of its PyCapsule, and every array it gives.

use std::ptr;

use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods};

use super::{ArrowArray, ArrowArrayStream, EMPTY_ARRAY, EMPTY_SCHEMA};

/// Take the stream an `arrow_array_stream` capsule holds (moving it out, as the PyCapsule protocol says) and read all
/// its arrays: the schema's format and the arrays, each to be released by whoever keeps it.
pub(super) fn take_stream(capsule: &Bound<'_, PyCapsule>) -> Result<(String, Vec<ArrowArray>), String> {
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

pub(super) fn release_arrays(arrays: Vec<ArrowArray>) {
    for mut array in arrays {
        if let Some(release) = array.release {
            // SAFETY: an array moved out of its producer's stream by `take_stream`, released once.
            unsafe { release(&mut array) }
        }
    }
}
