//! A step's character class: which characters it holds (a bitmap over ASCII, and what it says of the others), the run
//! of them from a place, and the byte helpers the matcher walks UTF-8 with.

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
    pub(super) fn run(&self, line: &[u8], pos: usize, max: usize) -> (usize, usize) {
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
    pub(super) fn may_start(&self, b: u8) -> bool {
        if b < 0x80 {
            self.ascii[b as usize]
        } else {
            self.non_ascii != NonAscii::None
        }
    }

    /// Whether the character starting at `s[0]` belongs, and its length in bytes (s is valid UTF-8, non-empty).
    #[inline(always)]
    pub(super) fn at(&self, s: &[u8]) -> (bool, usize) {
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
pub(super) fn lit_at(line: &[u8], pos: usize, lit: &[u8]) -> bool {
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
pub(super) fn is_boundary(s: &[u8], pos: usize) -> bool {
    pos == s.len() || (s[pos] & 0xc0) != 0x80
}
