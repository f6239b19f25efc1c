//! Tests of the REST backends (recorded, simulated, the chain).

use std::collections::HashMap;
use std::path::PathBuf;

use md5::{Digest as _, Md5};

use super::backend::PyResult;
use super::calendar::*;
use super::recorded::*;
use super::simulated::*;
use super::*;
use crate::bfcl::python::exec::parse_call;
use num_traits::ToPrimitive;

fn kw(pairs: &[(&str, PyValue)]) -> Vec<(String, PyValue)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn s(x: &str) -> PyValue {
    PyValue::str(x)
}

fn sim(name: &str, args: &[(&str, PyValue)]) -> PyResult {
    SimulatedBackend::new(7)
        .execute(name, &kw(args))
        .expect("a REST function")
}

/// One ground-truth-shaped call per REST function.
#[rustfmt::skip]
fn sample_calls() -> Vec<(&'static str, Vec<(String, PyValue)>)> {
    let f = PyValue::Float;
    vec![
        ("get_weather_data", kw(&[("coordinates", PyValue::List(vec![f(90.0), f(0.0)]))])),
        ("get_coordinates_from_city", kw(&[("city_name", s("Paris"))])),
        ("convert_currency", kw(&[("amount", PyValue::int(5000)), ("from_currency", s("EUR")), ("to_currency", s("JPY"))])),
        ("find_term_on_urban_dictionary", kw(&[("term", s("lit"))])),
        ("get_coordinate_by_ip_address", kw(&[("ip_address", s("8.8.8.8"))])),
        ("get_zipcode_by_ip_address", kw(&[("ip_address", s("8.8.8.8"))])),
        ("get_covid_death_by_country", kw(&[("country", s("Brazil"))])),
        ("get_active_covid_case_by_country", kw(&[("country", s("Spain"))])),
        ("get_rating_by_amazon_ASIN", kw(&[("ASIN", s("B08BHXG144"))])),
        ("get_price_by_amazon_ASIN", kw(&[("ASIN", s("B08PPDJWC8"))])),
        ("get_product_name_by_amazon_ASIN", kw(&[("ASIN", s("B07ZPKBL9V"))])),
        ("get_company_name_by_stock_name", kw(&[("stock_name", s("AAPL"))])),
        ("get_stock_price_by_stock_name", kw(&[("stock_name", s("MSFT"))])),
        ("get_stock_history", kw(&[("stock_name", s("AAPL")), ("interval", s("1mo")), ("diffandsplits", s("true"))])),
        ("retrieve_city_based_on_zipcode", kw(&[("zipcode", s("90210"))])),
        ("retrieve_holiday_by_year", kw(&[("year", s("2010")), ("country", s("FR"))])),
        ("get_time_zone_by_coord", kw(&[("long", s("-80.75")), ("lat", s("35.22"))])),
        ("get_movie_rating", kw(&[("movie_name", s("Avatar"))])),
        ("get_movie_director", kw(&[("movie_name", s("Pulp Fiction"))])),
    ]
}

fn shared_bfcl_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/otb/bfcl");
    dir.is_dir().then_some(dir)
}

// -- canonical strings ------------------------------------------------------------

#[test]
fn canonical_string_keeps_keyword_order_and_uses_repr() {
    let args = kw(&[("year", s("2010")), ("country", s("FR"))]);
    assert_eq!(
        canonical_call_string("retrieve_holiday_by_year", &args),
        "retrieve_holiday_by_year(year='2010', country='FR')"
    );
    let coords = kw(&[(
        "coordinates",
        PyValue::List(vec![PyValue::Float(90.0), PyValue::Float(0.0)]),
    )]);
    assert_eq!(
        canonical_call_string("get_weather_data", &coords),
        "get_weather_data(coordinates=[90.0, 0.0])"
    );
    let quoted = kw(&[("movie_name", s("Schindler's List"))]);
    assert_eq!(
        canonical_call_string("get_movie_rating", &quoted),
        "get_movie_rating(movie_name=\"Schindler's List\")"
    );
    assert_eq!(canonical_call_string("f", &[]), "f()");
    // md5 of the string: the key format of the recorded file.
    assert_eq!(call_key("f", &[]), hex::encode(Md5::digest(b"f()")));
}

