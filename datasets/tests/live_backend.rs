//! The live REST backend against a local fake of the real APIs (never the network):
//! results, error texts, and the requests it sends (paths, queries, key headers).

#[path = "support/mock_api.rs"]
mod mock_api;

use datasets::bfcl::executor::Executor;
use datasets::bfcl::pyparse::parse_call;
use datasets::bfcl::rest::{BackendChain, LiveBackend, LiveDelays, LiveKeys};
use mock_api::{fake_apis, MockApi, FAKE_KEYS};

fn keys() -> LiveKeys {
    LiveKeys::from_lookup(|var| {
        FAKE_KEYS
            .iter()
            .find(|(v, _)| *v == var)
            .map(|(_, k)| k.to_string())
    })
    .expect("all fake keys")
}

fn executor(api: &MockApi) -> Executor {
    let live = LiveBackend::enabled(keys())
        .with_base_override(&api.base)
        .expect("valid base")
        .with_delays(LiveDelays::none());
    Executor::new(BackendChain::live(live))
}

/// `otb exec`'s line: the result's repr, or `Kind: message`.
fn run(exec: &Executor, call: &str) -> String {
    let c = parse_call(call).expect("parses");
    let line = match exec.execute(&c.name, &c.name, &c.kwargs) {
        Ok(v) => v.repr(),
        Err(e) => format!("{}: {}", e.kind, e.text()),
    };
    for (_, secret) in FAKE_KEYS {
        assert!(!line.contains(secret), "{call} leaked a key: {line}");
    }
    line
}

#[test]
fn weather_returns_the_current_temperature_or_the_status_text() {
    let api = MockApi::start(fake_apis);
    let exec = executor(&api);
    assert_eq!(
        run(&exec, "get_weather_data(coordinates=[40.7128, -74.006])"),
        "78.4"
    );
    assert_eq!(
        run(&exec, "get_weather_data(coordinates=(95, 0))"),
        "'Failed to fetch data with status code: 400'"
    );
    assert_eq!(
        run(&exec, "get_weather_data(coordinates=[1, 2, 3])"),
        "ValueError: too many values to unpack (expected 2)"
    );
    let seen = api.requests();
    assert_eq!(seen.len(), 2, "the unpack error happens before any request");
    assert_eq!(seen[0].method, "GET");
    assert_eq!(
        seen[0].target,
        "/v1/forecast?latitude=40.7128&longitude=-74.006&current=temperature_2m&temperature_unit=fahrenheit"
    );
    assert_eq!(seen[0].header("x-rapidapi-key"), None);
}

#[test]
fn geocoding_returns_a_tuple_of_strings_and_sends_the_key_as_a_parameter() {
    let api = MockApi::start(fake_apis);
    let exec = executor(&api);
    assert_eq!(
        run(&exec, "get_coordinates_from_city(city_name='Paris')"),
        "('48.8588897', '2.3200410217200766')"
    );
    assert_eq!(
        run(
            &exec,
            "get_coordinates_from_city(city_name='Nowhere at all')"
        ),
        "'No data found for the given city name.'"
    );
    let seen = api.requests();
    assert_eq!(seen[0].target, "/search?q=Paris&api_key=geo-key-1");
    assert_eq!(seen[1].target, "/search?q=Nowhere+at+all&api_key=geo-key-1");
}

#[test]
fn exchange_rates_multiply_and_the_key_is_a_path_segment() {
    let api = MockApi::start(fake_apis);
    let exec = executor(&api);
    // python3 -c "print(repr(5000 * 171.9067))"
    assert_eq!(
        run(
            &exec,
            "convert_currency(amount=5000, from_currency='EUR', to_currency='JPY')"
        ),
        "859533.5"
    );
    assert_eq!(
        run(
            &exec,
            "convert_currency(amount=10, from_currency='EUR', to_currency='XYZ')"
        ),
        "'Target currency code not found.'"
    );
    assert_eq!(
        run(
            &exec,
            "convert_currency(amount=10, from_currency='XYZ', to_currency='EUR')"
        ),
        "'Failed to fetch data with status code: 404'"
    );
    assert_eq!(
        run(
            &exec,
            "convert_currency(amount=10, from_currency='EUR', to_currency=['JPY'])"
        ),
        "TypeError: unhashable type: 'list'"
    );
    let seen = api.requests();
    assert_eq!(seen[0].target, "/v6/fx-key-4/latest/EUR");
    assert_eq!(seen[2].target, "/v6/fx-key-4/latest/XYZ");
}

