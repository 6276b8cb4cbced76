use super::*;

fn rules() -> Rules {
    // the parser's patterns, cut to what these lines need (the real ones: parsers/_vllm_lines.py)
    Rules {
        tb: Regex::new(r#"^(?:\s|Traceback \(most recent call last\)|File "|[A-Za-z_][\w.]*Error\b|$)"#)
            .unwrap(),
        strong: Regex::new(r#"^(?:\s*Traceback \(most recent call last\)|\s*File "|[A-Za-z_][\w.]*Error\b)"#)
            .unwrap(),
        noise: Regex::new(r"^Triton is installed").unwrap(),
        stop_leads: vec![b"[shutdown]".to_vec()],
        stop_any: memmem::Finder::new(b"trigger received signal=SIGTERM").into_owned(),
        start_leads: vec![b"Starting vLLM".to_vec()],
        request_line: Regex::new(r"^(?:Received request|Added request|Finished request)").unwrap(),
        event_words: Regex::new(r"Starting vLLM|output_handler failed").unwrap(),
    }
}

// lab run `calm`, vllm-server.log lines 957-962 (the header cut off by the header scan), then vllm-public 09's
// raw traceback (no header) and its engine's next line
const KEY: &[u8] = b"(APIServer pid=17282) ERROR 11-29 08:51:31 [async_llm.py:906]";
const ROWS: [(Option<&[u8]>, &[u8]); 9] = [
    (Some(b"INFO"), b"[shutdown] MPClient: complete"),
    (Some(b"ERROR"), b"AsyncLLM output_handler failed."),
    (Some(b"ERROR"), b"Traceback (most recent call last):"),
    (
        Some(b"ERROR"),
        b"  File \"/opt/vllm/venv/lib/python3.11/site-packages/vllm/v1/engine/async_llm.py\", line 849",
    ),
    (
        Some(b"ERROR"),
        b"    outputs = await engine_core.get_output_async()",
    ),
    (None, b"Traceback (most recent call last):"),
    (
        None,
        b"  File \"/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/openai/api_server.py\", line 371",
    ),
    (
        None,
        b"    generator = await handler.create_chat_completion(request, raw_request)",
    ),
    (Some(b"INFO"), b"Starting vLLM API server on http://0.0.0.0:8000"),
];

fn run(range: std::ops::Range<usize>, prev: &Carried) -> (Table, Carried) {
    let first = range.start;
    let rows = &ROWS[range];
    let keys: Vec<Option<&[u8]>> = rows
        .iter()
        .enumerate()
        .map(|(i, (l, _))| {
            l.map(|_| {
                if first + i == 0 {
                    &b"INFO 11-29 08:51:31 [core_client.py:777]"[..]
                } else {
                    KEY
                }
            })
        })
        .collect();
    let r = Rows {
        msg: rows.iter().map(|(_, m)| Some(*m)).collect(),
        lvl: rows.iter().map(|(l, _)| *l).collect(),
        uv: vec![None; rows.len()],
        pyname: vec![None; rows.len()],
        key: keys,
        plen: rows.iter().map(|(_, m)| Some(m.len() as i64 + 64)).collect(),
        cr: vec![Some(0); rows.len()],
        joined: vec![Some(0); rows.len()],
    };
    classify(&rules(), &r, prev)
}

fn bools(t: &Table, name: &str) -> Vec<Option<bool>> {
    let i = t.names.iter().position(|n| n == name).unwrap();
    match &t.columns[i] {
        Column::Bool(c) => (0..c.len)
            .map(|j| {
                c.validity
                    .is_valid(j)
                    .then_some(c.bits[j / 8] & (1 << (j % 8)) != 0)
            })
            .collect(),
        _ => panic!("{name} is not boolean"),
    }
}

fn recs(t: &Table) -> Vec<i64> {
    let i = t.names.iter().position(|n| n == "rec").unwrap();
    match &t.columns[i] {
        Column::I64(c) => c.values.clone(),
        _ => panic!("rec is not int64"),
    }
}

#[test]
fn kleene_logic_is_polars() {
    assert_eq!(and(None, Some(false)), Some(false));
    assert_eq!(and(None, Some(true)), None);
    assert_eq!(or(None, Some(true)), Some(true));
    assert_eq!(or(None, Some(false)), None);
    assert_eq!(not(None), None);
}

#[test]
fn an_error_and_its_tracebacks_are_records() {
    let (t, after) = run(0..9, &Carried::default());
    // the error's repeated header continues it; the raw traceback after it continues the open record too
    assert_eq!(recs(&t), vec![1, 2, 2, 2, 2, 2, 2, 2, 3]);
    let tbs = bools(&t, "tbs");
    assert_eq!(tbs[5..8], [Some(true); 3]);
    assert_eq!(tbs[..5], [Some(false); 5]);
    assert_eq!(bools(&t, "strong")[5..8], [Some(true), Some(true), Some(false)]);
    assert_eq!(bools(&t, "ok"), vec![Some(true); 9]);
    // the records' first rows; the error and the start are events by themselves, the shutdown's INFO line is not
    let lead = bools(&t, "lead");
    assert_eq!(
        lead,
        [vec![Some(true); 2], vec![Some(false); 6], vec![Some(true)]].concat()
    );
    let evt = bools(&t, "evt");
    assert_eq!(
        evt,
        [
            vec![Some(false), Some(true)],
            vec![Some(false); 6],
            vec![Some(true)]
        ]
        .concat()
    );
    // '[shutdown]' began the shutdown; 'Starting vLLM' ended it
    assert_eq!(
        bools(&t, "stopping"),
        [vec![Some(true); 8], vec![Some(false)]].concat()
    );
    assert_eq!(
        (after.rec, after.stopping, after.key.as_deref()),
        (3, false, Some(KEY))
    );
}

#[test]
fn the_carried_state_joins_chunks() {
    let (whole, end) = run(0..9, &Carried::default());
    for cut in 1..9 {
        let (a, mid) = run(0..cut, &Carried::default());
        let (b, after) = run(cut..9, &mid);
        assert_eq!([recs(&a), recs(&b)].concat(), recs(&whole), "cut at {cut}");
        let cont = [bools(&a, "cont"), bools(&b, "cont")].concat();
        assert_eq!(cont, bools(&whole, "cont"), "cut at {cut}");
        assert_eq!(after, end);
    }
}
