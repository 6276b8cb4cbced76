//! One JSON object line, checked whole, its wanted keys' first values kept as text (the rules: `jsonl`).

use super::Keys;

/// What a wanted key holds: not seen, null, text at `scratch[a..b]`, or an object or array (an error if given).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Slot {
    Unset,
    Null,
    At(usize, usize),
    Bad,
}

/// polars' decoder stops at this depth (the line's object is 1)
const MAX_DEPTH: usize = 1023;

pub struct Bad;

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

/// Read `line` as one JSON object (whitespace around it allowed), filling `slots` from `scratch`.
pub fn object(line: &[u8], keys: &Keys, slots: &mut [Slot], scratch: &mut Vec<u8>) -> Result<(), Bad> {
    let mut p = P { s: line, i: 0 };
    p.ws();
    p.eat(b'{')?;
    p.ws();
    let mut key = Vec::new();
    if p.peek() == Some(b'}') {
        p.i += 1;
    } else {
        loop {
            key.clear();
            p.string(Some(&mut key))?;
            p.ws();
            p.eat(b':')?;
            p.ws();
            match keys.index(&key).filter(|&k| slots[k] == Slot::Unset) {
                Some(k) => slots[k] = p.kept(scratch)?,
                None => p.value(None, 2)?,
            }
            p.ws();
            match p.next()? {
                b',' => p.ws(),
                b'}' => break,
                _ => return Err(Bad),
            }
        }
    }
    p.ws();
    if p.i == p.s.len() { Ok(()) } else { Err(Bad) }
}

impl P<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn next(&mut self) -> Result<u8, Bad> {
        let b = self.peek().ok_or(Bad)?;
        self.i += 1;
        Ok(b)
    }

    fn eat(&mut self, b: u8) -> Result<(), Bad> {
        if self.next()? == b { Ok(()) } else { Err(Bad) }
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// A wanted key's value: scalars as text into `scratch`, containers checked and marked.
    fn kept(&mut self, scratch: &mut Vec<u8>) -> Result<Slot, Bad> {
        let a = scratch.len();
        match self.peek().ok_or(Bad)? {
            b'{' | b'[' => {
                self.value(None, 2)?;
                return Ok(Slot::Bad);
            }
            b'n' => {
                self.literal(b"null")?;
                return Ok(Slot::Null);
            }
            _ => self.value(Some(scratch), 2)?,
        }
        Ok(Slot::At(a, scratch.len()))
    }

    /// Any value at nesting `depth`; a scalar's text appended to `out` when given.
    fn value(&mut self, out: Option<&mut Vec<u8>>, depth: usize) -> Result<(), Bad> {
        match self.peek().ok_or(Bad)? {
            b'"' => self.string(out),
            b't' => self.literal_into(b"true", out),
            b'f' => self.literal_into(b"false", out),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(out),
            b'{' | b'[' if depth > MAX_DEPTH => Err(Bad),
            b'{' => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.string(None)?;
                    self.ws();
                    self.eat(b':')?;
                    self.ws();
                    self.value(None, depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => self.ws(),
                        b'}' => return Ok(()),
                        _ => return Err(Bad),
                    }
                }
            }
            b'[' => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.value(None, depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => self.ws(),
                        b']' => return Ok(()),
                        _ => return Err(Bad),
                    }
                }
            }
            _ => Err(Bad),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Bad> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(Bad)
        }
    }

    fn literal_into(&mut self, word: &[u8], out: Option<&mut Vec<u8>>) -> Result<(), Bad> {
        self.literal(word)?;
        if let Some(out) = out {
            out.extend_from_slice(word);
        }
        Ok(())
    }

    /// A string (at its quote), unescaped into `out` when given.
    fn string(&mut self, mut out: Option<&mut Vec<u8>>) -> Result<(), Bad> {
        self.eat(b'"')?;
        loop {
            let start = self.i;
            while let Some(&b) = self.s.get(self.i) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.i += 1;
            }
            if let Some(o) = out.as_deref_mut() {
                o.extend_from_slice(&self.s[start..self.i]);
            }
            match self.next()? {
                b'"' => return Ok(()),
                b'\\' => self.escape(out.as_deref_mut())?,
                _ => return Err(Bad), // a control character
            }
        }
    }

    fn escape(&mut self, out: Option<&mut Vec<u8>>) -> Result<(), Bad> {
        let c = match self.next()? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                match hi {
                    0xDC00..=0xDFFF => return Err(Bad),
                    0xD800..=0xDBFF if self.s[self.i..].starts_with(b"\\u") => {
                        self.i += 2;
                        let lo = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&lo) {
                            return Err(Bad);
                        }
                        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)).ok_or(Bad)?
                    }
                    0xD800..=0xDBFF => '\0', // polars' reading of a high surrogate alone
                    _ => char::from_u32(hi).ok_or(Bad)?,
                }
            }
            _ => return Err(Bad),
        };
        if let Some(out) = out {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, Bad> {
        let digits = self.s.get(self.i..self.i + 4).ok_or(Bad)?;
        let mut v = 0;
        for &d in digits {
            v = v * 16 + (d as char).to_digit(16).ok_or(Bad)?;
        }
        self.i += 4;
        Ok(v)
    }

    /// A number: an integer as written (`-0` as `0`), one with a fraction or exponent as f64 printed plainly.
    fn number(&mut self, out: Option<&mut Vec<u8>>) -> Result<(), Bad> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return Err(Bad),
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.i += 1;
            float = true;
            self.some_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            float = true;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.some_digits()?;
        }
        let text = &self.s[start..self.i];
        if float {
            // ASCII digits only, so UTF-8
            let v: f64 = std::str::from_utf8(text)
                .map_err(|_| Bad)?
                .parse()
                .map_err(|_| Bad)?;
            if !v.is_finite() {
                return Err(Bad);
            }
            if let Some(out) = out {
                use std::io::Write;
                write!(out, "{v}").map_err(|_| Bad)?;
            }
        } else if let Some(out) = out {
            out.extend_from_slice(if text == b"-0" { b"0" } else { text });
        }
        Ok(())
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
    }

    fn some_digits(&mut self) -> Result<(), Bad> {
        let start = self.i;
        self.digits();
        if self.i > start { Ok(()) } else { Err(Bad) }
    }
}
