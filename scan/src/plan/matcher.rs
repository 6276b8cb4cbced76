//! The step matcher: a kind's steps matched over a line by backtracking, as a regex engine matches the regex they
//! spell, within a bounded budget of work.

use super::class::{is_boundary, lit_at, utf8_len};
use super::starts::tried;
use super::step::Step;

/// Captured spans of one match (u32::MAX: not captured).
pub type Spans = Vec<(u32, u32)>;
pub(super) const UNSET: (u32, u32) = (u32::MAX, u32::MAX);
/// The possessive attempt's journal of the spans it set: (slot, the span before), undone back to a mark when a part
/// fails (no copy of every span before each part that may fail).
pub type Undo = Vec<(u32, (u32, u32))>;

/// Work allowed for one line and kind before it is given up as not matching (a line built to make backtracking
/// explode costs a bounded time; real lines match or fail in a few dozen steps): `BUDGET`, or `BUDGET_PER_BYTE` steps
/// a byte of a longer line, so that a lazy step that walks a long line (an id up to the line's end) still reaches it,
/// as a regex does, in a time linear in the line.
const BUDGET: u32 = 100_000;
const BUDGET_PER_BYTE: usize = 16;

pub(super) fn budget(line: &[u8]) -> u32 {
    BUDGET.max(u32::try_from(line.len().saturating_mul(BUDGET_PER_BYTE)).unwrap_or(u32::MAX))
}

pub(super) struct Matcher<'a> {
    pub(super) line: &'a [u8],
    pub(super) spans: Spans,
    pub(super) budget: u32,
    pub(super) choice: bool, // the possessive attempt (`fast`) passed a step that had another way to match
    pub(super) saves: Undo, // the possessive attempt's journal of the spans it set (`fast::sub`, `fast::undo`)
}

impl Matcher<'_> {
    /// Match `steps` at `pos`, then `k` at the position they end; backtracking into the steps when `k` fails.
    pub(super) fn seq(
        &mut self,
        steps: &[Step],
        pos: usize,
        k: &mut dyn FnMut(&mut Self, usize) -> bool,
    ) -> bool {
        let Some((first, rest)) = steps.split_first() else {
            return k(self, pos);
        };
        if self.budget == 0 {
            return false;
        }
        self.budget -= 1;
        let line = self.line;
        match first {
            Step::Lit(lit) => lit_at(line, pos, lit) && self.seq(rest, pos + lit.len(), k),
            Step::Until(f) => {
                let end = f.find(&line[pos..]).map_or(line.len(), |i| pos + i);
                self.seq(rest, end, k)
            }
            Step::Rest => self.seq(rest, line.len(), k),
            Step::Quoted(q) => self.seq(rest, quoted_end(line, pos, *q), k),
            Step::Run {
                class,
                min,
                max,
                lazy: true,
            } => {
                // the fewest first: `min` characters, then one more at a time while the class holds
                let (mut p, mut n) = class.run(line, pos, *min);
                if n < *min {
                    return false;
                }
                loop {
                    if self.seq(rest, p, k) {
                        return true;
                    }
                    if n >= *max || p >= line.len() || self.budget == 0 {
                        return false;
                    }
                    let (member, len) = class.at(&line[p..]);
                    if !member {
                        return false;
                    }
                    p += len;
                    n += 1;
                }
            }
            Step::Run { class, min, max, .. } => {
                let (mut p, mut n) = class.run(line, pos, *max);
                loop {
                    if n < *min {
                        return false;
                    }
                    if self.seq(rest, p, k) {
                        return true;
                    }
                    if n == 0 || self.budget == 0 {
                        return false;
                    }
                    p -= 1; // back one character
                    while (line[p] & 0xc0) == 0x80 {
                        p -= 1;
                    }
                    n -= 1;
                }
            }
            Step::Lazy => {
                let mut p = pos;
                loop {
                    if self.seq(rest, p, k) {
                        return true;
                    }
                    if p >= line.len() || self.budget == 0 {
                        return false;
                    }
                    p += utf8_len(line[p]);
                }
            }
            Step::LazyAt(st) => {
                // what follows takes a byte: the end of the line is never one of its places
                let mut p = pos;
                loop {
                    match line[p..].iter().position(|&b| st[b as usize]) {
                        Some(i) => p += i,
                        None => return false,
                    }
                    if is_boundary(line, p) {
                        if self.seq(rest, p, k) {
                            return true;
                        }
                        if self.budget == 0 {
                            return false;
                        }
                    }
                    p += 1;
                }
            }
            Step::Find(f) => {
                let mut from = pos;
                while let Some(i) = f.find(&line[from..]) {
                    let after = from + i + f.needle().len();
                    if self.seq(rest, after, k) {
                        return true;
                    }
                    from += i + 1;
                    if self.budget == 0 {
                        return false;
                    }
                }
                false
            }
            Step::Opt { steps: inner, .. } => {
                self.seq(inner, pos, &mut |m: &mut Self, p| m.seq(rest, p, k)) || self.seq(rest, pos, k)
            }
            Step::Alt { alts, starts, .. } => {
                for i in tried(starts, alts.len(), line, pos) {
                    let alt = &alts[i];
                    if self.seq(alt, pos, &mut |m: &mut Self, p| m.seq(rest, p, k)) {
                        return true;
                    }
                }
                false
            }
            Step::Repeat {
                steps: inner,
                min,
                max,
                ..
            } => self.repeat(inner, *min, *max, 0, pos, rest, k),
            Step::Capture { slot, steps: inner } => {
                let slot = *slot;
                self.seq(inner, pos, &mut |m: &mut Self, p| {
                    if !is_boundary(m.line, pos) || !is_boundary(m.line, p) {
                        return false; // a field is whole characters
                    }
                    let old = m.spans[slot];
                    m.spans[slot] = (pos as u32, p as u32);
                    if m.seq(rest, p, k) {
                        return true;
                    }
                    m.spans[slot] = old;
                    false
                })
            }
            Step::Start => pos == 0 && self.seq(rest, pos, k),
            Step::End { cr } => {
                let at_end = pos == line.len() || (*cr && pos + 1 == line.len() && line[pos] == b'\r');
                at_end && self.seq(rest, line.len(), k)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn repeat(
        &mut self,
        inner: &[Step],
        min: usize,
        max: usize,
        count: usize,
        pos: usize,
        rest: &[Step],
        k: &mut dyn FnMut(&mut Self, usize) -> bool,
    ) -> bool {
        if count < max {
            let again = self.seq(inner, pos, &mut |m: &mut Self, p| {
                // an iteration that takes nothing ends the repetition (as regex engines do)
                p != pos && m.repeat(inner, min, max, count + 1, p, rest, k)
            });
            if again {
                return true;
            }
        }
        count >= min && self.seq(rest, pos, k)
    }
}

/// Where a quoted string's inside starting at `pos` ends (at its closing quote `q`, or the end of the line); an escape
/// at the very end is left out (the regex's `\\.` cannot take it).
pub(super) fn quoted_end(line: &[u8], pos: usize, q: u8) -> usize {
    let mut p = pos;
    while p < line.len() {
        match memchr::memchr2(q, b'\\', &line[p..]) {
            Some(i) if line[p + i] == b'\\' => p += i + 2,
            Some(i) => return p + i,
            None => return line.len(),
        }
    }
    if p > line.len() { line.len() - 1 } else { p }
}