#[test]
fn rest_function_list_is_complete_and_distinct() {
    let mut names = REST_FUNCTIONS.to_vec();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 19);
    assert!(REST_FUNCTIONS.iter().all(|n| is_rest(n)));
    assert!(!is_rest("calc_binomial_probability"));
    let sampled: Vec<&str> = sample_calls().iter().map(|c| c.0).collect();
    assert_eq!(sampled, REST_FUNCTIONS.to_vec());
}

// -- recorded ---------------------------------------------------------------------

/// Every REST ground truth of exec_simple and exec_multiple (the calls the paper
/// executed) must be found in the recorded responses under its canonical string;
/// in exec_multiple the exact-match ones must equal the stored `execution_result`.
#[test]
fn recorded_hits_every_rest_ground_truth() {
    let Some(dir) = shared_bfcl_dir() else {
        eprintln!("skipped recorded_hits_every_rest_ground_truth: ../shared/data/otb/bfcl absent");
        return;
    };
    let recorded = RecordedBackend::from_file(dir.join("recorded_api_responses.json"))
        .expect("recorded responses load");
    assert_eq!(recorded.len(), 654);
    let (mut total, mut hits) = (0usize, 0usize);
    let mut misses = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for config in [
        "executable_simple_base_config.json",
        "executable_multiple_function_base_config.json",
    ] {
        let text = std::fs::read_to_string(dir.join("tool_configs").join(config))
            .expect("base config readable");
        let json: serde_json::Value = serde_json::from_str(&text).expect("base config JSON");
        let tests = json["tests"].as_array().expect("tests array");
        for t in tests {
            let calls = t["ground_truth"].as_array().expect("ground_truth array");
            for (i, gt) in calls.iter().enumerate() {
                let call = parse_call(gt.as_str().expect("string call")).expect("parses");
                if !is_rest(&call.name) {
                    continue;
                }
                seen.insert(call.name.clone());
                total += 1;
                match recorded.call(&call.name, &call.kwargs) {
                    Some(Ok(out)) => {
                        hits += 1;
                        let expected = &t["execution_result"][i];
                        let exact = t["execution_result_type"][i] == "exact_match";
                        if !expected.is_null() && exact {
                            assert!(
                                out.py_eq(&PyValue::from_json(expected)),
                                "{config} test {}: recorded {} != stored {}",
                                t["test_id"],
                                out.repr(),
                                expected
                            );
                        }
                    }
                    _ => misses.push(canonical_call_string(&call.name, &call.kwargs)),
                }
            }
        }
    }
    eprintln!(
        "recorded hit rate for REST ground truths: {hits}/{total} ({:.1}%), {} functions",
        100.0 * hits as f64 / total.max(1) as f64,
        seen.len()
    );
    assert_eq!(seen.len(), 19, "every REST function has a ground truth");
    assert!(misses.is_empty(), "misses: {misses:#?}");
    assert_eq!(total, 57);
}

#[test]
fn recorded_backend_reports_bad_files_with_their_path() {
    let missing = Path::new("/nonexistent/dir/recorded_api_responses.json");
    let err = RecordedBackend::from_file(missing).unwrap_err();
    assert!(matches!(err, RestError::Io { .. }));
    assert!(err
        .to_string()
        .contains("/nonexistent/dir/recorded_api_responses.json"));

    let err =
        RecordedBackend::from_json_str("{\"ab\": {\"output\": 1, \"err", "r.json").unwrap_err();
    assert!(matches!(err, RestError::Json { .. }), "{err}");
    assert!(err.to_string().contains("r.json") && err.to_string().contains("truncated"));

    let err = RecordedBackend::from_json_str("[1, 2]", "r.json").unwrap_err();
    assert!(matches!(err, RestError::Format { .. }), "{err}");
    let err = RecordedBackend::from_json_str("{\"ab\": {\"error\": null}}", "r.json").unwrap_err();
    assert!(err.to_string().contains("no \"output\""), "{err}");
}

