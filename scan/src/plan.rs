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

use memchr::memmem;

/// Which characters a class holds: an ASCII bitmap, and what it says of the others.
#[derive(Clone, Debug)]
pub struct Class {
    ascii: [bool; 128],
    non_ascii: NonAscii,
    /// a class of everything but one to three ASCII bytes: those bytes, for memchr
    stops: Option<Vec<u8>>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum NonAscii {
    None,
    All,
    Space,       // Unicode white space only
    AllButSpace, // everything but Unicode white space
}

impl Class {
    /// A class from its spelling: `a-z`, single characters, `\t \n \r \\ \- \^ \]`, `\s` (white space, Unicode's
    /// too), `\d` (0-9), `\w` (ASCII letters, digits, `_`); a leading `^` negates it. Only ASCII characters may be
    /// listed.
    pub fn parse(spec: &str) -> Result<Class, String> {
        let (neg, body) = match spec.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, spec),
        };
        let mut ascii = [false; 128];
        let mut space = false;
        let chars: Vec<char> = body.chars().collect();
        let mut i = 0;
        let mut items: Vec<u8> = Vec::new();
        while i < chars.len() {
            let c = chars[i];
            let lit = if c == '\\' {
                i += 1;
                match chars.get(i) {
                    Some('s') => {
                        space = true;
                        for b in [b'\t', b'\n', 0x0b, 0x0c, b'\r', b' '] {
                            ascii[b as usize] = true;
                        }
                        i += 1;
                        continue;
                    }
                    Some('d') => {
                        (b'0'..=b'9').for_each(|b| ascii[b as usize] = true);
                        i += 1;
                        continue;
                    }
                    Some('w') => {
                        for b in (b'0'..=b'9').chain(b'a'..=b'z').chain(b'A'..=b'Z').chain([b'_']) {
                            ascii[b as usize] = true;
                        }
                        i += 1;
                        continue;
                    }
                    Some('t') => b'\t',
                    Some('n') => b'\n',
                    Some('r') => b'\r',
                    Some(&e) if e.is_ascii() => e as u8,
                    _ => return Err(format!("bad escape in class {spec:?}")),
                }
            } else if c.is_ascii() {
                c as u8
            } else {
                return Err(format!("class {spec:?} lists a non-ASCII character"));
            };
            i += 1;
            if chars.get(i) == Some(&'-') && i + 1 < chars.len() {
                let hi = chars[i + 1];
                if !hi.is_ascii() || (hi as u8) < lit {
                    return Err(format!("bad range in class {spec:?}"));
                }
                (lit..=hi as u8).for_each(|b| ascii[b as usize] = true);
                i += 2;
            } else {
                items.push(lit);
            }
        }
        for b in items {
            ascii[b as usize] = true;
        }
        let non_ascii = match (neg, space) {
            (false, false) => NonAscii::None,
            (false, true) => NonAscii::Space,
            (true, false) => NonAscii::All,
            (true, true) => NonAscii::AllButSpace,
        };
        if neg {
            ascii.iter_mut().for_each(|x| *x = !*x);
        }
        let out: Vec<u8> = (0u8..128).filter(|&b| !ascii[b as usize]).collect();
        let stops = (non_ascii == NonAscii::All && !out.is_empty() && out.len() <= 3).then_some(out);
        Ok(Class {
            ascii,
            non_ascii,
            stops,
        })
    }

    /// Where the run of this class's characters from `pos` ends, taking at most `max` of them, and how many it took.
    #[inline]
    fn run(&self, line: &[u8], pos: usize, max: usize) -> (usize, usize) {
        if let Some(stops) = &self.stops {
            let rest = &line[pos..];
            let found = match stops.len() {
                1 => memchr::memchr(stops[0], rest),
                2 => memchr::memchr2(stops[0], stops[1], rest),
                _ => memchr::memchr3(stops[0], stops[1], stops[2], rest),
            };
            let end = found.map_or(line.len(), |i| pos + i);
            let n = line[pos..end].iter().filter(|&&b| (b & 0xc0) != 0x80).count();
            if n <= max {
                return (end, n);
            }
        } else if self.non_ascii == NonAscii::None {
            let mut p = pos;
            while p - pos < max && p < line.len() && line[p] < 0x80 && self.ascii[line[p] as usize] {
                p += 1;
            }
            return (p, p - pos);
        }
        let (mut p, mut n) = (pos, 0);
        while n < max && p < line.len() {
            let (member, len) = self.at(&line[p..]);
            if !member {
                break;
            }
            p += len;
            n += 1;
        }
        (p, n)
    }

    /// Whether a character of this class may start with byte `b` (any non-ASCII lead byte, when it holds some).
    fn may_start(&self, b: u8) -> bool {
        if b < 0x80 {
            self.ascii[b as usize]
        } else {
            self.non_ascii != NonAscii::None
        }
    }

    /// Whether the character starting at `s[0]` belongs, and its length in bytes (s is valid UTF-8, non-empty).
    #[inline(always)]
    fn at(&self, s: &[u8]) -> (bool, usize) {
        let b = s[0];
        if b < 0x80 {
            return (self.ascii[b as usize], 1);
        }
        let len = utf8_len(b);
        let member = match self.non_ascii {
            NonAscii::None => false,
            NonAscii::All => true,
            NonAscii::Space | NonAscii::AllButSpace => {
                let space = std::str::from_utf8(&s[..len.min(s.len())])
                    .ok()
                    .and_then(|c| c.chars().next())
                    .is_some_and(char::is_whitespace);
                space == (self.non_ascii == NonAscii::Space)
            }
        };
        (member, len)
    }
}

