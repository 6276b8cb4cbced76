use super::*;

fn patterns() -> Patterns {
    // parsers/_openai_lines.py's
    let r = |p: &str| Regex::new(p).unwrap();
    Patterns {
        level: r(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):"),
        console: r(r"^\s*(?:\S{1,3}\s+)?\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?\] "),
        final_words: r(
            r"APIConnectionError|Connection error\.|APITimeoutError|Request timed out\.|Error code: ",
        ),
        final_timeout: r(r"APITimeoutError|\bRequest timed out\."),
        final_conn: r(r"APIConnectionError|\bConnection error\."),
        final_status: r(r"(?:^|: )Error code: \d{3}\b"),
        exc: r(r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception|Timeout|Exit|Interrupt))(?::|$)"),
        not_thread: r(r"^\d{4}-| - "),
        err_class: r(r"^([A-Za-z_]\w*)"),
    }
}

/// A line as the scan read it: its text, the scan's kind index, lead, stamp and thread.
type Row<'a> = (
    &'a str,
    Option<i64>,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
);

fn run(rows: &[Row<'_>], in_exc: bool) -> Chunk {
    let b = |v: Option<&str>| v.map(|s| s.as_bytes().to_vec());
    let line: Vec<Option<&[u8]>> = rows.iter().map(|r| Some(r.0.as_bytes())).collect();
    let own: Vec<[Option<Vec<u8>>; 3]> = rows.iter().map(|r| [b(r.2), b(r.3), b(r.4)]).collect();
    let col = |k: usize| -> Vec<Option<&[u8]>> { own.iter().map(|o| o[k].as_deref()).collect() };
    let (lead, stamp, thread) = (col(0), col(1), col(2));
    let none: Vec<Option<&[u8]>> = vec![None; rows.len()];
    let kind: Vec<Option<i64>> = rows.iter().map(|r| r.1).collect();
    let mut s: [&dyn Strs; 6] = [&none; 6];
    s[LINE] = &line;
    s[LEAD] = &lead;
    s[STAMP] = &stamp;
    s[THREAD] = &thread;
    events(&Scanned { s, kind: &kind }, &patterns(), in_exc)
}

fn strs(t: &Table, name: &str) -> Vec<Option<String>> {
    let i = t.names.iter().position(|n| n == name).unwrap();
    match &t.columns[i] {
        Column::Str(c) => (0..c.len())
            .map(|r| {
                c.validity
                    .is_valid(r)
                    .then(|| String::from_utf8(c.get(r)).unwrap())
            })
            .collect(),
        _ => panic!("{name} is no string column"),
    }
}

const T: Option<&str> = Some("2026-11-29T08:30:27");

#[test]
fn a_traceback_continues_its_encountered_line_across_chunks() {
    let tb = [
        (
            "x Encountered Exception",
            Some(0),
            Some("conn_error"),
            T,
            Some("w1"),
        ),
        ("Traceback (most recent call last):", None, None, None, None),
        ("httpx.ConnectError: [Errno 111] refused", None, None, None, None),
    ];
    let got = run(&tb, false);
    assert_eq!(got.in_exc, Some(true));
    assert_eq!(
        strs(&got.events, "kind"),
        ["conn_error", "exc"].map(|s| Some(s.into()))
    );
    assert_eq!(strs(&got.events, "err")[1].as_deref(), Some("ConnectError"));
    // the next chunk opens inside it, until a line with a time
    let next = run(
        &[
            (
                "openai.APIConnectionError: Connection error.",
                None,
                None,
                None,
                None,
            ),
            (
                "2026-11-29T08:30:28 INFO app [w1] fine",
                Some(1),
                None,
                T,
                Some("w1"),
            ),
        ],
        true,
    );
    assert_eq!(strs(&next.events, "kind"), [Some("exc".into())]);
    assert_eq!(strs(&next.events, "err"), [Some("APIConnectionError".into())]);
    assert_eq!(next.in_exc, Some(false));
    // a chunk of traceback lines alone leaves the state as it was
    assert_eq!(run(&tb[1..], true).in_exc, None);
    assert_eq!(next.other, 1); // the application's own record
}

#[test]
fn a_last_error_in_an_applications_line_and_polars_nulls() {
    let got = run(
        &[
            (
                "2026-11-29T08:30:27 ERROR app [w1] failed: Request timed out.",
                Some(1),
                None,
                T,
                Some("w1"),
            ),
            ("some words of nothing", None, None, None, None),
            (
                "2026-11-29 08:30:27 [2026-11-29 - x] ok",
                Some(1),
                None,
                T,
                Some("2026-11-29 - x"),
            ),
        ],
        false,
    );
    assert_eq!(strs(&got.events, "kind"), [Some("final_timeout".into())]);
    assert_eq!(strs(&got.events, "err"), [Some("APITimeoutError".into())]);
    // no kind matched the second line: whether it holds a message is unknown, and so is whether it was recognised
    // (polars' Kleene logic); the third is another logger's record
    let ok: Vec<Option<bool>> = (0..3)
        .map(|r| {
            got.ok
                .validity
                .is_valid(r)
                .then(|| got.ok.bits[r / 8] >> (r % 8) & 1 == 1)
        })
        .collect();
    assert_eq!(ok, [Some(true), None, Some(true)]);
    assert_eq!((got.other, got.events.len()), (1, 1));
}
