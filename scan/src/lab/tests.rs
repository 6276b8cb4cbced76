use super::*;

/// A record: its kind, rid, retry count, time (seconds), status.
type Rec<'a> = (&'a str, Option<&'a str>, Option<i64>, Option<i64>, Option<i64>);

struct Cols<'a> {
    kind: Vec<Option<&'a [u8]>>,
    rid: Vec<Option<&'a [u8]>>,
    none_s: Vec<Option<&'a [u8]>>,
    file: Vec<Option<i64>>,
    seq: Vec<Option<i64>>,
    rc: Vec<Option<i64>>,
    t: Vec<Option<i64>>,
    status: Vec<Option<i64>>,
}

fn cols<'a>(recs: &[Rec<'a>]) -> Cols<'a> {
    let n = recs.len();
    Cols {
        kind: recs.iter().map(|x| Some(x.0.as_bytes())).collect(),
        rid: recs.iter().map(|x| x.1.map(str::as_bytes)).collect(),
        none_s: vec![None; n],
        file: vec![Some(0); n],
        seq: (0..n as i64).map(Some).collect(),
        rc: recs.iter().map(|x| x.2).collect(),
        t: recs.iter().map(|x| x.3.map(|s| s * 1_000_000)).collect(),
        status: recs.iter().map(|x| x.4).collect(),
    }
}

/// The flush of these records, each request record with `end` (seconds), `error` and `timeout` (seconds).
fn run(recs: &[Rec<'_>], reqs: &[(Option<i64>, Option<&str>, Option<f64>)], last: bool) -> Flushed {
    let c = cols(recs);
    let r = Rows {
        kind: &c.kind,
        file: &c.file,
        rid: &c.rid,
        seq: &c.seq,
        line_no: &c.seq,
        client: &c.none_s,
        url: &c.none_s,
        trace_id: &c.none_s,
        span_id: &c.none_s,
        rc: &c.rc,
        t: &c.t,
        status: &c.status,
    };
    let m = reqs.len();
    let none_s: Vec<Option<&[u8]>> = vec![None; m];
    let none_i: Vec<Option<i64>> = vec![None; m];
    let none_f: Vec<Option<f64>> = vec![None; m];
    let end: Vec<Option<i64>> = reqs.iter().map(|x| x.0.map(|s| s * 1_000_000)).collect();
    let error: Vec<Option<&[u8]>> = reqs.iter().map(|x| x.1.map(str::as_bytes)).collect();
    let timeout: Vec<Option<f64>> = reqs.iter().map(|x| x.2).collect();
    let q = Reqs {
        phase: &none_s,
        send: &none_i,
        end: &end,
        error: &error,
        latency: &none_f,
        max_tokens: &none_i,
        stream: &none_i,
        output_tokens: &none_i,
        ttft: &none_f,
        timeout: &timeout,
        max_retries: &none_i,
    };
    assert!(r.even() && q.even());
    flush(&r, &q, &Lookups::default(), last, b"src")
}

fn col<'t>(t: &'t Table, name: &str) -> &'t Column {
    &t.columns[t.names.iter().position(|n| n == name).expect(name)]
}

fn ints(t: &Table, name: &str) -> Vec<Option<i64>> {
    match col(t, name) {
        Column::I64(c) | Column::Micros(c) => (0..c.values.len())
            .map(|i| c.validity.is_valid(i).then_some(c.values[i]))
            .collect(),
        _ => panic!("{name} is no integer column"),
    }
}

fn strs(t: &Table, name: &str) -> Vec<Option<Vec<u8>>> {
    match col(t, name) {
        Column::Str(c) => (0..c.len())
            .map(|i| c.validity.is_valid(i).then(|| c.get(i)))
            .collect(),
        _ => panic!("{name} is no string column"),
    }
}

#[test]
fn a_rid_reused_after_its_request_is_another_request() {
    let recs = [
        ("attempt_send", Some("a"), Some(0), Some(10), None),
        ("attempt_response", Some("a"), Some(0), Some(11), Some(200)),
        ("request", Some("a"), None, Some(12), Some(200)),
        ("attempt_send", Some("a"), Some(0), Some(20), None),
        ("attempt_send", Some("b"), Some(0), Some(21), None),
    ];
    let f = run(&recs, &[(Some(12), None, Some(30.0))], false);
    // the second 'a' and 'b' wait for their request records
    assert_eq!(f.carry, [false, false, false, true, true]);
    assert_eq!(ints(&f.attempts, "ts_end"), [Some(12_000_000)]);
    assert_eq!(ints(&f.requests, "attempts"), [Some(1)]);
    let end = run(&recs, &[(Some(12), None, Some(30.0))], true);
    assert_eq!(end.carry, [false; 5]);
    assert_eq!(ints(&end.attempts, "attempt"), [Some(1), Some(1), Some(1)]);
    assert_eq!(end.requests.len(), 1);
}

#[test]
fn an_attempt_without_response_timed_out_or_lost_its_connection() {
    let recs = [
        ("attempt_send", Some("a"), Some(0), Some(0), None),
        ("attempt_send", Some("a"), Some(1), Some(30), None),
        ("attempt_send", Some("a"), Some(2), Some(31), None),
        ("attempt_response", Some("a"), Some(2), Some(32), Some(200)),
        ("request", Some("a"), None, Some(33), Some(200)),
    ];
    let f = run(&recs, &[(Some(33), None, Some(30.0))], false);
    let errors: Vec<Option<Vec<u8>>> =
        vec![Some(b"Timeout".to_vec()), Some(b"ConnectionError".to_vec()), None];
    assert_eq!(strs(&f.attempts, "error"), errors);
    // the first capped at the next send, the last at the request's end
    assert_eq!(
        ints(&f.attempts, "ts_end"),
        [Some(30_000_000), Some(31_000_000), Some(33_000_000)]
    );
    // without a timeout setting, whether it timed out is unknown: no error said
    let f = run(&recs, &[(Some(33), None, None)], false);
    assert_eq!(strs(&f.attempts, "error"), [None, None, None]);
}

#[test]
fn a_null_retry_count_sorts_first_and_matches_no_response() {
    let recs = [
        ("attempt_send", Some("a"), Some(0), Some(5), None),
        ("attempt_send", Some("a"), None, Some(1), None),
        ("attempt_send", Some("a"), None, Some(2), None),
        ("attempt_response", Some("a"), None, Some(6), Some(200)),
        ("request", Some("a"), None, Some(9), Some(200)),
        ("request", None, None, Some(9), Some(200)),
    ];
    let f = run(&recs, &[(Some(9), Some("APITimeoutError"), Some(60.0))], false);
    // one send per count (the nulls one), in row order; the row without a rid waits for ever
    assert_eq!(ints(&f.attempts, "attempt"), [Some(1), None]);
    assert_eq!(ints(&f.attempts, "status"), [None, None]);
    assert!(*f.carry.last().unwrap());
    // the null count's attempt ends at the next send; the last one at the request's end, with its timeout error
    assert_eq!(ints(&f.attempts, "ts_end"), [Some(9_000_000), Some(5_000_000)]);
    let timed_out: Vec<Option<Vec<u8>>> = vec![
        Some(b"APITimeoutError".to_vec()),
        Some(b"ConnectionError".to_vec()),
    ];
    assert_eq!(strs(&f.attempts, "error"), timed_out);
}
