use memchr::memmem;

use super::*;

fn lit(s: &str) -> Step {
    Step::Lit(s.as_bytes().to_vec())
}
fn run(c: &str, min: usize, max: usize) -> Step {
    Step::Run {
        class: Class::parse(c).unwrap(),
        min,
        max,
        lazy: false,
    }
}
fn until(s: &str) -> Step {
    Step::Until(memmem::Finder::new(s.as_bytes()).into_owned())
}
fn cap(slot: usize, steps: Vec<Step>) -> Step {
    Step::Capture { slot, steps }
}
fn kind(steps: Vec<Step>) -> Kind {
    Kind {
        name: "k".into(),
        anchors: vec![],
        steps,
    }
}
fn fields(k: &Kind, line: &str, n: usize) -> Option<Vec<Option<String>>> {
    match_kind(k, line.as_bytes(), n).map(|spans| {
        spans
            .into_iter()
            .map(|(a, b)| (a != u32::MAX).then(|| line[a as usize..b as usize].to_string()))
            .collect()
    })
}

#[test]
fn separators_and_literals() {
    let k = kind(vec![
        cap(0, vec![until(" ")]),
        lit(" - "),
        cap(1, vec![Step::Rest]),
        Step::End { cr: true },
    ]);
    assert_eq!(
        fields(&k, "1.2.3.4 - rest of it\r", 2).unwrap(),
        [Some("1.2.3.4".into()), Some("rest of it\r".into())]
    );
    assert!(fields(&k, "1.2.3.4 + x", 2).is_none());
}

#[test]
fn runs_backtrack_as_a_regex_does() {
    // [0-9]*\.?[0-9]+ then the end: "12" must give the last digit to the second run
    let k = kind(vec![
        cap(0, vec![run("0-9", 0, usize::MAX)]),
        Step::opt(vec![lit(".")]),
        cap(1, vec![run("0-9", 1, usize::MAX)]),
        Step::End { cr: false },
    ]);
    assert_eq!(fields(&k, "12", 2).unwrap(), [Some("1".into()), Some("2".into())]);
}

#[test]
fn optional_groups_leave_their_fields_null() {
    let k = kind(vec![
        cap(0, vec![run("a-z", 1, usize::MAX)]),
        Step::opt(vec![lit("{"), cap(1, vec![until("}")]), lit("}")]),
        lit(" "),
        Step::End { cr: false },
    ]);
    assert_eq!(
        fields(&k, "abc{x} ", 2).unwrap(),
        [Some("abc".into()), Some("x".into())]
    );
    assert_eq!(fields(&k, "abc ", 2).unwrap(), [Some("abc".into()), None]);
}

#[test]
fn nginx_upstream_lists() {
    // [^\s,"]*(?:(?:, | : )[^\s,"=]*)* then a quote
    let list = vec![
        run("^\\s,\"", 0, usize::MAX),
        Step::repeat(
            vec![
                Step::alt(vec![vec![lit(", ")], vec![lit(" : ")]]),
                run("^\\s,\"=", 0, usize::MAX),
            ],
            0,
            usize::MAX,
        ),
    ];
    let k = kind(vec![
        lit("ua=\""),
        cap(0, list),
        lit("\" x"),
        Step::End { cr: false },
    ]);
    assert_eq!(
        fields(&k, "ua=\"127.0.0.1:1, a : b\" x", 1).unwrap(),
        [Some("127.0.0.1:1, a : b".into())]
    );
    // no-break spaces are white space to `\s`
    assert!(fields(&k, "ua=\"a\u{a0}b\" x", 1).is_none());
}

