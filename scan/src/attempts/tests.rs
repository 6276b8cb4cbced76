use super::*;

/// A row's kind, key (and thread), status and time.
type Row<'a> = (&'a str, Option<&'a str>, Option<i64>, Option<i64>);

/// Rows' columns: the other columns null, `seq` and `line_no` the row's index.
struct Cols<'a> {
    kind: Vec<Option<&'a [u8]>>,
    key: Vec<Option<&'a [u8]>>,
    none_s: Vec<Option<&'a [u8]>>,
    seq: Vec<Option<i64>>,
    line_no: Vec<Option<i64>>,
    ts: Vec<Option<i64>>,
    status: Vec<Option<i64>>,
    none_i: Vec<Option<i64>>,
    none_f: Vec<Option<f64>>,
}

fn cols<'a>(r: &[Row<'a>]) -> Cols<'a> {
    let n = r.len();
    Cols {
        kind: r.iter().map(|x| Some(x.0.as_bytes())).collect(),
        key: r.iter().map(|x| x.1.map(str::as_bytes)).collect(),
        none_s: vec![None; n],
        seq: (0..n as i64).map(Some).collect(),
        line_no: (1..=n as i64).map(Some).collect(),
        ts: r.iter().map(|x| x.3).collect(),
        status: r.iter().map(|x| x.2).collect(),
        none_i: vec![None; n],
        none_f: vec![None; n],
    }
}

fn run(r: &[Row<'_>], debug: bool) -> (Table, Table) {
    let c = cols(r);
    let e = Events {
        kind: &c.kind,
        key: &c.key,
        thread: &c.key,
        url: &c.none_s,
        err: &c.none_s,
        rid: &c.none_s,
        lab_err: &c.none_s,
        seq: &c.seq,
        line_no: &c.line_no,
        ts: &c.ts,
        rt: &c.none_i,
        status: &c.status,
        max_retries: &c.none_i,
        max_tokens: &c.none_i,
        lab_status: &c.none_i,
        latency: &c.none_f,
        delay: &c.none_f,
    };
    assert!(e.even());
    let close = Close {
        done_lines: false,
        last: false,
        wait: 0,
    };
    let (t, rows, _) = attempts(&e, debug, &close);
    (t, rows)
}

fn ints(t: &Table, name: &str) -> Vec<Option<i64>> {
    let i = t.names.iter().position(|n| n == name).unwrap();
    match &t.columns[i] {
        Column::I64(c) | Column::Micros(c) => (0..c.values.len())
            .map(|j| c.validity.is_valid(j).then_some(c.values[j]))
            .collect(),
        _ => panic!("{name} is not an integer column"),
    }
}

#[test]
fn a_debug_attempt_starts_at_its_first_line_before_a_send() {
    let (t, per_row) = run(
        &[
            ("response", Some("t1"), Some(200), Some(5)), // before the thread's first attempt: none
            ("build", Some("t1"), None, Some(10)),
            ("send", Some("t1"), None, Some(11)),
            ("build", Some("t2"), None, Some(12)),
            ("response", Some("t1"), Some(500), Some(13)),
            ("exc", None, None, None), // with the thread of the line before it (t1)
            ("build", Some("t1"), None, Some(14)),
            ("send", Some("t1"), None, Some(15)),
        ],
        true,
    );

    // sorted by thread key, then first row: t1's two attempts, then t2's
    assert_eq!(ints(&t, "att"), vec![Some(1), Some(2), Some(1)]);
    assert_eq!(ints(&t, "first_seq"), vec![Some(1), Some(6), Some(3)]);
    assert_eq!(ints(&t, "ts_start"), vec![Some(10), Some(14), Some(12)]);
    assert_eq!(ints(&t, "ts_out"), vec![Some(13), None, None]);
    assert_eq!(ints(&t, "status"), vec![Some(500), None, None]);
    // the traceback's line follows the key of the line before it (t1's response)
    assert_eq!(
        ints(&per_row, "a"),
        vec![
            None,
            Some(0),
            Some(0),
            Some(2),
            Some(0),
            Some(0),
            Some(1),
            Some(1)
        ]
    );
}

#[test]
fn an_info_retry_after_a_failed_response_is_the_same_attempt() {
    let (t, per_row) = run(
        &[
            ("httpx", Some("/r"), Some(502), Some(1)),
            ("retrying", Some("/r"), None, Some(2)), // after a status >= 400: no new attempt
            ("retrying", Some("/r"), None, Some(3)), // after a retry: a new attempt (one without a response)
            ("httpx", Some("/r"), Some(200), Some(4)),
        ],
        false,
    );

    assert_eq!(ints(&t, "att"), vec![Some(1), Some(2), Some(3)]);
    assert_eq!(ints(&t, "ts_start"), vec![None, None, None]);
    assert_eq!(ints(&t, "ts_out"), vec![Some(1), Some(3), Some(4)]);
    assert_eq!(ints(&per_row, "a"), vec![Some(0), Some(0), Some(1), Some(2)]);
}

#[test]
fn a_thread_of_no_name_takes_the_key_before_it_at_info() {
    let (t, _) = run(
        &[
            ("httpx", Some("/a"), Some(200), Some(1)),
            ("httpx", None, Some(200), Some(2)), // no thread nor route: the key before it
            ("httpx", Some("/b"), Some(200), Some(3)),
        ],
        false,
    );

    assert_eq!(ints(&t, "tid"), vec![Some(0), Some(0), Some(1)]);
    assert_eq!(ints(&t, "att"), vec![Some(1), Some(2), Some(1)]);
}

fn flags(t: &Table, name: &str) -> Vec<bool> {
    let i = t.names.iter().position(|n| n == name).unwrap();
    match &t.columns[i] {
        Column::Bool(c) => (0..c.len).map(|j| (c.bits[j / 8] >> (j % 8)) & 1 == 1).collect(),
        _ => panic!("{name} is not a boolean column"),
    }
}

#[test]
fn a_retried_attempt_and_the_next_are_one_request_closed_when_the_thread_moves_on() {
    let r = [
        ("httpx", Some("/a"), Some(502), Some(1)),
        ("retrying", Some("/a"), None, Some(2)),
        ("httpx", Some("/a"), Some(200), Some(3)),
        ("httpx", Some("/a"), Some(500), Some(4)),
    ];
    for last in [false, true] {
        let c = cols(&r);
        let e = Events {
            kind: &c.kind,
            key: &c.key,
            thread: &c.key,
            url: &c.none_s,
            err: &c.none_s,
            rid: &c.none_s,
            lab_err: &c.none_s,
            seq: &c.seq,
            line_no: &c.line_no,
            ts: &c.ts,
            rt: &c.none_i,
            status: &c.status,
            max_retries: &c.none_i,
            max_tokens: &c.none_i,
            lab_status: &c.none_i,
            latency: &c.none_f,
            delay: &c.none_f,
        };
        let close = Close {
            done_lines: false,
            last,
            wait: 0,
        };
        let (t, _, done_lines) = attempts(&e, false, &close);
        assert!(!done_lines);
        assert_eq!(ints(&t, "lg"), vec![Some(1), Some(1), Some(2)]);
        assert_eq!(ints(&t, "_g"), vec![Some(1), Some(1), Some(2)]);
        // the first request: its thread moved on; the second ended on a 500 (no end): open until the log ends
        assert_eq!(flags(&t, "closed"), vec![true, true, last]);
        assert_eq!(flags(&t, "_open_end"), vec![false, false, last]);
    }
}
