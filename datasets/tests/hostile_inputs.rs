//! What a model's tool call can make the executor do is bounded: huge strings, thousands
//! of arguments, deep nesting and repetition bombs give an error value through every
//! entry point (the call-string parser, executing a call line, the JSON reader, the
//! lambda evaluator), quickly and without a panic or a huge allocation.

use std::time::{Duration, Instant};

use datasets::bfcl::executor::{bounded_output, output_text, Executor, MAX_OUTPUT_BYTES};
use datasets::bfcl::pyjson;
use datasets::bfcl::pyparse::{from_json_str, parse_call, parse_expr};
use datasets::bfcl::python::MAX_DEPTH;
use datasets::bfcl::released::parse_json;

/// Generous even for a debug build on a busy machine; the bombs would take minutes or
/// gigabytes without the bounds.
const FAST: Duration = Duration::from_secs(20);

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    assert!(start.elapsed() < FAST, "{what} took {:?}", start.elapsed());
    out
}

/// `otb exec`: parse one call line and execute it; the line the user sees.
fn exec_line(ex: &Executor, line: &str) -> String {
    match parse_call(line) {
        Ok(c) => output_text(&ex.execute_call(&c)),
        Err(e) => format!("cannot parse: {e}"),
    }
}

#[test]
fn ten_megabyte_strings() {
    let ex = Executor::simulated(0);
    let big = "x".repeat(10 << 20);
    let line = format!("get_movie_director(movie_name='{big}')");
    let out = timed("10 MB argument", || exec_line(&ex, &line));
    assert!(out.len() <= MAX_OUTPUT_BYTES + 100, "{} bytes", out.len());
    // through the JSON reader, then shown bounded
    let json = format!("{{\"movie_name\": \"{big}\"}}");
    let v = timed("10 MB JSON", || pyjson::loads(&json)).unwrap();
    let shown = bounded_output(&v.repr());
    assert!(shown.len() <= MAX_OUTPUT_BYTES + 100);
    assert!(
        shown.ends_with("bytes in all, the first 65536 shown]"),
        "{}",
        &shown[shown.len() - 80..]
    );
    // a pure function on it raises Python's TypeError
    let line = format!("calculate_mean(numbers='{big}')");
    let out = timed("10 MB pure", || exec_line(&ex, &line));
    assert_eq!(
        out,
        "TypeError: unsupported operand type(s) for +: 'int' and 'str'"
    );
}

#[test]
fn ten_thousand_arguments() {
    let ex = Executor::simulated(0);
    let many = vec!["1"; 10_000].join(", ");
    let out = timed("10,000 positional", || {
        exec_line(&ex, &format!("calculate_mean({many})"))
    });
    // CPython 3.11.7: def calculate_mean(numbers): ...; calculate_mean(*[1]*10000)
    assert_eq!(
        out,
        "TypeError: calculate_mean() takes 1 positional argument but 10000 were given"
    );
    let kws: Vec<String> = (0..10_000).map(|i| format!("a{i}=1")).collect();
    let out = timed("10,000 keywords", || {
        exec_line(&ex, &format!("calculate_mean({})", kws.join(", ")))
    });
    assert_eq!(
        out,
        "TypeError: calculate_mean() got an unexpected keyword argument 'a0'"
    );
    let obj: Vec<String> = (0..10_000).map(|i| format!("\"a{i}\": 1")).collect();
    let obj = format!("{{{}}}", obj.join(", "));
    let args: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&obj).unwrap();
    let err = timed("10,000 JSON arguments", || {
        ex.execute_json("calculate_mean", "function_1", &args)
    })
    .unwrap_err();
    assert_eq!(
        err.text(),
        "function_1() got an unexpected keyword argument 'a0'"
    );
    let v = timed("10,000 keys", || pyjson::loads(&obj)).unwrap();
    assert_eq!(v.repr().matches(": 1").count(), 10_000);
}

#[test]
fn depth_two_hundred_on_every_parse_path() {
    assert_eq!(MAX_DEPTH, 100);
    let nested = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let err = timed("call", || parse_call(&format!("f(a={nested})"))).unwrap_err();
    assert!(err.message.contains("nested too deeply"), "{err}");
    assert!(parse_call(&format!("f({nested})")).is_err());
    assert!(parse_expr(&nested).is_err());
    assert!(parse_expr(&format!("{}1", "-".repeat(200))).is_err());
    let err = timed("json", || pyjson::loads(&nested)).unwrap_err();
    assert_eq!(err.kind, "RecursionError");
    assert!(from_json_str(&nested).is_err());
    assert!(parse_json(&nested).is_err());
    let objects = format!("{}1{}", "{\"a\": ".repeat(200), "}".repeat(200));
    assert!(pyjson::loads(&objects).is_err());
    // depth 100 is still fine everywhere
    let ok = format!("{}{}", "[".repeat(99), "]".repeat(99));
    assert!(parse_call(&format!("f(a={ok})")).is_ok());
    assert!(pyjson::loads(&ok).is_ok());
    // a lambda body nested 200 deep
    let ex = Executor::simulated(0);
    let body = format!("{}x{}", "(".repeat(200), ")".repeat(200));
    let out = timed("lambda", || {
        exec_line(
            &ex,
            &format!("estimate_derivative(function='lambda x: {body}', x=1)"),
        )
    });
    assert!(out.contains("nested too deeply"), "{out}");
}

