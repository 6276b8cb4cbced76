//! Fields found by a key rather than by their place: `key=value` settings in any order and subset
//! (`SamplingParams(n=1, ..., max_tokens=256, ...)`), read after the leftmost occurrence of their key, in the line or in
//! the line with one field's span replaced by a mark (a prompt's text is not settings: `Outside`).

use memchr::memmem;

use crate::plan::{Spans, Step, prefix_end, utf8_len};

/// A field found by a key: after the leftmost occurrence of any of `keys`, the span `steps` match at the start of the
/// next `chars` characters (no steps: all of them), or (`stop`) the text up to the next occurrence of `stop`.
#[derive(Debug)]
pub struct Lookup {
    pub slot: usize,
    pub keys: Vec<memmem::Finder<'static>>,
    pub chars: usize,
    pub steps: Vec<Step>,
    pub stop: Option<memmem::Finder<'static>>,
}

/// The text a kind's lookups read: the line with field `slot`'s span replaced by `mark` (the line when it has none).
#[derive(Debug, Clone)]
pub struct Outside {
    pub slot: usize,
    pub mark: Vec<u8>,
}

/// The text a matched line's lookups read (`buf` holds it when it is not the line itself).
pub fn text<'a>(line: &'a [u8], spans: &Spans, outside: Option<&Outside>, buf: &'a mut Vec<u8>) -> &'a [u8] {
    match outside.map(|o| (o, spans[o.slot])) {
        Some((o, (a, b))) if a != u32::MAX => {
            buf.clear();
            buf.extend_from_slice(&line[..a as usize]);
            buf.extend_from_slice(&o.mark);
            buf.extend_from_slice(&line[b as usize..]);
            buf
        }
        _ => line,
    }
}

/// The span of a lookup's value in `text`, or None (no key, or the steps do not match after it).
pub fn find(l: &Lookup, text: &[u8]) -> Option<(usize, usize)> {
    // the leftmost occurrence; at the same place, the first key (as a regex alternation takes it)
    let (at, key) = l
        .keys
        .iter()
        .filter_map(|k| k.find(text).map(|i| (i, k.needle().len())))
        .min_by_key(|&(i, _)| i)?;
    let start = at + key;
    if let Some(stop) = &l.stop {
        return stop.find(&text[start..]).map(|i| (start, start + i));
    }
    let mut end = start;
    let mut n = 0;
    while n < l.chars && end < text.len() {
        end += utf8_len(text[end]);
        n += 1;
    }
    let end = end.min(text.len());
    let window = &text[start..end];
    let taken = if l.steps.is_empty() {
        window.len()
    } else {
        prefix_end(&l.steps, window)?
    };
    Some((start, start + taken))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Class;

    fn lookup(keys: &[&str], chars: usize, steps: Vec<Step>) -> Lookup {
        Lookup {
            slot: 0,
            keys: keys
                .iter()
                .map(|k| memmem::Finder::new(k.as_bytes()).into_owned())
                .collect(),
            chars,
            steps,
            stop: None,
        }
    }

    fn digits() -> Vec<Step> {
        vec![Step::Run {
            class: Class::parse("0-9.").unwrap(),
            min: 1,
            max: usize::MAX,
            lazy: false,
        }]
    }

    #[test]
    fn values_after_the_leftmost_key_within_a_window() {
        let l = lookup(&[" max_tokens="], 16, digits());
        let t = b"SamplingParams(n=1, max_tokens=256, min_tokens=0)";
        let (a, b) = find(&l, t).unwrap();
        assert_eq!(&t[a..b], b"256");
        // the window counts characters, and the value stops at its end
        let l = lookup(&["="], 3, digits());
        assert_eq!(find(&l, "x=12345".as_bytes()).map(|(a, b)| b - a), Some(3));
        assert!(find(&l, b"x=abc").is_none());
        assert!(find(&l, b"no key").is_none());
        // the leftmost of several keys
        let l = lookup(&["b: [", "a: ["], usize::MAX, vec![]);
        assert_eq!(find(&l, b"a: [1] b: [2]"), Some((4, 13)));
        // up to a stop, none without it
        let l = Lookup {
            stop: Some(memmem::Finder::new(b"]").into_owned()),
            ..lookup(&["a: ["], usize::MAX, vec![])
        };
        assert_eq!(find(&l, b"a: [1, 2] b"), Some((4, 8)));
        assert!(find(&l, b"a: [1, 2").is_none());
    }

    #[test]
    fn outside_a_span() {
        let o = Outside {
            slot: 0,
            mark: b"<p>".to_vec(),
        };
        let mut buf = Vec::new();
        let line = b"x 'max_tokens=9' y";
        assert_eq!(text(line, &vec![(2, 16)], Some(&o), &mut buf), b"x <p> y");
        assert_eq!(text(line, &vec![(u32::MAX, u32::MAX)], Some(&o), &mut buf), line);
    }
}