#[test]
fn holidays_return_the_whole_list_and_an_empty_404_is_a_json_error() {
    let api = MockApi::start(fake_apis);
    let exec = executor(&api);
    let out = run(&exec, "retrieve_holiday_by_year(country='FR', year='2010')");
    assert!(
        out.starts_with(
            "[{'date': '2010-01-01', 'localName': \"Jour de l'an\", 'name': \"New Year's Day\", \
             'countryCode': 'FR', 'fixed': True, 'global': True, 'counties': None, \
             'launchYear': 1967, 'types': ['Public']}, {'date': '2010-07-14'"
        ),
        "{out}"
    );
    assert!(
        out.ends_with("'launchYear': None, 'types': ['Public']}]"),
        "{out}"
    );
    assert_eq!(
        run(&exec, "retrieve_holiday_by_year(country='XX', year='2010')"),
        "JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    );
    let seen = api.requests();
    assert_eq!(seen[0].target, "/api/v3/publicholidays/2010/FR");
}

#[test]
fn movies_raise_key_errors_and_json_errors_like_the_originals() {
    let api = MockApi::start(fake_apis);
    let exec = executor(&api);
    assert_eq!(
        run(&exec, "get_movie_rating(movie_name='Avatar')"),
        "'PG-13'"
    );
    assert_eq!(
        run(&exec, "get_movie_director(movie_name='The Matrix')"),
        "'James Cameron'"
    );
    assert_eq!(
        run(&exec, "get_movie_rating(movie_name='No Such Film')"),
        "KeyError: 'Rated'"
    );
    // A non-JSON error page: `response.json()` raises (status is never checked).
    assert_eq!(
        run(&exec, "get_movie_director(movie_name='Broken')"),
        "JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    );
    let seen = api.requests();
    assert_eq!(seen[0].target, "/?t=Avatar&apikey=omdb-key-3");
    assert_eq!(seen[1].target, "/?t=The+Matrix&apikey=omdb-key-3");
}

#[test]
fn rapidapi_functions_send_the_key_headers_and_return_the_whole_answer_on_a_miss() {
    let api = MockApi::start(fake_apis);
    let exec = executor(&api);
    assert_eq!(
        run(&exec, "get_covid_death_by_country(country='France')"),
        "167642"
    );
    assert_eq!(
        run(&exec, "get_active_covid_case_by_country(country='France')"),
        "1234567"
    );
    assert_eq!(
        run(&exec, "get_covid_death_by_country(country='Atlantis')"),
        "{'get': 'statistics', 'parameters': {'country': 'Atlantis'}, 'errors': [], \
         'results': 0, 'response': []}"
    );
    assert_eq!(
        run(&exec, "get_stock_price_by_stock_name(stock_name='AAPL')"),
        "211.16"
    );
    assert_eq!(
        run(&exec, "get_time_zone_by_coord(long='-74.0', lat='40.7')"),
        "'America/New_York'"
    );
    assert_eq!(
        run(&exec, "find_term_on_urban_dictionary(term='yeet')"),
        "'To [throw] something with force.'"
    );
    assert_eq!(
        run(&exec, "find_term_on_urban_dictionary(term='qqqq')"),
        "IndexError: list index out of range"
    );
    let seen = api.requests();
    assert_eq!(seen[0].target, "/statistics?country=France");
    assert_eq!(seen[0].header("x-rapidapi-key"), Some("rapid-key-2"));
    assert_eq!(
        seen[0].header("x-rapidapi-host"),
        Some("covid-193.p.rapidapi.com")
    );
    assert_eq!(seen[3].target, "/api/v1/markets/stock/quotes?ticker=AAPL");
    assert_eq!(seen[4].target, "/timezone?lat=40.7&lon=-74.0&c=1&s=0");
    assert_eq!(
        seen[4].header("x-rapidapi-host"),
        Some("timezone-by-location.p.rapidapi.com")
    );
}

#[test]
fn stock_history_keeps_the_last_ten_entries() {
    let api = MockApi::start(fake_apis);
    let exec = executor(&api);
    let out = run(&exec, "get_stock_history(stock_name='AAPL', interval='1d')");
    assert!(
        out.starts_with("{'1751515200': {'date_utc': 1751515200, 'close': 202.5}, "),
        "{out}"
    );
    assert!(
        out.ends_with("'1752292800': {'date_utc': 1752292800, 'close': 211.5}}"),
        "{out}"
    );
    assert_eq!(out.matches("date_utc").count(), 10);
    assert_eq!(
        api.requests()[0].target,
        "/api/v1/markets/stock/history?symbol=AAPL&interval=1d&diffandsplits=true"
    );
}

#[test]
fn ip_lookups_return_coordinates_or_the_failure_message() {
    let api = MockApi::start(fake_apis);
    let exec = executor(&api);
    assert_eq!(
        run(&exec, "get_coordinate_by_ip_address(ip_address='8.8.8.8')"),
        "(39.03, -77.5)"
    );
    assert_eq!(
        run(&exec, "get_zipcode_by_ip_address(ip_address='8.8.8.8')"),
        "'20149'"
    );
    assert_eq!(
        run(&exec, "get_zipcode_by_ip_address(ip_address='192.168.1.1')"),
        "'private range'"
    );
    assert_eq!(
        run(&exec, "retrieve_city_based_on_zipcode(zipcode='90210')"),
        "'BEVERLY HILLS'"
    );
    assert_eq!(api.requests()[0].target, "/json/8.8.8.8");
}

#[test]
fn amazon_retries_five_times_then_returns_none() {
    let api = MockApi::start(fake_apis);
    let exec = executor(&api);
    assert_eq!(
        run(&exec, "get_price_by_amazon_ASIN(ASIN='B08N5WRWNW')"),
        "'$49.99'"
    );
    assert_eq!(
        run(&exec, "get_rating_by_amazon_ASIN(ASIN='B08N5WRWNW')"),
        "'4.7'"
    );
    assert_eq!(
        run(&exec, "get_product_name_by_amazon_ASIN(ASIN='nope')"),
        "None"
    );
    let seen = api.requests();
    assert_eq!(seen.len(), 2 + 5);
    assert!(seen[2..]
        .iter()
        .all(|r| r.target == "/product-details?asin=nope&country=US"));
    assert_eq!(
        seen[0].header("x-rapidapi-host"),
        Some("real-time-amazon-data.p.rapidapi.com")
    );
}

#[test]
fn transport_failures_are_connection_errors_without_keys() {
    // A port nobody listens on: bind, note the port, close.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let live = LiveBackend::enabled(keys())
        .with_base_override(&format!("http://127.0.0.1:{port}"))
        .expect("valid base");
    let exec = Executor::new(BackendChain::live(live));
    let out = run(
        &exec,
        "convert_currency(amount=1, from_currency='EUR', to_currency='USD')",
    );
    assert!(
        out.starts_with(&format!(
            "ConnectionError: GET http://127.0.0.1:{port}/v6/<key>/latest/EUR: "
        )),
        "{out}"
    );
    let out = run(&exec, "get_movie_rating(movie_name='Avatar')");
    assert!(out.contains("/?t=Avatar&apikey=<key>: "), "{out}");
}
