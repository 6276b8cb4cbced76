//! The first, possessive attempt at a sequence of steps: most lines match (or fail) on the first path, without
//! continuations; only a failure after a step with another way to match goes back to backtracking (`matcher`).

use super::class::{is_boundary, lit_at};
use super::matcher::{Matcher, quoted_end};
use super::starts::tried;
use super::step::Step;

/// What the first, possessive attempt at a sequence found.
pub(super) enum Fast {
    /// it matched, at the end of the first path a backtracking engine tries: its result, exactly
    Ok(usize),
    /// it failed before any step that had another way to match: every path fails
    Fail,
    /// it failed after such a step: only backtracking can tell
    Unknown,
}

impl Matcher<'_> {
    /// The first path through `steps`, each step taking its first way to match (the greediest run, the optional
    /// part, the first alternative, the nearest occurrence), without continuations. `self.choice` says whether a step
    /// passed had another way to match; a failure after one is `Unknown`.
    pub(super) fn fast(&mut self, steps: &[Step], mut pos: usize) -> Fast {
        let line = self.line;
        for (at, step) in steps.iter().enumerate() {
            match step {
                Step::Lit(lit) => {
                    if !lit_at(line, pos, lit) {
                        return self.failed();
                    }
                    pos += lit.len();
                }
                Step::Until(f) => pos = f.find(&line[pos..]).map_or(line.len(), |i| pos + i),
                Step::Rest => pos = line.len(),
                Step::Quoted(q) => pos = quoted_end(line, pos, *q),
                Step::Run {
                    class,
                    min,
                    max,
                    lazy: true,
                } => {
                    let (end, n) = class.run(line, pos, *min);
                    if n < *min {
                        return self.failed();
                    }
                    // taking more is another way, when the class holds at the next character
                    self.choice |= n < *max && end < line.len() && class.at(&line[end..]).0;
                    pos = end;
                }
                Step::Run { class, min, max, .. } => {
                    let (end, n) = class.run(line, pos, *max);
                    pos = end;
                    if n < *min {
                        return self.failed();
                    }
                    self.choice |= n > *min;
                }
                Step::Lazy => self.choice |= pos < line.len(),
                Step::LazyAt(_) => return self.lazy_rest(&steps[at..], pos),
                Step::Find(f) => match f.find(&line[pos..]) {
                    Some(i) => {
                        pos += i + f.needle().len();
                        self.choice = true; // a later occurrence is another way
                    }
                    None => return self.failed(),
                },
                Step::Opt { steps: inner, caps } => match self.sub(inner, pos, *caps) {
                    Fast::Ok(p) => {
                        pos = p;
                        self.choice = true; // leaving it out is another way
                    }
                    Fast::Fail => {}
                    Fast::Unknown => return Fast::Unknown,
                },
                Step::Alt { alts, caps, starts } => {
                    let mut matched = None;
                    for i in tried(starts, alts.len(), line, pos) {
                        let alt = &alts[i];
                        match self.sub(alt, pos, *caps) {
                            Fast::Ok(p) => {
                                self.choice |= i + 1 < alts.len();
                                matched = Some(p);
                                break;
                            }
                            Fast::Fail => {}
                            Fast::Unknown => return Fast::Unknown,
                        }
                    }
                    match matched {
                        Some(p) => pos = p,
                        None => return self.failed(),
                    }
                }
                Step::Repeat {
                    steps: inner,
                    min,
                    max,
                    caps,
                } => {
                    let mut count = 0;
                    while count < *max {
                        match self.sub(inner, pos, *caps) {
                            Fast::Ok(p) if p != pos => {
                                pos = p;
                                count += 1;
                                self.choice |= count > *min; // stopping before it is another way
                            }
                            Fast::Ok(_) | Fast::Fail => break,
                            Fast::Unknown => return Fast::Unknown,
                        }
                    }
                    if count < *min {
                        return self.failed();
                    }
                }
                Step::Capture { slot, steps: inner } => {
                    let start = pos;
                    match self.fast(inner, pos) {
                        Fast::Ok(p) => {
                            if !is_boundary(line, start) || !is_boundary(line, p) {
                                return self.failed();
                            }
                            self.saves.push((*slot as u32, self.spans[*slot]));
                            self.spans[*slot] = (start as u32, p as u32);
                            pos = p;
                        }
                        other => return other,
                    }
                }
                Step::Start => {
                    if pos != 0 {
                        return self.failed();
                    }
                }
                Step::End { cr } => {
                    if !(pos == line.len() || (*cr && pos + 1 == line.len() && line[pos] == b'\r')) {
                        return self.failed();
                    }
                    pos = line.len();
                }
            }
        }
        Fast::Ok(pos)
    }

    /// The rest of a sequence from a lazy step (`LazyAt`, first of `rest`), place by place as backtracking tries
    /// them: at each place what follows is tried possessively first (`fast`), by backtracking only when that cannot
    /// tell, so a message after a line's prefix is read on its first path, not through continuations. Its first
    /// match is the first a backtracking engine finds with the steps before it taken their first way (as `fast` took
    /// them), so the time and thread before a message are not matched twice. Taking the lazy step further is
    /// another way to match; a rest that cannot match is a failure judged by the choices before it.
    fn lazy_rest(&mut self, rest: &[Step], pos: usize) -> Fast {
        let (Some((Step::LazyAt(st), after)), line) = (rest.split_first(), self.line) else {
            unreachable!("lazy_rest starts at a LazyAt step")
        };
        let mark = self.saves.len();
        let outer = self.choice;
        let mut p = pos;
        let found = loop {
            // what follows takes a byte: the end of the line is never one of its places
            match line[p..].iter().position(|&b| st[b as usize]) {
                Some(i) => p += i,
                None => break None,
            }
            if is_boundary(line, p) {
                self.choice = false;
                match self.fast(after, p) {
                    Fast::Ok(end) => break Some(end),
                    Fast::Fail => {}
                    Fast::Unknown => {
                        // backtracking's spans are not journaled: its match sets a choice, so a part around this one
                        // that fails after it is Unknown (all of it backtracked), never undone from the journal
                        self.undo(mark);
                        let mut end = None;
                        if self.seq(after, p, &mut |_, e| {
                            end = Some(e);
                            true
                        }) {
                            break end;
                        }
                    }
                }
                self.undo(mark); // a failed place's fields are not kept
                if self.budget == 0 {
                    break None;
                }
                self.budget -= 1;
            }
            p += 1;
        };
        self.choice = outer;
        match found {
            Some(end) => {
                self.choice = true;
                Fast::Ok(end)
            }
            None => self.failed(),
        }
    }

    fn failed(&self) -> Fast {
        if self.choice { Fast::Unknown } else { Fast::Fail }
    }

    /// A nested sequence tried on its own: its result (a failure judged by its own choices only: the steps before
    /// it are not tried again by the part that contains it), the spans as they were before it when it failed (the
    /// ones it set undone from the journal: no copy of the spans per attempt).
    fn sub(&mut self, steps: &[Step], pos: usize, caps: bool) -> Fast {
        let mark = self.saves.len();
        let outer = std::mem::replace(&mut self.choice, false);
        let got = self.fast(steps, pos);
        self.choice |= outer;
        if caps && matches!(got, Fast::Fail) {
            self.undo(mark);
        }
        got
    }

    /// The spans set since the journal's `mark` put back as they were.
    fn undo(&mut self, mark: usize) {
        while self.saves.len() > mark {
            let Some((slot, old)) = self.saves.pop() else {
                break;
            };
            self.spans[slot as usize] = old;
        }
    }
}
