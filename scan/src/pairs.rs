//! A field of `name="value"` pairs (Prometheus' labels): the pairs found in it, read as the regex
//! `[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*"(?:[^"\\]|\\.)*"` finds them (every match, leftmost first, none overlapping: text
//! between pairs is skipped), each as `name=value` with `\"` and `\\` unescaped; then the pairs kept (those whose name
//! is not dropped) sorted and joined by `,`, and the value of each picked name.

/// What a pairs field gives besides itself.
#[derive(Debug, Clone, Default)]
pub struct Pairs {
    pub drop: Vec<Vec<u8>>,
    pub pick: Vec<Vec<u8>>,
}

fn is_space_at(s: &[u8], i: usize) -> Option<usize> {
    let b = s[i];
    if b < 0x80 {
        return matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ').then_some(1);
    }
    let len = match b {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    };
    let c = std::str::from_utf8(s.get(i..i + len)?).ok()?.chars().next()?;
    c.is_whitespace().then_some(len)
}

fn skip_space(s: &[u8], mut i: usize) -> usize {
    while i < s.len() {
        match is_space_at(s, i) {
            Some(n) => i += n,
            None => break,
        }
    }
    i
}

/// The pair that starts at `i`: (name end, value start, value end, pair end).
fn pair_at(s: &[u8], i: usize) -> Option<(usize, usize, usize, usize)> {
    if !(s[i].is_ascii_alphabetic() || s[i] == b'_') {
        return None;
    }
    let mut j = i + 1;
    while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_') {
        j += 1;
    }
    let mut k = skip_space(s, j);
    if s.get(k) != Some(&b'=') {
        return None;
    }
    k = skip_space(s, k + 1);
    if s.get(k) != Some(&b'"') {
        return None;
    }
    let start = k + 1;
    let mut p = start;
    while p < s.len() {
        match s[p] {
            b'"' => return Some((j, start, p, p + 1)),
            b'\\' if p + 1 < s.len() => p += 2,
            b'\\' => return None,
            _ => p += 1,
        }
    }
    None
}

/// Every pair of `s` as `name=value`, unescaped, in order.
pub fn pairs(s: &[u8]) -> Vec<(Vec<u8>, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        match pair_at(s, i) {
            Some((name_end, a, b, end)) => {
                let mut pair = s[i..name_end].to_vec();
                pair.push(b'=');
                let value = &s[a..b];
                let mut q = 0;
                while q < value.len() {
                    if value[q] == b'\\' && q + 1 < value.len() && matches!(value[q + 1], b'"' | b'\\') {
                        pair.push(value[q + 1]);
                        q += 2;
                    } else {
                        pair.push(value[q]);
                        q += 1;
                    }
                }
                out.push((pair, name_end - i));
                i = end;
            }
            None => i += 1,
        }
    }
    out
}

impl Pairs {
    /// The kept pairs sorted and joined, and each picked name's value (the first pair of that name).
    pub fn read(&self, s: &[u8]) -> (Vec<u8>, Vec<Option<Vec<u8>>>) {
        let all = pairs(s);
        let picked = self
            .pick
            .iter()
            .map(|name| {
                all.iter()
                    .find(|(p, n)| &p[..*n] == name.as_slice())
                    .map(|(p, n)| p[n + 1..].to_vec())
            })
            .collect();
        let mut kept: Vec<&Vec<u8>> = all
            .iter()
            .filter(|(p, n)| !self.drop.iter().any(|d| &p[..*n] == d.as_slice()))
            .map(|(p, _)| p)
            .collect();
        kept.sort();
        let mut joined = Vec::new();
        for (i, p) in kept.iter().enumerate() {
            if i > 0 {
                joined.push(b',');
            }
            joined.extend_from_slice(p);
        }
        (joined, picked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_unescaped_kept_sorted_and_picked() {
        let p = Pairs {
            drop: vec![b"job".to_vec(), b"instance".to_vec()],
            pick: vec![b"instance".to_vec()],
        };
        let (kept, picked) = p.read(br#"z="1", instance="h:1",job="j", a = "x\"y\\z\n""#);
        assert_eq!(String::from_utf8(kept).unwrap(), r#"a=x"y\z\n,z=1"#);
        assert_eq!(picked, vec![Some(b"h:1".to_vec())]);
    }

    #[test]
    fn text_between_pairs_is_skipped() {
        let got: Vec<String> = pairs(br#"1a="x" ,, b="y"c"#)
            .into_iter()
            .map(|(p, _)| String::from_utf8(p).unwrap())
            .collect();
        assert_eq!(got, ["a=x", "b=y"]);
        assert!(pairs(br#"a="unterminated"#).is_empty());
    }
}