#[test]
fn recorded_backend_answers_by_key_and_falls_through_on_miss() {
    let hit = kw(&[("movie_name", s("Avatar"))]);
    let err_call = kw(&[("movie_name", s("Nope"))]);
    let text = format!(
        "{{\"{}\": {{\"output\": [\"1.5\", \"2\"], \"error\": null}}, \
          \"{}\": {{\"output\": null, \"error\": \"KeyError: 'Rated'\"}}}}",
        call_key("get_movie_rating", &hit),
        call_key("get_movie_rating", &err_call)
    );
    let rec = RecordedBackend::from_json_str(&text, "mem").expect("loads");
    assert_eq!(rec.len(), 2);
    let out = rec
        .call("get_movie_rating", &hit)
        .expect("hit")
        .expect("ok");
    assert_eq!(out.repr(), "['1.5', '2']");
    let e = rec
        .call("get_movie_rating", &err_call)
        .expect("hit")
        .unwrap_err();
    assert_eq!(
        (e.kind.as_str(), e.message.as_str()),
        ("KeyError", "'Rated'")
    );
    assert!(rec.call("get_movie_director", &hit).is_none());
    assert_eq!(recorded_exception("boom").kind, "Exception");
}

/// Python's json reads huge ints exactly and overflowing floats as inf; the
/// recorded file has a big factorial that serde_json alone rejects.
#[test]
fn recorded_backend_reads_numbers_like_python_json() {
    let a = kw(&[("n", PyValue::int(1))]);
    let b = kw(&[("n", PyValue::int(2))]);
    let c = kw(&[("n", PyValue::int(3))]);
    let text = format!(
        "{{\"{}\": {{\"output\": [-123456789012345678901234567890, 1e400, 12, 2.5], \"error\": null}},\n\
          \"{}\": {{\"output\": \"99999999999999999999999 \\\" 1e999\", \"error\": null}},\n\
          \"{}\": {{\"output\": {{\"k\": 100000000000000000000}}, \"error\": null}}}}",
        call_key("f", &a),
        call_key("f", &b),
        call_key("f", &c)
    );
    let rec = RecordedBackend::from_json_str(&text, "mem").expect("loads");
    let out = |args: &[(String, PyValue)]| rec.call("f", args).expect("hit").expect("ok").repr();
    assert_eq!(out(&a), "[-123456789012345678901234567890, inf, 12, 2.5]");
    assert_eq!(out(&b), "'99999999999999999999999 \" 1e999'");
    assert_eq!(out(&c), "{'k': 100000000000000000000}");
}

// -- chain and live ---------------------------------------------------------------

#[test]
fn chain_falls_through_to_simulated_and_reports_total_misses() {
    let empty = RecordedBackend::from_json_str("{}", "mem").expect("loads");
    let chain = BackendChain::new(vec![
        Box::new(empty.clone()),
        Box::new(SimulatedBackend::new(1)),
    ]);
    assert_eq!(chain.names(), vec!["recorded", "simulated"]);
    let out = chain
        .call("get_movie_director", &kw(&[("movie_name", s("Avatar"))]))
        .expect("simulated answers");
    assert!(out.py_eq(&s("James Cameron")));

    let only_recorded = BackendChain::new(vec![Box::new(empty)]);
    let e = only_recorded
        .call("get_movie_director", &kw(&[("movie_name", s("Avatar"))]))
        .unwrap_err();
    assert_eq!(e.kind, "LookupError");
    assert!(e
        .message
        .contains("get_movie_director(movie_name='Avatar')"));
    assert!(e.message.contains("tried: recorded"));

    let e = BackendChain::simulated(0)
        .call("math_gcd", &[])
        .unwrap_err();
    assert!(e.message.contains("not a REST function"));
    assert!(BackendChain::new(vec![])
        .call("get_movie_rating", &[])
        .is_err());
}

