//! The steps a line kind is made of, and the kind itself.

use memchr::memmem;

use super::class::Class;
use super::starts::{Starts, starts};

/// One step of a line kind.
#[derive(Debug)]
pub enum Step {
    /// these bytes, here
    Lit(Vec<u8>),
    /// on to the first occurrence of these bytes (not taking them), or to the end
    Until(memmem::Finder<'static>),
    /// characters of the class, between `min` and `max` of them, as many as may be (fewer only when what follows
    /// does not match otherwise); `lazy`: as few as may be (more only when what follows does not match otherwise)
    Run {
        class: Class,
        min: usize,
        max: usize,
        lazy: bool,
    },
    /// the rest of the line (greedy)
    Rest,
    /// as few characters as what follows allows (lazy)
    Lazy,
    /// `Lazy`, trying only the places whose byte may start what follows (`lazy_at`)
    LazyAt(Starts),
    /// the inside of a quoted string (JSON's, or a Python repr's): on to the first such quote no backslash escapes
    /// (not taking it)
    Quoted(u8),
    /// on past the next occurrence of these bytes (the nearest first)
    Find(memmem::Finder<'static>),
    /// these steps, or nothing (the steps first); `caps`: they keep a field
    Opt { steps: Vec<Step>, caps: bool },
    /// the first of these sequences that matches (with what follows); `starts`: by the byte at a place (256: the
    /// line's end), which of them may start there (a bit each), so that only those are tried
    Alt {
        alts: Vec<Vec<Step>>,
        caps: bool,
        starts: Option<Box<[u64; 257]>>,
    },
    /// these steps `min` to `max` times, as often as may be
    Repeat {
        steps: Vec<Step>,
        min: usize,
        max: usize,
        caps: bool,
    },
    /// what these steps cover, kept as field `slot`
    Capture { slot: usize, steps: Vec<Step> },
    /// the end of the line, optionally after one CR
    End { cr: bool },
    /// the start of the line
    Start,
}

impl Step {
    pub fn opt(steps: Vec<Step>) -> Step {
        let caps = captures(&steps);
        Step::Opt { steps, caps }
    }

    pub fn alt(alts: Vec<Vec<Step>>) -> Step {
        let caps = alts.iter().any(|a| captures(a));
        let starts = (alts.len() <= 64).then(|| {
            let mut table = Box::new([0u64; 257]);
            for (i, alt) in alts.iter().enumerate() {
                let st = starts(alt);
                for (b, bits) in table.iter_mut().enumerate() {
                    if st.as_ref().is_none_or(|st| b < 256 && st[b]) {
                        *bits |= 1 << i;
                    }
                }
            }
            table
        });
        Step::Alt { alts, caps, starts }
    }

    pub fn repeat(steps: Vec<Step>, min: usize, max: usize) -> Step {
        let caps = captures(&steps);
        Step::Repeat {
            steps,
            min,
            max,
            caps,
        }
    }
}

/// A line kind: its steps, and the literals a line must hold for the steps to be tried.
#[derive(Debug)]
pub struct Kind {
    pub name: String,
    pub anchors: Vec<memmem::Finder<'static>>,
    pub steps: Vec<Step>,
}

/// Whether any of these steps keeps a field.
pub fn captures(steps: &[Step]) -> bool {
    steps.iter().any(|s| match s {
        Step::Capture { .. } => true,
        Step::Opt { caps, .. } | Step::Repeat { caps, .. } | Step::Alt { caps, .. } => *caps,
        _ => false,
    })
}