/// Whether `lit` stands at `pos` of `line` (a loop: the literals are short, a call to memcmp costs more).
#[inline]
fn lit_at(line: &[u8], pos: usize, lit: &[u8]) -> bool {
    line.len() - pos >= lit.len() && line[pos..pos + lit.len()].iter().zip(lit).all(|(a, b)| a == b)
}

#[inline]
pub(crate) fn utf8_len(b: u8) -> usize {
    match b {
        0..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

#[inline]
fn is_boundary(s: &[u8], pos: usize) -> bool {
    pos == s.len() || (s[pos] & 0xc0) != 0x80
}

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

/// Captured spans of one match (u32::MAX: not captured).
pub type Spans = Vec<(u32, u32)>;
const UNSET: (u32, u32) = (u32::MAX, u32::MAX);

/// Work allowed for one line and kind before it is given up as not matching (a line built to make backtracking
/// explode costs a bounded time; real lines match or fail in a few dozen steps): `BUDGET`, or `BUDGET_PER_BYTE` steps
/// a byte of a longer line, so that a lazy step that walks a long line (an id up to the line's end) still reaches it,
/// as a regex does, in a time linear in the line.
const BUDGET: u32 = 100_000;
const BUDGET_PER_BYTE: usize = 16;

fn budget(line: &[u8]) -> u32 {
    BUDGET.max(u32::try_from(line.len().saturating_mul(BUDGET_PER_BYTE)).unwrap_or(u32::MAX))
}

struct Matcher<'a> {
    line: &'a [u8],
    spans: Spans,
    budget: u32,
    choice: bool, // the possessive attempt (`fast`) passed a step that had another way to match
}

impl Matcher<'_> {
    /// Match `steps` at `pos`, then `k` at the position they end; backtracking into the steps when `k` fails.
    fn seq(&mut self, steps: &[Step], pos: usize, k: &mut dyn FnMut(&mut Self, usize) -> bool) -> bool {
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

/// What the first, possessive attempt at a sequence found.
enum Fast {
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
    fn fast(&mut self, steps: &[Step], mut pos: usize) -> Fast {
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
                    (Fast::Ok(p), _) => {
                        pos = p;
                        self.choice = true; // leaving it out is another way
                    }
                    (Fast::Fail, saved) => self.restore(saved),
                    (Fast::Unknown, _) => return Fast::Unknown,
                },
                Step::Alt { alts, caps, starts } => {
                    let mut matched = None;
                    for i in tried(starts, alts.len(), line, pos) {
                        let alt = &alts[i];
                        match self.sub(alt, pos, *caps) {
                            (Fast::Ok(p), _) => {
                                self.choice |= i + 1 < alts.len();
                                matched = Some(p);
                                break;
                            }
                            (Fast::Fail, saved) => self.restore(saved),
                            (Fast::Unknown, _) => return Fast::Unknown,
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
                            (Fast::Ok(p), _) if p != pos => {
                                pos = p;
                                count += 1;
                                self.choice |= count > *min; // stopping before it is another way
                            }
                            (Fast::Ok(_), _) => break,
                            (Fast::Fail, saved) => {
                                self.restore(saved);
                                break;
                            }
                            (Fast::Unknown, _) => return Fast::Unknown,
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

    /// The rest of a sequence from a lazy step, by backtracking over that rest alone: its first match is the first a
    /// backtracking engine finds with the steps before it taken their first way (as `fast` took them), so the time
    /// and thread before a message are not matched twice. Taking the lazy step further is another way to match; a
    /// rest that cannot match is a failure judged by the choices before it.
    fn lazy_rest(&mut self, rest: &[Step], pos: usize) -> Fast {
        let mut end = None;
        let matched = self.seq(rest, pos, &mut |_, p| {
            end = Some(p);
            true
        });
        match end {
            Some(p) if matched => {
                self.choice = true;
                Fast::Ok(p)
            }
            _ => self.failed(),
        }
    }

    /// The spans as they were before a nested sequence that failed (none saved: it captures nothing).
    fn restore(&mut self, saved: Spans) {
        if !saved.is_empty() {
            self.spans = saved;
        }
    }

    fn failed(&self) -> Fast {
        if self.choice { Fast::Unknown } else { Fast::Fail }
    }

    /// A nested sequence tried on its own: its result (a failure judged by its own choices only: the steps before
    /// it are not tried again by the part that contains it), and the spans as they were before it.
    fn sub(&mut self, steps: &[Step], pos: usize, caps: bool) -> (Fast, Spans) {
        let saved = if caps { self.spans.clone() } else { Vec::new() };
        let outer = std::mem::replace(&mut self.choice, false);
        let got = self.fast(steps, pos);
        self.choice |= outer;
        (got, saved)
    }
}

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
fn tried(starts: &Option<Box<[u64; 257]>>, n: usize, line: &[u8], pos: usize) -> impl Iterator<Item = usize> {
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

/// Whether any of these steps keeps a field.
pub fn captures(steps: &[Step]) -> bool {
    steps.iter().any(|s| match s {
        Step::Capture { .. } => true,
        Step::Opt { caps, .. } | Step::Repeat { caps, .. } | Step::Alt { caps, .. } => *caps,
        _ => false,
    })
}

/// Where a quoted string's inside starting at `pos` ends (at its closing quote `q`, or the end of the line); an escape
/// at the very end is left out (the regex's `\\.` cannot take it).
fn quoted_end(line: &[u8], pos: usize, q: u8) -> usize {
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
    matched
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
mod tests {
    use super::*;

    fn lit(s: &str) -> Step {
        Step::Lit(s.as_bytes().to_vec())
    }
    fn run(c: &str, min: usize, max: usize) -> Step {
        Step::Run {
            class: Class::parse(c).unwrap(),
            min,
            max,
            lazy: false,
        }
    }
    fn until(s: &str) -> Step {
        Step::Until(memmem::Finder::new(s.as_bytes()).into_owned())
    }
    fn cap(slot: usize, steps: Vec<Step>) -> Step {
        Step::Capture { slot, steps }
    }
    fn kind(steps: Vec<Step>) -> Kind {
        Kind {
            name: "k".into(),
            anchors: vec![],
            steps,
        }
    }
    fn fields(k: &Kind, line: &str, n: usize) -> Option<Vec<Option<String>>> {
        match_kind(k, line.as_bytes(), n).map(|spans| {
            spans
                .into_iter()
                .map(|(a, b)| (a != u32::MAX).then(|| line[a as usize..b as usize].to_string()))
                .collect()
        })
    }

    #[test]
    fn separators_and_literals() {
        let k = kind(vec![
            cap(0, vec![until(" ")]),
            lit(" - "),
            cap(1, vec![Step::Rest]),
            Step::End { cr: true },
        ]);
        assert_eq!(
            fields(&k, "1.2.3.4 - rest of it\r", 2).unwrap(),
            [Some("1.2.3.4".into()), Some("rest of it\r".into())]
        );
        assert!(fields(&k, "1.2.3.4 + x", 2).is_none());
    }

    #[test]
    fn runs_backtrack_as_a_regex_does() {
        // [0-9]*\.?[0-9]+ then the end: "12" must give the last digit to the second run
        let k = kind(vec![
            cap(0, vec![run("0-9", 0, usize::MAX)]),
            Step::opt(vec![lit(".")]),
            cap(1, vec![run("0-9", 1, usize::MAX)]),
            Step::End { cr: false },
        ]);
        assert_eq!(fields(&k, "12", 2).unwrap(), [Some("1".into()), Some("2".into())]);
    }

    #[test]
    fn optional_groups_leave_their_fields_null() {
        let k = kind(vec![
            cap(0, vec![run("a-z", 1, usize::MAX)]),
            Step::opt(vec![lit("{"), cap(1, vec![until("}")]), lit("}")]),
            lit(" "),
            Step::End { cr: false },
        ]);
        assert_eq!(
            fields(&k, "abc{x} ", 2).unwrap(),
            [Some("abc".into()), Some("x".into())]
        );
        assert_eq!(fields(&k, "abc ", 2).unwrap(), [Some("abc".into()), None]);
    }

    #[test]
    fn nginx_upstream_lists() {
        // [^\s,"]*(?:(?:, | : )[^\s,"=]*)* then a quote
        let list = vec![
            run("^\\s,\"", 0, usize::MAX),
            Step::repeat(
                vec![
                    Step::alt(vec![vec![lit(", ")], vec![lit(" : ")]]),
                    run("^\\s,\"=", 0, usize::MAX),
                ],
                0,
                usize::MAX,
            ),
        ];
        let k = kind(vec![
            lit("ua=\""),
            cap(0, list),
            lit("\" x"),
            Step::End { cr: false },
        ]);
        assert_eq!(
            fields(&k, "ua=\"127.0.0.1:1, a : b\" x", 1).unwrap(),
            [Some("127.0.0.1:1, a : b".into())]
        );
        // no-break spaces are white space to `\s`
        assert!(fields(&k, "ua=\"a\u{a0}b\" x", 1).is_none());
    }

    #[test]
    fn lazy_and_quoted() {
        let k = kind(vec![
            cap(0, vec![Step::Lazy]),
            cap(1, vec![run("0-9", 1, usize::MAX)]),
            Step::End { cr: false },
        ]);
        assert_eq!(
            fields(&k, "ab12", 2).unwrap(),
            [Some("ab".into()), Some("12".into())]
        );
        let q = kind(vec![
            lit("\""),
            cap(0, vec![Step::Quoted(b'"')]),
            lit("\""),
            Step::End { cr: false },
        ]);
        assert_eq!(fields(&q, r#""a\"b""#, 1).unwrap(), [Some(r#"a\"b"#.into())]);
    }

    /// The spans by backtracking alone (no first, possessive attempt).
    fn by_backtracking(k: &Kind, line: &str, n: usize) -> Option<Vec<(u32, u32)>> {
        let mut m = Matcher {
            line: line.as_bytes(),
            spans: vec![UNSET; n],
            budget: budget(line.as_bytes()),
            choice: false,
        };
        m.seq(&k.steps, 0, &mut |_, _| true).then_some(m.spans)
    }

    #[test]
    fn a_lazy_steps_rest_is_matched_once_as_backtracking_does() {
        // (\d{4})?(?:^|.*?(?:\[([^\]\[]+)\])?[\s:])(go|went)! : openai-python's prefix, thread and message lead
        let mut prefix = vec![
            Step::Lazy,
            Step::opt(vec![lit("["), cap(1, vec![run("^][", 1, usize::MAX)]), lit("]")]),
            run("\\s:", 1, 1),
            cap(2, vec![Step::alt(vec![vec![lit("go")], vec![lit("went")]])]),
        ];
        lazy_at(&mut prefix);
        assert!(matches!(prefix[0], Step::LazyAt(_)));
        let k = kind(vec![
            Step::opt(vec![cap(0, vec![run("0-9", 4, 4)])]),
            Step::alt(vec![vec![Step::Start, cap(2, vec![lit("go")])], prefix]),
            lit("!"),
        ]);
        let lines = [
            "2026 [t1] go!",
            "2026 a go b go!", // the first lead the lazy step finds is not followed by '!': backtracking finds the next
            "go!",
            "1234go!",
            "2026:went!",
            "x [t] [u] went!",
            "2026 [t1] go",
            "",
        ];
        for line in lines {
            assert_eq!(
                match_kind(&k, line.as_bytes(), 3),
                by_backtracking(&k, line, 3),
                "{line}"
            );
        }
        assert_eq!(
            fields(&k, "2026 a go b go!", 3).unwrap(),
            [Some("2026".into()), None, Some("go".into())]
        );
        assert_eq!(
            fields(&k, "x [t] [u] went!", 3).unwrap(),
            [None, Some("u".into()), Some("went".into())]
        );
        assert!(fields(&k, "1234go!", 3).is_none());
    }

    #[test]
    fn lazy_runs_take_the_fewest() {
        // ([^\s,]+?)\.?(?:\s|$): the id leaves its last '.' to the optional dot
        let lazy = Step::Run {
            class: Class::parse("^\\s,").unwrap(),
            min: 1,
            max: usize::MAX,
            lazy: true,
        };
        let k = kind(vec![
            cap(0, vec![lazy]),
            Step::opt(vec![lit(".")]),
            Step::alt(vec![vec![run("\\s", 1, 1)], vec![Step::End { cr: false }]]),
        ]);
        assert_eq!(fields(&k, "ab.", 1).unwrap(), [Some("ab".into())]);
        assert_eq!(fields(&k, "a.b. x", 1).unwrap(), [Some("a.b".into())]);
        assert_eq!(fields(&k, "é. x", 1).unwrap(), [Some("é".into())]);
        assert!(fields(&k, "ab,", 1).is_none());
    }

    #[test]
    fn find_all_takes_leftmost_records() {
        let k = kind(vec![lit("<"), until(">"), lit(">")]);
        assert_eq!(find_all(&[k], b"x<a><b> <c"), vec![(1, 4), (4, 7)]);
    }

    #[test]
    fn classes_read_unicode_space() {
        let c = Class::parse("^\\s,").unwrap();
        assert_eq!(c.at("é".as_bytes()), (true, 2));
        assert_eq!(c.at("\u{2028}".as_bytes()), (false, 3));
        assert_eq!(c.at(b","), (false, 1));
    }
}
