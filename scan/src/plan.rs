//! A format's line kinds as data, executed over lines: each kind is a sequence of steps over the line's bytes
//! (literals, runs of a character class, a field up to a separator, optional and alternative parts, repetitions, the
//! end of the line), and a field is the span a group of steps covered. The first kind whose steps match the whole of
//! their part of the line is the line's kind.
//!
//! The steps are matched the way a backtracking regex engine matches the regex they spell, and give the same spans
//! (leftmost-first, greedy or lazy as written): a format moved from regexes into the core gives the same fields. What
//! makes them fast is that most steps have one way to match: a field up to a separator is one memchr, a literal
//! one comparison; backtracking happens only where a line does not match as the format expects, and is bounded.
//! Classes are byte classes over ASCII; `\s` also holds Unicode's white space (as the regex crate's `\s` does), `\d`
//! is ASCII's digits.
//!
//! Here: `class` (character classes), `step` (the steps and kinds), `starts` (the alternation tables), `matcher`
//! (backtracking) and `fast` (the possessive first attempt); this module holds the entry points over them.

mod class;
mod fast;
mod matcher;
mod starts;
mod step;

pub use class::Class;
pub(crate) use class::utf8_len;
pub use matcher::Spans;
pub use starts::{Starts, lazy_at, starts};
pub use step::{Kind, Step, captures};

use fast::Fast;
use matcher::{Matcher, UNSET, Undo, budget};

/// Match one kind against a line: the fields' spans when it matches (in `spans`, which it resets).
pub fn match_kind_into(kind: &Kind, line: &[u8], spans: &mut Spans) -> bool {
    if !kind.anchors.iter().all(|a| a.find(line).is_some()) {
        return false;
    }
    spans.iter_mut().for_each(|s| *s = UNSET);
    let mut m = Matcher {
        line,
        spans: std::mem::take(spans),
        budget: budget(line),
        choice: false,
        saves: SAVES.take(),
    };
    let matched = match m.fast(&kind.steps, 0) {
        Fast::Ok(_) => true,
        Fast::Fail => false,
        Fast::Unknown => {
            m.spans.iter_mut().for_each(|s| *s = UNSET);
            m.budget = budget(line); // a lazy step's rest tried by `fast` spent some: as if that attempt was not made
            m.seq(&kind.steps, 0, &mut |_, _| true)
        }
    };
    *spans = m.spans;
    m.saves.clear();
    SAVES.set(m.saves);
    matched
}

thread_local! {
    /// The possessive attempt's journal of spans, kept from line to line (not allocated for each).
    static SAVES: std::cell::Cell<Undo> = const { std::cell::Cell::new(Vec::new()) };
}

/// Match one kind against a line: the fields' spans when it matches.
pub fn match_kind(kind: &Kind, line: &[u8], slots: usize) -> Option<Spans> {
    let mut spans = vec![UNSET; slots];
    match_kind_into(kind, line, &mut spans).then_some(spans)
}

/// The first of `kinds` that matches, with its spans.
pub fn first_match(kinds: &[Kind], line: &[u8], slots: usize) -> Option<(usize, Spans)> {
    let mut spans = vec![UNSET; slots];
    kinds
        .iter()
        .position(|kind| match_kind_into(kind, line, &mut spans))
        .map(|i| (i, spans))
}

/// As `first_match`, with a buffer of spans the caller keeps from line to line.
pub fn first_match_into(kinds: &[Kind], line: &[u8], spans: &mut Spans) -> Option<usize> {
    kinds.iter().position(|kind| match_kind_into(kind, line, spans))
}

/// Where `steps` matched at the start of `text` end (they need not reach its end; the first path a backtracking
/// engine finds), or None.
pub fn prefix_end(steps: &[Step], text: &[u8]) -> Option<usize> {
    let mut m = Matcher {
        line: text,
        spans: Vec::new(),
        budget: budget(text),
        choice: false,
        saves: Vec::new(),
    };
    match m.fast(steps, 0) {
        Fast::Ok(end) => return Some(end),
        Fast::Fail => return None,
        Fast::Unknown => m.budget = budget(text),
    }
    let mut end = None;
    m.seq(steps, 0, &mut |_, p| {
        end = Some(p);
        true
    });
    end
}

/// Where the first kind that matches at the start of `line` ends (its steps need not reach the line's end).
pub fn first_end(kinds: &[Kind], line: &[u8]) -> Option<usize> {
    kinds.iter().find_map(|kind| {
        let mut m = Matcher {
            line,
            spans: Vec::new(),
            budget: budget(line),
            choice: false,
            saves: Vec::new(),
        };
        let mut end = None;
        m.seq(&kind.steps, 0, &mut |_, p| {
            end = Some(p);
            true
        });
        end
    })
}

/// Every match of any of `kinds` in `line`, leftmost first, none overlapping (as a regex's find-all over the kinds'
/// alternation): (start, end) of each.
pub fn find_all(kinds: &[Kind], line: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at <= line.len() {
        let mut found = None;
        for kind in kinds {
            let mut m = Matcher {
                line,
                spans: Vec::new(),
                budget: budget(line),
                choice: false,
                saves: Vec::new(),
            };
            let mut end = None;
            if m.seq(&kind.steps, at, &mut |_, p| {
                end = Some(p);
                true
            }) {
                found = end;
                break;
            }
        }
        match found {
            Some(end) => {
                out.push((at, end));
                at = if end > at {
                    end
                } else {
                    at + line.get(at).map_or(1, |&b| utf8_len(b))
                };
            }
            None => at += line.get(at).map_or(1, |&b| utf8_len(b)),
        }
    }
    out
}

#[cfg(test)]
mod tests;