#[test]
fn paper_chain_needs_the_recorded_file() {
    let err = BackendChain::paper("/nonexistent/recorded.json", 0).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/recorded.json"));
    if let Some(dir) = shared_bfcl_dir() {
        let chain = BackendChain::paper(dir.join("recorded_api_responses.json"), 0).expect("loads");
        let out = chain
            .call("get_movie_rating", &kw(&[("movie_name", s("Avatar"))]))
            .expect("recorded");
        assert!(out.py_eq(&s("PG-13")));
    } else {
        eprintln!("skipped the recorded half of paper_chain_needs_the_recorded_file");
    }
}

#[test]
fn live_chain_has_no_fallback() {
    let chain = BackendChain::live(LiveBackend::disabled());
    assert_eq!(chain.names(), vec!["live"]);
    for (name, args) in sample_calls() {
        assert!(live_endpoint(name, &args).is_some(), "{name}");
        let e = chain.call(name, &args).unwrap_err();
        assert!(e.message.starts_with("live backend not enabled: "), "{e}");
    }
}

// -- simulated: determinism and types ---------------------------------------------

#[test]
fn simulated_is_deterministic_per_seed() {
    for (name, args) in sample_calls() {
        let a = SimulatedBackend::new(42)
            .execute(name, &args)
            .expect("REST");
        let b = SimulatedBackend::new(42)
            .execute(name, &args)
            .expect("REST");
        match (a, b) {
            (Ok(x), Ok(y)) => assert_eq!(x.repr(), y.repr(), "{name}"),
            (Err(x), Err(y)) => assert_eq!(x, y, "{name}"),
            _ => panic!("{name}: outcome changed between runs"),
        }
    }
    // Real-time values move with the seed; static facts do not.
    let price = |seed| {
        SimulatedBackend::new(seed)
            .execute(
                "get_stock_price_by_stock_name",
                &kw(&[("stock_name", s("AAPL"))]),
            )
            .expect("REST")
            .expect("ok")
            .repr()
    };
    assert_ne!(price(1), price(2));
    let director = |seed| {
        SimulatedBackend::new(seed)
            .execute("get_movie_director", &kw(&[("movie_name", s("Avatar"))]))
            .expect("REST")
            .expect("ok")
            .repr()
    };
    assert_eq!(director(1), director(2));
    assert!(SimulatedBackend::new(0).execute("math_gcd", &[]).is_none());
}

/// Pins a few values so that an accidental change of the world shows up.
#[test]
fn simulated_values_are_stable() {
    let w = SimulatedBackend::new(0);
    let call = |name: &str, args: &[(&str, PyValue)]| {
        w.execute(name, &kw(args))
            .expect("REST")
            .expect("ok")
            .repr()
    };
    assert_eq!(
        call("get_coordinates_from_city", &[("city_name", s("Paris"))]),
        "('48.8534951', '2.3483915')"
    );
    assert_eq!(
        call("retrieve_city_based_on_zipcode", &[("zipcode", s("90210"))]),
        "'BEVERLY HILLS'"
    );
    assert_eq!(
        call(
            "get_company_name_by_stock_name",
            &[("stock_name", s("GOOGL"))]
        ),
        "'Alphabet Inc.'"
    );
    assert_eq!(
        call(
            "get_time_zone_by_coord",
            &[("long", s("-80.75")), ("lat", s("35.22"))]
        ),
        "'America/New_York'"
    );
    assert_eq!(
        call(
            "get_time_zone_by_coord",
            &[("long", s("123.45")), ("lat", s("-67.89"))]
        ),
        "'Antarctica/Casey'"
    );
    assert_eq!(
        call(
            "get_time_zone_by_coord",
            &[("long", s("-140")), ("lat", s("0"))]
        ),
        "'Etc/GMT+9'"
    );
    assert_eq!(
        call("get_movie_rating", &[("movie_name", s("avatar "))]),
        "'PG-13'"
    );
    // A currency converts at the (seeded) cross rate: same currency is exact.
    assert_eq!(
        call(
            "convert_currency",
            &[
                ("amount", PyValue::int(5000)),
                ("from_currency", s("EUR")),
                ("to_currency", s("EUR"))
            ]
        ),
        "5000.0"
    );
}

