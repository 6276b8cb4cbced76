//! The alternation tables: the bytes a sequence of steps may start with, so that an alternation tries only the
//! alternatives that may start at a place, and a lazy step only the places what follows may start at.

use super::step::Step;

/// The bytes a match of some steps may start with, as a table over the byte values.
pub type Starts = Box<[bool; 256]>;

/// The bytes the steps may start with when they cannot match empty (None: they may, or may start anywhere).
pub fn starts(steps: &[Step]) -> Option<Starts> {
    match starts_of(steps) {
        Some((set, false)) => Some(Box::new(set)),
        _ => None,
    }
}

/// What a sequence may start with, and whether it may match empty (None: unknown).
fn starts_of(steps: &[Step]) -> Option<([bool; 256], bool)> {
    let mut set = [false; 256];
    for step in steps {
        let (s, empty) = step_starts(step)?;
        set.iter_mut().zip(s).for_each(|(a, b)| *a |= b);
        if !empty {
            return Some((set, false));
        }
    }
    Some((set, true))
}

fn step_starts(step: &Step) -> Option<([bool; 256], bool)> {
    let mut set = [false; 256];
    match step {
        Step::Lit(lit) => match lit.first() {
            Some(&b) => {
                set[b as usize] = true;
                Some((set, false))
            }
            None => Some((set, true)),
        },
        Step::Run { class, min, .. } => {
            set.iter_mut()
                .enumerate()
                .for_each(|(b, x)| *x = class.may_start(b as u8));
            Some((set, *min == 0))
        }
        Step::Capture { steps, .. } => starts_of(steps),
        Step::Opt { steps, .. } => starts_of(steps).map(|(s, _)| (s, true)),
        Step::Repeat { steps, min, .. } => starts_of(steps).map(|(s, empty)| (s, empty || *min == 0)),
        Step::Alt { alts, .. } => {
            let mut empty = false;
            for alt in alts {
                let (s, e) = starts_of(alt)?;
                set.iter_mut().zip(s).for_each(|(a, b)| *a |= b);
                empty |= e;
            }
            Some((set, empty))
        }
        Step::Start => Some((set, true)),
        _ => None,
    }
}

/// The alternatives (their indexes, in order) that may start at `pos`.
#[inline]
pub(super) fn tried(
    starts: &Option<Box<[u64; 257]>>,
    n: usize,
    line: &[u8],
    pos: usize,
) -> impl Iterator<Item = usize> {
    let mut bits = match starts {
        Some(t) => t[line.get(pos).map_or(256, |&b| b as usize)],
        None => 0,
    };
    let mut all = if starts.is_none() { 0..n } else { 0..0 };
    std::iter::from_fn(move || {
        if bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            return Some(i);
        }
        all.next()
    })
}

/// Each `Lazy` step of a sequence followed by steps that take a byte tries only the places they may start at.
pub fn lazy_at(steps: &mut [Step]) {
    for i in 0..steps.len() {
        if matches!(steps[i], Step::Lazy)
            && let Some(st) = starts(&steps[i + 1..])
        {
            steps[i] = Step::LazyAt(st);
        }
    }
}