#[test]
fn repetition_bombs_via_every_entry_point() {
    let ex = Executor::simulated(0);
    // literal arguments of a call line are evaluated by the parser
    for bomb in [
        "[0]*(10**9)",
        "'a'*10**10",
        "(0,)*10**9",
        "[0]*10**6 + [0]*10**7",
    ] {
        let err = timed(bomb, || parse_call(&format!("f(a={bomb})"))).unwrap_err();
        assert!(err.message.starts_with("MemoryError"), "{bomb}: {err}");
        let out = exec_line(&ex, &format!("calculate_mean(numbers={bomb})"));
        assert!(out.starts_with("cannot parse"), "{out}");
    }
    // CPython 3.11.7: [0]*(10**20) -> OverflowError: cannot fit 'int' into an
    // index-sized integer; 'ab'*(2**62) -> OverflowError: repeated string is too long;
    // [0,1]*(2**62) -> MemoryError (empty text)
    let err = parse_expr("[0]*(10**20)").unwrap_err();
    assert!(
        err.message
            .starts_with("OverflowError: cannot fit 'int' into an index-sized integer"),
        "{err}"
    );
    assert!(parse_expr("'ab'*(2**62)")
        .unwrap_err()
        .message
        .starts_with("OverflowError: repeated string is too long"));
    assert!(parse_expr("[0,1]*(2**62)")
        .unwrap_err()
        .message
        .starts_with("MemoryError"));
    assert_eq!(parse_expr("[0]*(-10**9)").unwrap().repr(), "[]");
    // inside a lambda (estimate_derivative evaluates its argument)
    for body in ["[0]*10**9", "\"a\"*10**10", "\"a\"*4000000 + \"a\"*4000000"] {
        let out = timed(body, || {
            exec_line(
                &ex,
                &format!("estimate_derivative(function='lambda x: {body}', x=1)"),
            )
        });
        assert_eq!(out, "MemoryError: ", "{body}");
    }
    // JSON cannot repeat, but it can spell a huge int (CPython's 4300-digit limit)
    let err = pyjson::loads(&"9".repeat(100_000)).unwrap_err();
    assert_eq!(err.kind, "ValueError");
}

#[test]
fn lambda_evaluation_has_a_step_budget() {
    let ex = Executor::simulated(0);
    // 2**40 calls in CPython; the evaluator stops after its budget
    let f = "lambda x: (lambda f: f(f, 40))(lambda g, n: 0 if n == 0 else g(g, n-1) + g(g, n-1))";
    let out = timed("exponential lambda", || {
        exec_line(&ex, &format!("estimate_derivative(function='{f}', x=1)"))
    });
    assert!(
        out.starts_with("RuntimeError: evaluation step budget exceeded"),
        "{out}"
    );
    // small recursion is still fine: 2**8 calls
    let f = "lambda x: (lambda f: f(f, 8))(lambda g, n: x if n == 0 else g(g, n-1) + g(g, n-1))";
    let out = exec_line(&ex, &format!("estimate_derivative(function='{f}', x=1)"));
    assert!(out.parse::<f64>().is_ok(), "{out}");
}

#[test]
fn huge_results_are_errors_and_shown_text_is_bounded() {
    let ex = Executor::simulated(0);
    // ~42 MB of repr in CPython
    let out = timed("fibonacci 19999", || {
        exec_line(&ex, "get_fibonacci_sequence(n=19999)")
    });
    assert!(
        out.starts_with("MemoryError: tool result too large"),
        "{out}"
    );
    // below the limit the value is exact; only the text shown is cut
    let c = parse_call("get_fibonacci_sequence(n=1000)").unwrap();
    let v = ex.execute_call(&c).unwrap();
    assert!(v.repr().len() > MAX_OUTPUT_BYTES);
    let shown = output_text(&Ok(v));
    assert!(shown.len() < MAX_OUTPUT_BYTES + 100);
    assert!(shown.contains("[output truncated: "));
}