#[test]
fn lazy_and_quoted() {
    let k = kind(vec![
        cap(0, vec![Step::Lazy]),
        cap(1, vec![run("0-9", 1, usize::MAX)]),
        Step::End { cr: false },
    ]);
    assert_eq!(
        fields(&k, "ab12", 2).unwrap(),
        [Some("ab".into()), Some("12".into())]
    );
    let q = kind(vec![
        lit("\""),
        cap(0, vec![Step::Quoted(b'"')]),
        lit("\""),
        Step::End { cr: false },
    ]);
    assert_eq!(fields(&q, r#""a\"b""#, 1).unwrap(), [Some(r#"a\"b"#.into())]);
}

/// The spans by backtracking alone (no first, possessive attempt).
fn by_backtracking(k: &Kind, line: &str, n: usize) -> Option<Vec<(u32, u32)>> {
    let mut m = Matcher {
        line: line.as_bytes(),
        spans: vec![UNSET; n],
        budget: budget(line.as_bytes()),
        choice: false,
        saves: Vec::new(),
    };
    m.seq(&k.steps, 0, &mut |_, _| true).then_some(m.spans)
}

#[test]
fn a_lazy_steps_rest_is_matched_once_as_backtracking_does() {
    // (\d{4})?(?:^|.*?(?:\[([^\]\[]+)\])?[\s:])(go|went)! : openai-python's prefix, thread and message lead
    let mut prefix = vec![
        Step::Lazy,
        Step::opt(vec![lit("["), cap(1, vec![run("^][", 1, usize::MAX)]), lit("]")]),
        run("\\s:", 1, 1),
        cap(2, vec![Step::alt(vec![vec![lit("go")], vec![lit("went")]])]),
    ];
    lazy_at(&mut prefix);
    assert!(matches!(prefix[0], Step::LazyAt(_)));
    let k = kind(vec![
        Step::opt(vec![cap(0, vec![run("0-9", 4, 4)])]),
        Step::alt(vec![vec![Step::Start, cap(2, vec![lit("go")])], prefix]),
        lit("!"),
    ]);
    let lines = [
        "2026 [t1] go!",
        "2026 a go b go!", // the first lead the lazy step finds is not followed by '!': backtracking finds the next
        "go!",
        "1234go!",
        "2026:went!",
        "x [t] [u] went!",
        "2026 [t1] go",
        "",
    ];
    for line in lines {
        assert_eq!(
            match_kind(&k, line.as_bytes(), 3),
            by_backtracking(&k, line, 3),
            "{line}"
        );
    }
    assert_eq!(
        fields(&k, "2026 a go b go!", 3).unwrap(),
        [Some("2026".into()), None, Some("go".into())]
    );
    assert_eq!(
        fields(&k, "x [t] [u] went!", 3).unwrap(),
        [None, Some("u".into()), Some("went".into())]
    );
    assert!(fields(&k, "1234go!", 3).is_none());
}

#[test]
fn lazy_runs_take_the_fewest() {
    // ([^\s,]+?)\.?(?:\s|$): the id leaves its last '.' to the optional dot
    let lazy = Step::Run {
        class: Class::parse("^\\s,").unwrap(),
        min: 1,
        max: usize::MAX,
        lazy: true,
    };
    let k = kind(vec![
        cap(0, vec![lazy]),
        Step::opt(vec![lit(".")]),
        Step::alt(vec![vec![run("\\s", 1, 1)], vec![Step::End { cr: false }]]),
    ]);
    assert_eq!(fields(&k, "ab.", 1).unwrap(), [Some("ab".into())]);
    assert_eq!(fields(&k, "a.b. x", 1).unwrap(), [Some("a.b".into())]);
    assert_eq!(fields(&k, "é. x", 1).unwrap(), [Some("é".into())]);
    assert!(fields(&k, "ab,", 1).is_none());
}

#[test]
fn find_all_takes_leftmost_records() {
    let k = kind(vec![lit("<"), until(">"), lit(">")]);
    assert_eq!(find_all(&[k], b"x<a><b> <c"), vec![(1, 4), (4, 7)]);
}

#[test]
fn classes_read_unicode_space() {
    let c = Class::parse("^\\s,").unwrap();
    assert_eq!(c.at("é".as_bytes()), (true, 2));
    assert_eq!(c.at("\u{2028}".as_bytes()), (false, 3));
    assert_eq!(c.at(b","), (false, 1));
}

#[test]
fn a_lazy_steps_places_are_tried_possessively() {
    // openai-python's prefix read place by place, what follows each tried on its first path (no backtracking work)
    let mut prefix = vec![
        Step::Lazy,
        Step::opt(vec![
            lit("["),
            cap(1, vec![run("^][", 1, usize::MAX)]),
            lit("]"),
            Step::Run {
                class: Class::parse("\\s:\\-").unwrap(),
                min: 0,
                max: usize::MAX,
                lazy: true,
            },
        ]),
        run("\\s:", 1, 1),
        cap(2, vec![Step::alt(vec![vec![lit("go")], vec![lit("went")]])]),
        Step::opt(vec![lit(" x="), cap(3, vec![run("0-9", 1, usize::MAX)])]),
        lit("!"),
    ];
    lazy_at(&mut prefix);
    let k = kind(vec![
        Step::opt(vec![cap(0, vec![run("0-9", 4, 4)])]),
        Step::alt(vec![vec![Step::Start, cap(2, vec![lit("go")])], prefix]),
    ]);
    let lines = [
        "2026 lvl name [t1] go x=5!",
        "2026 lvl [t1] goes [t2] - went!", // the first thread's place fails: its field is not kept
        "2026 [t1] go x=!",
        "2026 [t1]:-: go!",
        "2026 [t1] -go!",
        "2026 a go b go!",
        "x [t] [u] went!",
    ];
    for line in lines {
        assert_eq!(
            match_kind(&k, line.as_bytes(), 4),
            by_backtracking(&k, line, 4),
            "{line}"
        );
    }
    assert_eq!(
        fields(&k, "2026 lvl [t1] goes [t2] - went!", 4).unwrap(),
        [Some("2026".into()), Some("t2".into()), Some("went".into()), None]
    );
    // the places before the message cost a step each: backtracking through them took more than this budget
    let line = b"2026 lvl name x [t1] go x=5!";
    let mut m = Matcher {
        line,
        spans: vec![UNSET; 4],
        budget: 8,
        choice: false,
        saves: Vec::new(),
    };
    assert!(matches!(m.fast(&k.steps, 0), Fast::Ok(28)));
    assert_eq!(m.spans[3], (26, 27));
}