fn assert_float(v: &PyValue) -> f64 {
    match v {
        PyValue::Float(x) => *x,
        other => panic!("expected a float, got {}", other.repr()),
    }
}

#[test]
fn simulated_return_types_match_the_originals() {
    let out: HashMap<&str, PyValue> = sample_calls()
        .into_iter()
        .map(|(name, args)| {
            let v = SimulatedBackend::new(3)
                .execute(name, &args)
                .expect("REST")
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, v)
        })
        .collect();
    let t = assert_float(&out["get_weather_data"]);
    assert!((-40.0..=130.0).contains(&t) && round_to(t, 1) == t);
    match &out["get_coordinates_from_city"] {
        PyValue::Tuple(v) => {
            assert_eq!(v.len(), 2);
            assert!(v.iter().all(|x| matches!(x, PyValue::Str(_))));
        }
        other => panic!("{}", other.repr()),
    }
    let yen = assert_float(&out["convert_currency"]);
    assert!((700_000.0..1_000_000.0).contains(&yen), "{yen}");
    assert!(matches!(
        out["find_term_on_urban_dictionary"],
        PyValue::Str(_)
    ));
    match &out["get_coordinate_by_ip_address"] {
        PyValue::Tuple(v) => assert!(v.iter().all(|x| matches!(x, PyValue::Float(_)))),
        other => panic!("{}", other.repr()),
    }
    assert!(matches!(out["get_zipcode_by_ip_address"], PyValue::Str(_)));
    assert!(matches!(out["get_covid_death_by_country"], PyValue::Int(_)));
    assert!(matches!(
        out["get_active_covid_case_by_country"],
        PyValue::Int(_)
    ));
    let rating = out["get_rating_by_amazon_ASIN"].py_str();
    assert!(
        rating.len() == 3 && rating.as_bytes()[1] == b'.',
        "{rating}"
    );
    let price = out["get_price_by_amazon_ASIN"].py_str();
    assert!(
        price.starts_with('$') && price.as_bytes()[price.len() - 3] == b'.',
        "{price}"
    );
    assert!(matches!(
        out["get_product_name_by_amazon_ASIN"],
        PyValue::Str(_)
    ));
    assert!(out["get_company_name_by_stock_name"].py_eq(&s("Apple Inc.")));
    assert_float(&out["get_stock_price_by_stock_name"]);
    match &out["get_stock_history"] {
        PyValue::Dict(entries) => {
            assert_eq!(entries.len(), 10);
            for (k, v) in entries {
                assert!(k.py_str().chars().all(|c| c.is_ascii_digit()));
                let PyValue::Dict(fields) = v else {
                    panic!("{}", v.repr())
                };
                let names: Vec<String> = fields.iter().map(|(k, _)| k.py_str()).collect();
                assert_eq!(
                    names,
                    ["date", "date_utc", "open", "high", "low", "close", "volume", "adjclose"]
                );
            }
        }
        other => panic!("{}", other.repr()),
    }
    assert!(out["retrieve_city_based_on_zipcode"].py_eq(&s("BEVERLY HILLS")));
    match &out["retrieve_holiday_by_year"] {
        PyValue::List(days) => {
            assert_eq!(days.len(), 11);
            let PyValue::Dict(first) = &days[0] else {
                panic!()
            };
            assert_eq!(first.len(), 9);
        }
        other => panic!("{}", other.repr()),
    }
    assert!(out["get_time_zone_by_coord"].py_eq(&s("America/New_York")));
    assert!(out["get_movie_rating"].py_eq(&s("PG-13")));
    assert!(out["get_movie_director"].py_eq(&s("Quentin Tarantino")));
}

