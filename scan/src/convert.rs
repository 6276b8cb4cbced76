//! A field's type: how its text becomes a value, as polars' casts made it from the same text (`cast(Int64,
//! strict=False)`, `cast(Float64, strict=False)`: a text that is no number is null), so that a format moved into the
//! core keeps its columns. Before the conversion, some spellings may stand for null (nginx's `-`), and a JSON string's
//! escapes of `"`, `\` and `/` may be undone (nginx's `escape=json`).

/// What a field's text is turned into.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Type {
    Str,
    Int,
    Float,
    /// how many items a `,`-separated list holds (0 when it is blank): a prompt's token ids
    Items,
}

impl Type {
    pub fn parse(name: &str) -> Result<Type, String> {
        match name {
            "str" => Ok(Type::Str),
            "int" => Ok(Type::Int),
            "float" => Ok(Type::Float),
            "items" => Ok(Type::Items),
            other => Err(format!("no field type {other:?} (str, int, float, items)")),
        }
    }
}

/// An optional sign and ASCII digits, within i64: what polars' cast reads.
pub fn int(s: &[u8]) -> Option<i64> {
    std::str::from_utf8(s).ok()?.parse::<i64>().ok()
}

/// Rust's float syntax (digits, a point, an exponent; `inf`, `infinity`, `nan` in any case, signed), the one polars'
/// cast reads: the same bits, a negative NaN included.
pub fn float(s: &[u8]) -> Option<f64> {
    std::str::from_utf8(s).ok()?.parse::<f64>().ok()
}

/// The items of a `,`-separated list: its commas and one, 0 when it is only white space (Unicode's too).
pub fn items(s: &[u8]) -> i64 {
    let blank = std::str::from_utf8(s).is_ok_and(|t| t.trim().is_empty());
    if blank {
        0
    } else {
        memchr::memchr_iter(b',', s).count() as i64 + 1
    }
}

/// `\"`, `\\` and `\/` undone, left to right (a regex replace of `\\(["\\/])` by `$1`).
pub fn unescape_json(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\\' && i + 1 < s.len() && matches!(s[i + 1], b'"' | b'\\' | b'/') {
            out.push(s[i + 1]);
            i += 2;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_polars_reads_them() {
        assert_eq!(int(b"+12"), Some(12));
        assert_eq!(int(b"1.0"), None);
        assert_eq!(int(b" 1"), None);
        assert_eq!(int(b"9223372036854775808"), None);
        assert_eq!(float(b"1."), Some(1.0));
        assert_eq!(float(b"-NaN").map(f64::to_bits), Some(0xfff8000000000000));
        assert_eq!(float(b"Infinity"), Some(f64::INFINITY));
        assert_eq!(float(b"0x10"), None);
    }

    #[test]
    fn list_items() {
        assert_eq!(items(b"1, 2, 3"), 3);
        assert_eq!(items(b"  "), 0);
        assert_eq!(items(b""), 0);
        assert_eq!(items(b"7"), 1);
    }

    #[test]
    fn json_escapes() {
        assert_eq!(unescape_json(br#"a\"b\\\/c\n\"#), br#"a"b\/c\n\"#.to_vec());
    }
}
