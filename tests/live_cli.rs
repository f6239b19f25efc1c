//! `--backend live` end to end: `otb exec` against a local fake of the web APIs
//! (`OTB_LIVE_BASE_URL` + fake keys; never the network), and the one-line error with
//! exit code 2 when keys are missing.

mod common;
#[path = "../datasets/tests/support/mock_api.rs"]
mod mock_api;

use common::{one_error_line, otb, stdout_ok, Scratch, MODELS};
use mock_api::{fake_apis, MockApi, FAKE_KEYS};
use std::process::Command;

/// `otb` with the fake keys and, if given, the base URL override.
fn live_otb(base: Option<&str>) -> Command {
    let mut c = otb();
    for (var, key) in FAKE_KEYS {
        c.env(var, key);
    }
    match base {
        Some(b) => c.env("OTB_LIVE_BASE_URL", b),
        None => c.env_remove("OTB_LIVE_BASE_URL"),
    };
    c
}

/// `otb` with none of the live variables set.
fn keyless_otb() -> Command {
    let mut c = otb();
    for (var, _) in FAKE_KEYS {
        c.env_remove(var);
    }
    c.env_remove("OTB_LIVE_BASE_URL");
    c
}

#[test]
fn exec_live_calls_the_apis_at_the_base_url() {
    let api = MockApi::start(fake_apis);
    let exec = |call: &str| {
        let out = live_otb(Some(&api.base))
            .args(["exec", call, "--backend", "live"])
            .output()
            .expect("run otb");
        stdout_ok(&out).trim_end().to_string()
    };
    assert_eq!(
        exec("get_weather_data(coordinates=[40.7128, -74.006])"),
        "78.4"
    );
    assert_eq!(
        exec("convert_currency(amount=5000, from_currency='EUR', to_currency='JPY')"),
        "859533.5"
    );
    assert_eq!(
        exec("get_covid_death_by_country(country='France')"),
        "167642"
    );
    // A Python error of the tool is the tool's answer, not a failure of otb.
    assert_eq!(
        exec("get_movie_rating(movie_name='No Such Film')"),
        "KeyError: 'Rated'"
    );
    let seen = api.requests();
    let targets: Vec<&str> = seen.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(
        targets,
        [
            "/v1/forecast?latitude=40.7128&longitude=-74.006&current=temperature_2m&temperature_unit=fahrenheit",
            "/v6/fx-key-4/latest/EUR",
            "/statistics?country=France",
            "/?t=No+Such+Film&apikey=omdb-key-3",
        ]
    );
    assert_eq!(seen[2].header("x-rapidapi-key"), Some("rapid-key-2"));
    assert_eq!(
        seen[2].header("x-rapidapi-host"),
        Some("covid-193.p.rapidapi.com")
    );
}

/// `otb exec` of one weather call on the live backend, run by `otb`.
fn weather_live(otb: &mut Command) -> std::process::Output {
    otb.args([
        "exec",
        "get_weather_data(coordinates=[1, 2])",
        "--backend",
        "live",
    ])
    .output()
    .expect("run otb")
}

#[test]
fn live_without_keys_is_one_error_line_and_exit_code_2() {
    let mut keyless = keyless_otb();
    let out = weather_live(keyless.env("GEOCODE_API_KEY", "set"));
    let err = one_error_line(&out);
    assert!(out.stdout.is_empty());
    assert!(
        err.starts_with(
            "otb: error: the live REST backend needs API keys: RAPID_API_KEY, OMDB_API_KEY, \
             EXCHANGERATE_API_KEY not set"
        ),
        "{err}"
    );

    // `released score` checks the keys before reading anything.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = keyless_otb()
        .args(["released", "score"])
        .arg(dir.path())
        .args(["--backend", "live"])
        .output()
        .expect("run otb");
    let err = one_error_line(&out);
    assert!(err.contains("GEOCODE_API_KEY, RAPID_API_KEY"), "{err}");

    let out = weather_live(&mut live_otb(Some("ftp://127.0.0.1")));
    let err = one_error_line(&out);
    assert!(err.contains("(OTB_LIVE_BASE_URL)"), "{err}");
}

#[test]
fn live_is_opt_in() {
    // The default backend stays the simulated world, with or without keys.
    let out = keyless_otb()
        .args(["exec", "get_movie_director(movie_name='Avatar')"])
        .output()
        .expect("run otb");
    assert_eq!(stdout_ok(&out).trim_end(), "'James Cameron'");

    // Experiments refuse it: their stage outputs are cached by key.
    let s = Scratch::new("backend = \"live\"", MODELS);
    let out = s.otb(&["status", s.exp().to_str().expect("utf8")]);
    let err = one_error_line(&out);
    assert!(
        err.contains("backend = \"live\" is not available in experiments"),
        "{err}"
    );
}