#[test]
fn stock_history_ends_at_the_quote_on_market_dates() {
    let quote = sim(
        "get_stock_price_by_stock_name",
        &[("stock_name", s("AAPL"))],
    )
    .expect("ok");
    let hist = |interval: &str| {
        let PyValue::Dict(entries) = sim(
            "get_stock_history",
            &[("stock_name", s("AAPL")), ("interval", s(interval))],
        )
        .expect("ok") else {
            panic!("not a dict")
        };
        entries
    };
    let monthly = hist("1mo");
    let (last_key, last) = monthly.last().expect("10 entries");
    // 2025-07-01 00:00 in New York (EDT) = 04:00 UTC.
    assert_eq!(last_key.py_str(), "1751342400");
    let PyValue::Dict(fields) = last else {
        panic!()
    };
    assert!(fields[0].1.py_eq(&s("2025-07-01")));
    assert!(fields[5].1.py_eq(&quote), "last close is the quote");
    let first = monthly[0].1.repr();
    assert!(first.contains("'date': '2024-10-01'"), "{first}");
    for (_, v) in hist("1d") {
        let PyValue::Dict(f) = v else { panic!() };
        let day = f[1].1.as_bigint().expect("int").to_i64().expect("small") / 86400;
        assert!(weekday_of(day) < 5, "no weekend bars");
    }
    let weekly = hist("1wk");
    assert!(weekly
        .last()
        .expect("bars")
        .1
        .repr()
        .contains("'2025-07-14'"));
    let intraday = hist("5m");
    assert!(intraday
        .last()
        .expect("bars")
        .1
        .repr()
        .contains("'2025-07-15 15:55:00'"));
    let quarterly = hist("3mo");
    assert!(quarterly[0].1.repr().contains("'2023-04-01'"));
}

#[test]
fn holiday_dates_follow_the_calendar() {
    let dates = |country: &str, year: &str| -> Vec<String> {
        let PyValue::List(days) = sim(
            "retrieve_holiday_by_year",
            &[("country", s(country)), ("year", s(year))],
        )
        .expect("ok") else {
            panic!("not a list")
        };
        days.iter()
            .map(|d| match d {
                PyValue::Dict(f) => f[0].1.py_str(),
                _ => panic!(),
            })
            .collect()
    };
    let fr = dates("FR", "2010");
    for d in ["2010-04-05", "2010-05-13", "2010-05-24", "2010-07-14"] {
        assert!(fr.contains(&d.to_string()), "{d} in {fr:?}");
    }
    let us = dates("us", "2024");
    for d in [
        "2024-01-15",
        "2024-05-27",
        "2024-06-19",
        "2024-09-02",
        "2024-11-28",
    ] {
        assert!(us.contains(&d.to_string()), "{d} in {us:?}");
    }
    assert!(
        !dates("US", "2019").iter().any(|d| d.ends_with("06-19")),
        "Juneteenth from 2021"
    );
    assert!(
        dates("RO", "2024").contains(&"2024-05-05".to_string()),
        "Orthodox Easter"
    );
    assert!(
        dates("DE", "2025").contains(&"2025-04-18".to_string()),
        "Good Friday"
    );
    let sorted = {
        let mut v = fr.clone();
        v.sort();
        v
    };
    assert_eq!(fr, sorted);
    assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
    assert_eq!(days_from_civil(1970, 1, 1), 0);
}

// -- simulated: failure behaviour -------------------------------------------------

