//! The decoder against what polars' `str.json_decode` gave for the same lines (measured on polars 1.x/2.x; the
//! Python oracle test, tests/test_scan_client_jsonl.py, checks every real client log and mutated lines).

use super::*;
use crate::column::Column;

fn keys(names: &[&str], hint: Option<&str>) -> Keys {
    Keys::new(
        names.iter().map(|n| n.as_bytes().to_vec()).collect(),
        names.iter().position(|n| *n == "kind"),
        vec![b"attempt_send".to_vec()],
        names.iter().map(|n| *n != "b").collect(),
        hint.map(|h| Regex::new(h).unwrap()),
    )
}

/// Each line's values, None when it gave no row.
fn run(k: &Keys, lines: &[&str]) -> Vec<Option<Vec<Option<String>>>> {
    let t = decode(k, lines.iter().map(|l| Some(l.as_bytes())));
    let Column::I64(row) = &t.columns[0] else { panic!() };
    let mut out = vec![None; lines.len()];
    for (r, &i) in row.values.iter().enumerate() {
        let vals = t.columns[1..]
            .iter()
            .map(|c| {
                let Column::Str(c) = c else { panic!() };
                c.validity
                    .is_valid(r)
                    .then(|| String::from_utf8(c.get(r)).unwrap())
            })
            .collect();
        out[i as usize] = Some(vals);
    }
    out
}

fn one(line: &str) -> Option<Vec<Option<String>>> {
    run(&keys(&["a", "b"], None), &[line]).pop().unwrap()
}

fn a(v: &str) -> Option<Vec<Option<String>>> {
    Some(vec![Some(v.to_string()), None])
}

#[test]
fn numbers_as_polars_prints_them() {
    for (n, want) in [
        ("1795940955.1313837", "1795940955.1313837"),
        ("1e5", "100000"),
        ("-0.0", "-0"),
        ("-0", "0"),
        ("1E+02", "100"),
        ("0.1000", "0.1"),
        ("1.5e-7", "0.00000015"),
        ("123456789012345678901234567890", "123456789012345678901234567890"),
        ("9007199254740993", "9007199254740993"),
        ("1.0", "1"),
        ("1e-400", "0"),
        ("-1e-400", "-0"),
        ("123456789.123456789", "123456789.12345679"),
        ("1e22", "10000000000000000000000"),
    ] {
        assert_eq!(one(&format!("{{\"a\": {n}}}")), a(want), "{n}");
    }
    for bad in ["01", "1.", ".5", "1e", "-", "1e400", "-1e400", "NaN", "+1"] {
        assert_eq!(one(&format!("{{\"a\": {bad}}}")), None, "{bad}");
    }
}

#[test]
fn strings_escapes_and_surrogates() {
    assert_eq!(one(r#"{"a": "\u00e9\ud83d\ude00"}"#), a("é😀"));
    assert_eq!(one(r#"{"a": "pre\ud83dpost"}"#), a("pre\0post"));
    assert_eq!(one(r#"{"a": "\ud800\\"}"#), a("\0\\"));
    assert_eq!(one(r#"{"a": "\/\b\f\n\r\t\"\\"}"#), a("/\u{8}\u{c}\n\r\t\"\\"));
    for bad in [
        r#""\ude00""#,
        r#""\ud83d\u0041""#,
        r#""\q""#,
        r#""\u12""#,
        "\"tab\there\"",
        "\"x",
    ] {
        assert_eq!(one(&format!("{{\"a\": {bad}}}")), None, "{bad}");
    }
    // keys are unescaped before they are matched; a bad string anywhere is an error
    assert_eq!(one(r#"{"ki\u0061": 1, "\u0061":"esc"}"#), a("esc"));
    assert_eq!(one(r#"{"c": "\ude00", "a": 1}"#), None);
}

#[test]
fn first_occurrence_wins_and_containers() {
    assert_eq!(one(r#"{"a": "x", "a": "y"}"#), a("x"));
    assert_eq!(one(r#"{"a": null, "a": "v"}"#), Some(vec![None, None]));
    assert_eq!(one(r#"{"a": "x", "a": {}}"#), a("x"));
    assert_eq!(one(r#"{"a": {}, "a": "x"}"#), None);
    assert_eq!(
        one(r#"{"c": {"a": 5}, "b": true}"#),
        Some(vec![None, Some("true".into())])
    );
    assert_eq!(one(r#"{"a": [1, 2]}"#), None);
    let deep = |d: usize| format!("{{\"c\": {}{}, \"a\": 1}}", "[".repeat(d), "]".repeat(d));
    assert_eq!(one(&deep(1022)), a("1"));
    assert_eq!(one(&deep(1023)), None);
}

#[test]
fn whitespace_and_the_object_alone() {
    assert_eq!(one(" {\"a\":\"s\"}\t"), a("s"));
    assert_eq!(one("\r{\"a\" :1 }\r"), a("1"));
    assert_eq!(one("{}"), Some(vec![None, None]));
    for bad in [
        "{\"a\": 1} {\"b\": 2}",
        "{\"a\": 1}}",
        "\u{a0}{\"a\": 1}",
        "\u{c}{\"a\": 1}",
        "{\"a\": 1,}",
        "[1]",
    ] {
        assert_eq!(one(bad), None, "{bad:?}");
    }
    assert_eq!(one("{\"a\":\n1}"), None); // a line holding a newline is no candidate
}

#[test]
fn narrow_kinds_give_their_keys_only() {
    let k = keys(&["kind", "a", "b"], Some(r#""kind"\s*:\s*"attempt_send""#));
    let got = run(
        &k,
        &[
            r#"{"kind": "attempt_send", "a": 1, "b": 2}"#,
            r#"{"kind": "attempt_send", "a": 1, "b": {}}"#,
            r#"{"kind": "attempt\u005fsend", "a": 1, "b": {}}"#,
            r#"{"kind": "request", "a": 1, "b": 2}"#,
        ],
    );
    let s = |v: &str| Some(v.to_string());
    assert_eq!(got[0], Some(vec![s("attempt_send"), s("1"), None]));
    assert_eq!(got[1], Some(vec![s("attempt_send"), s("1"), None]));
    assert_eq!(got[2], None); // no hint in its text: read with every key, and b is an object
    assert_eq!(got[3], Some(vec![s("request"), s("1"), s("2")]));
}