#[test]
fn simulated_failures_mirror_the_originals() {
    let e = sim("get_movie_rating", &[("movie_name", s("No Such Film 123"))]).unwrap_err();
    assert_eq!(
        (e.kind.as_str(), e.message.as_str()),
        ("KeyError", "'Rated'")
    );
    let e = sim("get_movie_director", &[("movie_name", PyValue::None)]).unwrap_err();
    assert_eq!(e.message, "'Director'");

    let conv = |from: &str, to: PyValue| {
        sim(
            "convert_currency",
            &[
                ("amount", PyValue::int(10)),
                ("from_currency", s(from)),
                ("to_currency", to),
            ],
        )
    };
    assert!(conv("USD", s("XYZ"))
        .expect("ok")
        .py_eq(&s("Target currency code not found.")));
    assert!(conv("USD", s("eur"))
        .expect("ok")
        .py_eq(&s("Target currency code not found.")));
    assert!(conv("XYZ", s("EUR"))
        .expect("ok")
        .py_eq(&s("Failed to fetch data with status code: 404")));
    assert_eq!(
        conv("USD", PyValue::List(vec![])).unwrap_err().message,
        "unhashable type: 'list'"
    );
    let e = sim(
        "convert_currency",
        &[
            ("amount", s("ten")),
            ("from_currency", s("USD")),
            ("to_currency", s("EUR")),
        ],
    )
    .unwrap_err();
    assert_eq!(
        e.message,
        "can't multiply sequence by non-int of type 'float'"
    );

    for (ip, msg) in [
        ("192.168.1.1", "private range"),
        ("172.16.254.1", "private range"),
        ("10.0.0.1", "private range"),
        ("127.0.0.1", "reserved range"),
        ("224.0.0.1", "reserved range"),
        ("fd00::1", "private range"),
        ("999.1.1.1", "invalid query"),
        ("not an ip", "invalid query"),
    ] {
        for f in ["get_coordinate_by_ip_address", "get_zipcode_by_ip_address"] {
            let out = sim(f, &[("ip_address", s(ip))]).expect("ok");
            assert!(out.py_eq(&s(msg)), "{f}({ip}) = {}", out.repr());
        }
    }
    assert!(matches!(
        sim(
            "get_coordinate_by_ip_address",
            &[("ip_address", s("example.com"))]
        )
        .expect("ok"),
        PyValue::Tuple(_)
    ));

    let covid = sim("get_covid_death_by_country", &[("country", s("Atlantis"))]).expect("ok");
    assert_eq!(
        covid.repr(),
        "{'get': 'statistics', 'parameters': {'country': 'Atlantis'}, 'errors': [], \
         'results': 0, 'response': []}"
    );
    assert!(matches!(
        sim("get_price_by_amazon_ASIN", &[("ASIN", s("bad asin"))]).expect("ok"),
        PyValue::None
    ));
    let miss = sim(
        "get_stock_price_by_stock_name",
        &[("stock_name", s("ZZZZZ"))],
    )
    .expect("ok");
    assert!(miss.repr().contains("'body': []"));
    let miss = sim(
        "get_company_name_by_stock_name",
        &[("stock_name", s("qqqqqq"))],
    )
    .expect("ok");
    assert!(matches!(miss, PyValue::Dict(_)));
    let bad = sim(
        "get_stock_history",
        &[("stock_name", s("AAPL")), ("interval", s("2h"))],
    )
    .expect("ok");
    assert!(bad.repr().contains("Invalid interval"));
    assert!(matches!(
        sim("retrieve_city_based_on_zipcode", &[("zipcode", s("00000"))]).expect("ok"),
        PyValue::Dict(_)
    ));
    let e = sim(
        "retrieve_holiday_by_year",
        &[("country", s("XX")), ("year", s("2010"))],
    )
    .unwrap_err();
    assert_eq!(e.kind, "JSONDecodeError");
    assert!(matches!(
        sim(
            "retrieve_holiday_by_year",
            &[("country", s("FR")), ("year", s("soon"))]
        )
        .expect("ok"),
        PyValue::Dict(_)
    ));
    let e = sim("find_term_on_urban_dictionary", &[("term", s("  "))]).unwrap_err();
    assert_eq!(
        (e.kind.as_str(), e.message.as_str()),
        ("IndexError", "list index out of range")
    );
    assert!(sim("get_coordinates_from_city", &[("city_name", s(""))])
        .expect("ok")
        .py_eq(&s("No data found for the given city name.")));
    assert!(matches!(
        sim(
            "get_time_zone_by_coord",
            &[("long", s("east")), ("lat", s("1"))]
        )
        .expect("ok"),
        PyValue::Dict(_)
    ));

    let weather = |coords: PyValue| sim("get_weather_data", &[("coordinates", coords)]);
    let f = PyValue::Float;
    assert!(weather(PyValue::List(vec![f(95.0), f(0.0)]))
        .expect("ok")
        .py_eq(&s("Failed to fetch data with status code: 400")));
    assert_eq!(
        weather(PyValue::List(vec![f(1.0), f(2.0), f(3.0)]))
            .unwrap_err()
            .message,
        "too many values to unpack (expected 2)"
    );
    assert_eq!(
        weather(PyValue::List(vec![f(1.0)])).unwrap_err().message,
        "not enough values to unpack (expected 2, got 1)"
    );
    assert_eq!(
        weather(PyValue::int(5)).unwrap_err().message,
        "cannot unpack non-iterable int object"
    );
    assert!(weather(PyValue::Tuple(vec![s("40.7"), s("-74")]))
        .is_ok_and(|v| matches!(v, PyValue::Float(_))));
}

#[test]
fn unknown_inputs_still_get_plausible_answers() {
    let city = sim(
        "get_coordinates_from_city",
        &[("city_name", s("Smallville"))],
    )
    .expect("ok");
    let PyValue::Tuple(parts) = &city else {
        panic!("{}", city.repr())
    };
    for p in parts {
        let x: f64 = p.py_str().parse().expect("a number as a string");
        assert!(x.abs() <= 180.0);
    }
    let def = sim(
        "find_term_on_urban_dictionary",
        &[("term", s("blorptastic"))],
    )
    .expect("ok");
    assert!(def.py_str().contains("blorptastic"));
    let title = sim(
        "get_product_name_by_amazon_ASIN",
        &[("ASIN", s("B000000001"))],
    )
    .expect("ok");
    assert!(matches!(title, PyValue::Str(_)));
}

// -- robustness -------------------------------------------------------------------

#[test]
fn no_panics_on_missing_or_wrongly_typed_arguments() {
    let weird = [
        PyValue::None,
        PyValue::Bool(true),
        PyValue::int(-3),
        PyValue::Int("123456789012345678901234567890".parse().expect("bigint")),
        PyValue::Float(f64::NAN),
        PyValue::Float(-1e308),
        s(""),
        s("ünïcødé 🚀"),
        PyValue::List(vec![]),
        PyValue::List(vec![PyValue::None, s("x")]),
        PyValue::Tuple(vec![PyValue::Float(1.0)]),
        PyValue::Dict(vec![(s("a"), PyValue::int(1))]),
    ];
    let w = SimulatedBackend::new(9);
    for (name, args) in sample_calls() {
        let e = w.execute(name, &[]).expect("REST").unwrap_err();
        assert_eq!(e.kind, "TypeError", "{name} without arguments");
        assert!(e.message.starts_with(&format!("{name}() missing")));
        for i in 0..args.len() {
            for v in &weird {
                let mut a = args.clone();
                a[i].1 = v.clone();
                let _ = w.execute(name, &a);
                let _ = canonical_call_string(name, &a);
            }
        }
    }
}
