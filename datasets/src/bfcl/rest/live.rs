//! The live REST backend: the 19 REST functions against the real web APIs, over
//! blocking HTTP (`reqwest`, rustls), with the user's keys
//! (`../shared/spec/bfcl-functions.md`, "Network functions (19)").
//!
//! Each function sends the request the BFCL original sends (same endpoint, query
//! parameters encoded as `requests` encodes them, same RapidAPI headers) and applies
//! the original's response handling to the body, read with Python's `json.loads`
//! (`python::json`): which field is returned, the `"Failed to fetch data with
//! status code: N"` strings, the bare `except:` that returns the whole JSON answer,
//! the exceptions that escape (`KeyError: 'Rated'`, `JSONDecodeError: Expecting value:
//! ...`). Results have the types the simulated backend gives for the same shapes
//! (tuples stay tuples).
//!
//! # Keys and configuration
//!
//! | environment variable | used by |
//! |---|---|
//! | `GEOCODE_API_KEY` | `get_coordinates_from_city` (query parameter `api_key`) |
//! | `RAPID_API_KEY` | the RapidAPI functions (header `X-RapidAPI-Key`) |
//! | `OMDB_API_KEY` | `get_movie_rating`, `get_movie_director` (query parameter `apikey`) |
//! | `EXCHANGERATE_API_KEY` | `convert_currency` (a path segment) |
//! | `OTB_LIVE_BASE_URL` | optional: send every request to this origin instead (tests) |
//!
//! Like the originals (which raise `NoAPIKeyError` at import), [`LiveKeys::from_env`]
//! requires all four keys. Keys never appear in messages or `Debug` output.
//!
//! # Differences from the originals, all deliberate
//!
//! - Timeouts: 10 s to connect, 30 s per request (the originals wait forever). A
//!   transport failure raises `ConnectionError` / `ConnectTimeout` / `ReadTimeout`
//!   with the request (keys elided) and the cause.
//! - `get_coordinates_from_city` sleeps 2 s before every request to respect
//!   geocode.maps.co's rate limit; here consecutive requests are at least
//!   [`LiveDelays::geocode_interval`] apart, so a lone call does not wait.
//! - The Amazon functions retry five times on `KeyError` with sleeps of 1, 2, 4, 8
//!   (and 16) seconds, then return `None`; the final sleep, which delays nothing, is
//!   skipped. [`LiveDelays::none`] removes all waiting (tests).
//! - Responses are capped at [`MAX_BODY_BYTES`]; OMDb is reached over https.
//!
//! # Tests
//!
//! Tests never use the network: [`LiveBackend::with_base_override`] (or
//! `OTB_LIVE_BASE_URL`) rewrites the scheme and host of every endpoint, keeping path
//! and query, so a local server on 127.0.0.1 can answer in the APIs' JSON shapes
//! (`datasets/tests/live_backend.rs`).

use std::fmt;
use std::io::Read as _;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::backend::{unpack2, AmazonField, Args, PyResult, RestBackend, RestFunctions};
use crate::bfcl::python::builtins::getitem;
use crate::bfcl::python::exception::PyException;
use crate::bfcl::python::json as pyjson;
use crate::bfcl::python::value::{binop, int_to_f64, str_repr, BinOp, PyValue};

/// The key variables, in the order the originals read them.
pub const KEY_VARS: [&str; 4] = [
    "GEOCODE_API_KEY",
    "RAPID_API_KEY",
    "OMDB_API_KEY",
    "EXCHANGERATE_API_KEY",
];

/// Environment variable with an origin that replaces every endpoint's scheme and host.
pub const BASE_URL_VAR: &str = "OTB_LIVE_BASE_URL";

/// Largest response body read (bigger ones raise an exception).
pub const MAX_BODY_BYTES: u64 = 32 << 20;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a live backend could not be configured (bad input: one line).
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(
        "the live REST backend needs API keys: {} not set (it reads GEOCODE_API_KEY, \
         RAPID_API_KEY, OMDB_API_KEY and EXCHANGERATE_API_KEY)",
        .missing.join(", ")
    )]
    /// Some API key variables are unset or empty.
    MissingKeys {
        /// The missing variables, in [`KEY_VARS`] order.
        missing: Vec<&'static str>,
    },
    /// The base URL override is not a usable `http[s]://host[:port][/prefix]`.
    #[error("invalid live API base URL {url:?}{origin}: {reason}")]
    BaseUrl {
        /// The URL as given.
        url: String,
        /// Where the URL came from, e.g. `" (OTB_LIVE_BASE_URL)"`; empty when given in code.
        origin: &'static str,
        /// What is wrong with it (the URL parser's error, a wrong scheme, a
        /// query, credentials, ...).
        reason: String,
    },
}

/// API keys for the live backend (the originals read `GEOCODE_API_KEY`,
/// `RAPID_API_KEY`, `OMDB_API_KEY`, `EXCHANGERATE_API_KEY`).
#[derive(Clone, Default)]
pub struct LiveKeys {
    /// `GEOCODE_API_KEY`: geocode.maps.co (city coordinates).
    pub geocode: Option<String>,
    /// `RAPID_API_KEY`: the RapidAPI hosts (Urban Dictionary, COVID-19
    /// statistics, Amazon products, Yahoo Finance, time zones).
    pub rapid_api: Option<String>,
    /// `OMDB_API_KEY`: omdbapi.com (movie facts).
    pub omdb: Option<String>,
    /// `EXCHANGERATE_API_KEY`: exchangerate-api.com (currency conversion).
    pub exchangerate: Option<String>,
}

impl fmt::Debug for LiveKeys {
    /// Shows which keys are set, never their values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveKeys")
            .field("geocode", &self.geocode.is_some())
            .field("rapid_api", &self.rapid_api.is_some())
            .field("omdb", &self.omdb.is_some())
            .field("exchangerate", &self.exchangerate.is_some())
            .finish()
    }
}

impl LiveKeys {
    /// The four keys from the environment; an error naming every missing (or empty)
    /// variable.
    pub fn from_env() -> Result<Self, LiveError> {
        Self::from_lookup(|var| std::env::var(var).ok())
    }

    /// [`LiveKeys::from_env`] over any variable lookup (tests pass a map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, LiveError> {
        let mut missing = Vec::new();
        let mut get = |var: &'static str| {
            let value = lookup(var).filter(|v| !v.is_empty());
            if value.is_none() {
                missing.push(var);
            }
            value
        };
        let keys = LiveKeys {
            geocode: get(KEY_VARS[0]),
            rapid_api: get(KEY_VARS[1]),
            omdb: get(KEY_VARS[2]),
            exchangerate: get(KEY_VARS[3]),
        };
        if missing.is_empty() {
            Ok(keys)
        } else {
            Err(LiveError::MissingKeys { missing })
        }
    }

    /// The key in `value`, or the exception a call needing it raises.
    fn require<'a>(value: &'a Option<String>, var: &str) -> Result<&'a str, PyException> {
        value.as_deref().filter(|v| !v.is_empty()).ok_or_else(|| {
            PyException::new("RuntimeError", format!("live backend: {var} is not set"))
        })
    }
}

/// Waiting the originals do between requests (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveDelays {
    /// Least time between two geocode.maps.co requests (the original sleeps 2 s).
    pub geocode_interval: Duration,
    /// First Amazon retry sleep; doubles on each retry (the original: 1 s).
    pub amazon_backoff: Duration,
}

impl LiveDelays {
    /// No waiting at all (tests against a local server).
    pub fn none() -> Self {
        LiveDelays {
            geocode_interval: Duration::ZERO,
            amazon_backoff: Duration::ZERO,
        }
    }
}

impl Default for LiveDelays {
    /// The originals' pacing: 2 s between geocode requests, 1 s first Amazon backoff.
    fn default() -> Self {
        LiveDelays {
            geocode_interval: Duration::from_secs(2),
            amazon_backoff: Duration::from_secs(1),
        }
    }
}

/// The real web APIs.
///
/// - [`LiveBackend::disabled`] (also `Default`) answers every REST call with
///   `RuntimeError("live backend not enabled: ...")`, so a chain ending in it fails
///   loudly instead of silently inventing values;
/// - [`LiveBackend::enabled`] (or [`LiveBackend::from_env`]) sends each call over HTTP
///   and applies the original function's response handling (see the module doc).
///
/// Non-REST functions get `None`. The HTTP client is created on first use and shared
/// by clones. Blocking: do not call from inside an async runtime.
#[derive(Debug, Clone, Default)]
pub struct LiveBackend {
    keys: Option<LiveKeys>,
    base: Option<BaseOverride>,
    delays: LiveDelays,
    shared: Arc<Shared>,
}

#[derive(Debug, Clone)]
struct BaseOverride {
    /// `scheme://host[:port][/prefix]` without a trailing slash.
    prefix: String,
    /// A loopback host: requests bypass any proxy from the environment.
    loopback: bool,
}

#[derive(Debug, Default)]
struct Shared {
    client: OnceLock<Result<reqwest::blocking::Client, String>>,
    last_geocode: Mutex<Option<Instant>>,
}

impl LiveBackend {
    /// A live backend that refuses every call.
    pub fn disabled() -> Self {
        LiveBackend::default()
    }

    /// A live backend that calls the real APIs with `keys`.
    pub fn enabled(keys: LiveKeys) -> Self {
        LiveBackend {
            keys: Some(keys),
            ..LiveBackend::default()
        }
    }

    /// Keys from the environment ([`LiveKeys::from_env`]) and, when `OTB_LIVE_BASE_URL`
    /// is set and not empty, its base override.
    pub fn from_env() -> Result<Self, LiveError> {
        Self::from_lookup(|var| std::env::var(var).ok())
    }

    /// [`LiveBackend::from_env`] over any variable lookup.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, LiveError> {
        let backend = LiveBackend::enabled(LiveKeys::from_lookup(&lookup)?);
        match lookup(BASE_URL_VAR).filter(|u| !u.trim().is_empty()) {
            Some(url) => backend.base_override(&url, " (OTB_LIVE_BASE_URL)"),
            None => Ok(backend),
        }
    }

    /// Sends every request to `url` (`http[s]://host[:port][/prefix]`) instead of the
    /// API's own scheme and host, keeping each endpoint's path and query (a prefix is
    /// put before the path). Headers, including `X-RapidAPI-Host`, are unchanged.
    pub fn with_base_override(self, url: &str) -> Result<Self, LiveError> {
        self.base_override(url, "")
    }

    fn base_override(mut self, url: &str, origin: &'static str) -> Result<Self, LiveError> {
        let bad = |reason: &str| LiveError::BaseUrl {
            url: url.to_string(),
            origin,
            reason: reason.to_string(),
        };
        let parsed = reqwest::Url::parse(url.trim()).map_err(|e| bad(&e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad("the scheme must be http or https"));
        }
        let host = parsed.host_str().ok_or_else(|| bad("no host"))?;
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(bad("a base URL has no query or fragment"));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(bad("a base URL has no user name or password"));
        }
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = bare.eq_ignore_ascii_case("localhost")
            || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
        self.base = Some(BaseOverride {
            prefix: parsed.as_str().trim_end_matches('/').to_string(),
            loopback,
        });
        // The proxy setting depends on the base: start a fresh client.
        self.shared = Arc::default();
        Ok(self)
    }

    /// Replaces the waiting between requests (default: the originals').
    pub fn with_delays(mut self, delays: LiveDelays) -> Self {
        self.delays = delays;
        self
    }

    /// Whether this backend was built with keys ([`LiveBackend::enabled`]).
    pub fn is_enabled(&self) -> bool {
        self.keys.is_some()
    }

    /// The base override, if any (`scheme://host[:port][/prefix]`).
    pub fn base_url(&self) -> Option<&str> {
        self.base.as_ref().map(|b| b.prefix.as_str())
    }

    fn client(&self) -> Result<&reqwest::blocking::Client, PyException> {
        self.shared
            .client
            .get_or_init(|| {
                let mut builder = reqwest::blocking::Client::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .timeout(REQUEST_TIMEOUT)
                    .user_agent(concat!("opaquetools/", env!("CARGO_PKG_VERSION")));
                if self.base.as_ref().is_some_and(|b| b.loopback) {
                    builder = builder.no_proxy();
                }
                builder
                    .build()
                    .map_err(|e| format!("cannot start the HTTP client: {}", error_chain(&e)))
            })
            .as_ref()
            .map_err(|m| PyException::new("RuntimeError", m.clone()))
    }

    /// Sends one GET; a transport failure is the exception `requests` would raise.
    fn send(&self, req: &Request) -> Result<Response, PyException> {
        let client = self.client()?;
        let url = req.url(self.base.as_ref().map(|b| b.prefix.as_str()));
        let shown = req.redact(&url);
        let fail = |kind: &str, cause: String| {
            PyException::new(kind, req.redact(&format!("GET {shown}: {cause}")))
        };
        let mut builder = client.get(url.as_str());
        for (name, value) in &req.headers {
            builder = builder.header(*name, value.as_str());
        }
        let response = builder
            .send()
            .map_err(|e| fail(transport_kind(&e), error_chain(&e.without_url())))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut body = Vec::new();
        response
            .take(MAX_BODY_BYTES + 1)
            .read_to_end(&mut body)
            .map_err(|e| {
                let kind = if e.kind() == std::io::ErrorKind::TimedOut {
                    "ReadTimeout"
                } else {
                    "ChunkedEncodingError"
                };
                fail(kind, format!("reading the response: {}", error_chain(&e)))
            })?;
        if body.len() as u64 > MAX_BODY_BYTES {
            return Err(fail(
                "RuntimeError",
                format!("response body larger than {MAX_BODY_BYTES} bytes"),
            ));
        }
        Ok(Response {
            status,
            text: decode_body(&body, content_type.as_deref()),
        })
    }

    fn keys(&self) -> Result<&LiveKeys, PyException> {
        self.keys
            .as_ref()
            .ok_or_else(|| PyException::new("RuntimeError", "live backend not enabled"))
    }

    fn rapid(&self, host: &str, path: &str) -> Result<Request, PyException> {
        let key = LiveKeys::require(&self.keys()?.rapid_api, "RAPID_API_KEY")?;
        let host = format!("{host}.p.rapidapi.com");
        Ok(Request::new(format!("https://{host}"), path)
            .header("X-RapidAPI-Key", key)
            .header("X-RapidAPI-Host", &host)
            .secret(key))
    }
}

impl RestFunctions for LiveBackend {
    // -- the originals, one by one ------------------------------------------------------

    fn weather(&self, a: &Args) -> PyResult {
        let (lat, lon) = unpack2(a.req("coordinates")?)?;
        let req = Request::new("https://api.open-meteo.com".into(), "/v1/forecast")
            .param("latitude", &lat)
            .param("longitude", &lon)
            .param("current", &PyValue::str("temperature_2m"))
            .param("temperature_unit", &PyValue::str("fahrenheit"));
        let r = self.send(&req)?;
        if r.status != 200 {
            return Ok(failed(r.status));
        }
        path(&r.json()?, &[key("current"), key("temperature_2m")])
    }

    fn city_coordinates(&self, a: &Args) -> PyResult {
        let city = a.req("city_name")?;
        self.pace_geocode();
        let api_key = LiveKeys::require(&self.keys()?.geocode, "GEOCODE_API_KEY")?;
        let req = Request::new("https://geocode.maps.co".into(), "/search")
            .param("q", city)
            .param("api_key", &PyValue::str(api_key))
            .secret(api_key);
        let r = self.send(&req)?;
        if r.status != 200 {
            return Ok(failed(r.status));
        }
        let data = r.json()?;
        if !data.truthy() {
            return Ok(PyValue::str("No data found for the given city name."));
        }
        let lat = path(&data, &[index(0), key("lat")])?;
        let lon = path(&data, &[index(0), key("lon")])?;
        Ok(PyValue::Tuple(vec![lat, lon]))
    }

    fn convert_currency(&self, a: &Args) -> PyResult {
        let amount = a.req("amount")?;
        let from = a.req("from_currency")?;
        let to = a.req("to_currency")?;
        let api_key = LiveKeys::require(&self.keys()?.exchangerate, "EXCHANGERATE_API_KEY")?;
        let req = Request::new(
            "https://v6.exchangerate-api.com".into(),
            &format!("/v6/{api_key}/latest/{}", path_segment(&from.py_str())),
        )
        .secret(api_key);
        let r = self.send(&req)?;
        if r.status != 200 {
            return Ok(failed(r.status));
        }
        let data = r.json()?;
        let rates = dict_get(&data, "conversion_rates")?.unwrap_or(PyValue::Dict(vec![]));
        if contains(&rates, to)? {
            binop(BinOp::Mul, amount, &getitem(&rates, to)?)
        } else {
            Ok(PyValue::str("Target currency code not found."))
        }
    }

    fn urban_dictionary(&self, a: &Args) -> PyResult {
        let term = a.req("term")?;
        let req = self
            .rapid("mashape-community-urban-dictionary", "/define")?
            .param("term", term);
        let r = self.send(&req)?;
        path(&r.json()?, &[key("list"), index(0), key("definition")])
    }

    fn ip_lookup(&self, a: &Args, zip: bool) -> PyResult {
        let ip = a.req("ip_address")?;
        let req = Request::new(
            "http://ip-api.com".into(),
            &format!("/json/{}", path_segment(&ip.py_str())),
        );
        let r = self.send(&req)?;
        let parsed = r.json();
        let attempt = parsed.clone().and_then(|j| {
            if zip {
                getitem(&j, &key("zip"))
            } else {
                Ok(PyValue::Tuple(vec![
                    getitem(&j, &key("lat"))?,
                    getitem(&j, &key("lon"))?,
                ]))
            }
        });
        // `except: return response.json()["message"]`
        attempt.or_else(|_| getitem(&parsed?, &key("message")))
    }

    fn covid(&self, a: &Args, deaths: bool) -> PyResult {
        let (group, field) = if deaths {
            ("deaths", "total")
        } else {
            ("cases", "active")
        };
        let country = a.req("country")?;
        let req = self
            .rapid("covid-193", "/statistics")?
            .param("country", country);
        let r = self.send(&req)?;
        or_whole(r.json(), |j| {
            path(j, &[key("response"), index(0), key(group), key(field)])
        })
    }

    fn amazon(&self, a: &Args, field: AmazonField) -> PyResult {
        let field = field.api_key();
        let asin = a.req("ASIN")?;
        let req = self
            .rapid("real-time-amazon-data", "/product-details")?
            .param("asin", asin)
            .param("country", &PyValue::str("US"));
        const TRIES: u32 = 5;
        for retry in 0..TRIES {
            let r = self.send(&req)?;
            match r.json().and_then(|j| path(&j, &[key("data"), key(field)])) {
                Ok(v) => return Ok(v),
                Err(e) if e.kind == "KeyError" => {
                    if retry + 1 < TRIES {
                        std::thread::sleep(self.delays.amazon_backoff * (1 << retry));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(PyValue::None)
    }

    fn company_name(&self, a: &Args) -> PyResult {
        let stock = a.req("stock_name")?;
        let req = self
            .rapid("yahoo-finance15", "/api/v1/markets/search")?
            .param("search", stock);
        let r = self.send(&req)?;
        or_whole(r.json(), |j| path(j, &[key("body"), index(0), key("name")]))
    }

    fn stock_price(&self, a: &Args) -> PyResult {
        let stock = a.req("stock_name")?;
        let req = self
            .rapid("yahoo-finance15", "/api/v1/markets/stock/quotes")?
            .param("ticker", stock);
        let r = self.send(&req)?;
        or_whole(r.json(), |j| {
            py_float(&path(
                j,
                &[key("body"), index(0), key("regularMarketPrice")],
            )?)
        })
    }

    fn stock_history(&self, a: &Args) -> PyResult {
        let stock = a.req("stock_name")?;
        let interval = a.req("interval")?;
        let default = PyValue::str("true");
        let splits = a.get("diffandsplits").unwrap_or(&default);
        let req = self
            .rapid("yahoo-finance15", "/api/v1/markets/stock/history")?
            .param("symbol", stock)
            .param("interval", interval)
            .param("diffandsplits", splits);
        let r = self.send(&req)?;
        or_whole(r.json(), |j| last_ten(&getitem(j, &key("body"))?))
    }

    fn zipcode_city(&self, a: &Args) -> PyResult {
        let zipcode = a.req("zipcode")?;
        let req = Request::new(
            "http://ziptasticapi.com".into(),
            &format!("/{}", path_segment(&zipcode.py_str())),
        );
        let r = self.send(&req)?;
        or_whole(r.json(), |j| getitem(j, &key("city")))
    }

    fn holidays(&self, a: &Args) -> PyResult {
        let country = a.req("country")?;
        let year = a.req("year")?;
        let req = Request::new(
            "https://date.nager.at".into(),
            &format!(
                "/api/v3/publicholidays/{}/{}",
                path_segment(&year.py_str()),
                path_segment(&country.py_str())
            ),
        );
        self.send(&req)?.json()
    }

    fn time_zone(&self, a: &Args) -> PyResult {
        let long = a.req("long")?;
        let lat = a.req("lat")?;
        let req = self
            .rapid("timezone-by-location", "/timezone")?
            .param("lat", lat)
            .param("lon", long)
            .param("c", &PyValue::str("1"))
            .param("s", &PyValue::str("0"));
        let r = self.send(&req)?;
        or_whole(r.json(), |j| {
            path(j, &[key("Zones"), index(0), key("TimezoneId")])
        })
    }

    fn movie(&self, a: &Args, field: &str) -> PyResult {
        let title = a.req("movie_name")?;
        let api_key = LiveKeys::require(&self.keys()?.omdb, "OMDB_API_KEY")?;
        let req = Request::new("https://www.omdbapi.com".into(), "/")
            .param("t", title)
            .param("apikey", &PyValue::str(api_key))
            .secret(api_key);
        let r = self.send(&req)?;
        getitem(&r.json()?, &key(field))
    }
}

impl LiveBackend {
    /// Keeps geocode requests [`LiveDelays::geocode_interval`] apart.
    fn pace_geocode(&self) {
        let interval = self.delays.geocode_interval;
        if interval.is_zero() {
            return;
        }
        let mut last = self
            .shared
            .last_geocode
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(wait) = last.and_then(|t| interval.checked_sub(t.elapsed())) {
            std::thread::sleep(wait);
        }
        *last = Some(Instant::now());
    }
}

impl RestBackend for LiveBackend {
    fn name(&self) -> &str {
        "live"
    }

    fn call(
        &self,
        real_name: &str,
        kwargs: &[(String, PyValue)],
    ) -> Option<Result<PyValue, PyException>> {
        if self.keys.is_none() {
            let endpoint = live_endpoint(real_name, kwargs)?;
            return Some(Err(PyException::new(
                "RuntimeError",
                format!(
                    "live backend not enabled: {real_name} would {endpoint}; build it with \
                     LiveBackend::enabled(keys)"
                ),
            )));
        }
        self.dispatch(real_name, kwargs)
    }
}

/// The request an original function sends, as `METHOD url` with keys elided and
/// arguments shown unencoded (for messages).
pub fn live_endpoint(real_name: &str, kwargs: &[(String, PyValue)]) -> Option<String> {
    let a = |k: &str| {
        kwargs
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.py_str())
            .unwrap_or_default()
    };
    let rapid = |host: &str, path: &str| format!("GET https://{host}.p.rapidapi.com{path}");
    Some(match real_name {
        "get_weather_data" => "GET https://api.open-meteo.com/v1/forecast?latitude=..&\
                               longitude=..&current=temperature_2m&temperature_unit=fahrenheit"
            .to_string(),
        "get_coordinates_from_city" => {
            format!(
                "GET https://geocode.maps.co/search?q={}&api_key=<key>",
                a("city_name")
            )
        }
        "convert_currency" => format!(
            "GET https://v6.exchangerate-api.com/v6/<key>/latest/{}",
            a("from_currency")
        ),
        "find_term_on_urban_dictionary" => rapid(
            "mashape-community-urban-dictionary",
            &format!("/define?term={}", a("term")),
        ),
        "get_coordinate_by_ip_address" | "get_zipcode_by_ip_address" => {
            format!("GET http://ip-api.com/json/{}", a("ip_address"))
        }
        "get_covid_death_by_country" | "get_active_covid_case_by_country" => rapid(
            "covid-193",
            &format!("/statistics?country={}", a("country")),
        ),
        "get_rating_by_amazon_ASIN"
        | "get_price_by_amazon_ASIN"
        | "get_product_name_by_amazon_ASIN" => rapid(
            "real-time-amazon-data",
            &format!("/product-details?asin={}&country=US", a("ASIN")),
        ),
        "get_company_name_by_stock_name" => rapid(
            "yahoo-finance15",
            &format!("/api/v1/markets/search?search={}", a("stock_name")),
        ),
        "get_stock_price_by_stock_name" => rapid(
            "yahoo-finance15",
            &format!("/api/v1/markets/stock/quotes?ticker={}", a("stock_name")),
        ),
        "get_stock_history" => rapid(
            "yahoo-finance15",
            &format!(
                "/api/v1/markets/stock/history?symbol={}&interval={}",
                a("stock_name"),
                a("interval")
            ),
        ),
        "retrieve_city_based_on_zipcode" => {
            format!("GET http://ziptasticapi.com/{}", a("zipcode"))
        }
        "retrieve_holiday_by_year" => format!(
            "GET https://date.nager.at/api/v3/publicholidays/{}/{}",
            a("year"),
            a("country")
        ),
        "get_time_zone_by_coord" => rapid(
            "timezone-by-location",
            &format!("/timezone?lat={}&lon={}&c=1&s=0", a("lat"), a("long")),
        ),
        "get_movie_rating" | "get_movie_director" => {
            format!(
                "GET https://www.omdbapi.com/?t={}&apikey=<key>",
                a("movie_name")
            )
        }
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------
// requests, as the `requests` library builds them
// ---------------------------------------------------------------------------------------

/// One GET: origin, raw path (argument values already interpolated, as the originals'
/// f-strings do), query parameters (as `requests.get(url, params=...)` encodes them),
/// headers, and the secrets to elide from messages.
#[derive(Debug, Clone)]
struct Request {
    origin: String,
    path: String,
    query: Vec<(&'static str, String)>,
    headers: Vec<(&'static str, String)>,
    secrets: Vec<String>,
}

impl Request {
    fn new(origin: String, path: &str) -> Self {
        Request {
            origin,
            path: path.to_string(),
            query: Vec::new(),
            headers: Vec::new(),
            secrets: Vec::new(),
        }
    }

    /// `params[name] = value`: `None` drops it, a list repeats it ([`query_values`]).
    fn param(mut self, name: &'static str, value: &PyValue) -> Self {
        for v in query_values(value) {
            self.query.push((name, v));
        }
        self
    }

    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }

    fn secret(mut self, value: &str) -> Self {
        if !value.is_empty() {
            self.secrets.push(value.to_string());
        }
        self
    }

    /// The URL `requests` sends: the path requoted like `requests.utils.requote_uri`,
    /// the parameters `quote_plus`-encoded and appended to any query the path has.
    fn url(&self, base: Option<&str>) -> String {
        let raw = format!("{}{}", base.unwrap_or(&self.origin), self.path);
        let full = requote_uri(&raw);
        if self.query.is_empty() {
            return full;
        }
        let encoded: Vec<String> = self
            .query
            .iter()
            .map(|(k, v)| format!("{}={}", quote_plus(k), quote_plus(v)))
            .collect();
        let encoded = encoded.join("&");
        let (main, fragment) = match full.split_once('#') {
            Some((m, f)) => (m.to_string(), Some(f)),
            None => (full.clone(), None),
        };
        let joined = if main.ends_with('?') {
            format!("{main}{encoded}")
        } else if main.contains('?') {
            format!("{main}&{encoded}")
        } else {
            format!("{main}?{encoded}")
        };
        match fragment {
            Some(f) => format!("{joined}#{f}"),
            None => joined,
        }
    }

    /// `text` with every secret (raw and encoded) replaced by `<key>`.
    fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            for form in [s.clone(), quote_plus(s), requote_uri(s)] {
                if !form.is_empty() {
                    out = out.replace(&form, "<key>");
                }
            }
        }
        out
    }
}

/// The strings `requests` puts in the query for one parameter value: `None` drops the
/// parameter; a list, tuple or dict (its keys) gives one entry per non-`None` item,
/// and an item that is itself a list gives one entry per element; everything else is
/// `str(value)`.
fn query_values(value: &PyValue) -> Vec<String> {
    let items: Vec<&PyValue> = match value {
        PyValue::List(xs) | PyValue::Tuple(xs) => xs.iter().collect(),
        PyValue::Dict(entries) => entries.iter().map(|(k, _)| k).collect(),
        other => vec![other],
    };
    let mut out = Vec::new();
    for item in items {
        match item {
            PyValue::None => {}
            PyValue::List(xs) | PyValue::Tuple(xs) => out.extend(xs.iter().map(PyValue::py_str)),
            PyValue::Dict(entries) => out.extend(entries.iter().map(|(k, _)| k.py_str())),
            other => out.push(other.py_str()),
        }
    }
    out
}

fn percent_encode_into(out: &mut String, c: char) {
    let mut buf = [0u8; 4];
    for b in c.encode_utf8(&mut buf).bytes() {
        out.push_str(&format!("%{b:02X}"));
    }
}

/// A model-written value placed in a URL path: one path segment, whatever it holds.
/// The originals paste the value into the path as is (so `../admin?x` would change
/// the path or add a query); here `/`, `?`, `#`, `%`, spaces and everything outside
/// the path characters are `%XX`, and a `.` or `..` segment is escaped too. Values a
/// real call passes (currency codes, IPs, zip codes, years, country codes) are
/// unchanged.
fn path_segment(s: &str) -> String {
    if s == "." || s == ".." {
        return s.replace('.', "%2E");
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '.' | '-' | '~' => out.push(c),
            '!' | '$' | '&' | '\'' | '(' | ')' | '*' | '+' | ',' | ';' | '=' | ':' | '@' => {
                out.push(c)
            }
            _ => percent_encode_into(&mut out, c),
        }
    }
    out
}

/// `urllib.parse.quote_plus(s)` (safe = ""): letters, digits and `_.-~` stay, space is
/// `+`, everything else is `%XX` of its UTF-8 bytes.
fn quote_plus(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '.' | '-' | '~' => out.push(c),
            ' ' => out.push('+'),
            _ => percent_encode_into(&mut out, c),
        }
    }
    out
}

/// `requests.utils.requote_uri`: quotes what may not appear in a URL and leaves the
/// reserved characters and valid `%XX` escapes alone; when a `%` starts an invalid
/// two-character escape (`%zz`), every `%` is quoted instead.
fn requote_uri(uri: &str) -> String {
    let chars: Vec<char> = uri.chars().collect();
    let invalid_escape = chars.iter().enumerate().any(|(i, &c)| {
        c == '%'
            && chars.get(i + 1..i + 3).is_some_and(|h| {
                h.iter().all(|c| c.is_ascii_alphanumeric())
                    && !h.iter().all(char::is_ascii_hexdigit)
            })
    });
    let mut out = String::with_capacity(uri.len());
    for &c in &chars {
        match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '.' | '-' | '~' => out.push(c),
            '%' if !invalid_escape => out.push(c),
            '!' | '#' | '$' | '&' | '\'' | '(' | ')' | '*' | '+' | ',' | '/' | ':' | ';' | '='
            | '?' | '@' | '[' | ']' => out.push(c),
            _ => percent_encode_into(&mut out, c),
        }
    }
    out
}

fn transport_kind(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        if e.is_connect() {
            "ConnectTimeout"
        } else {
            "ReadTimeout"
        }
    } else if e.is_builder() {
        "InvalidURL"
    } else if e.is_redirect() {
        "TooManyRedirects"
    } else {
        "ConnectionError"
    }
}

/// An error and its sources as `a: b: c`, without repeats.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cause = c.source();
    }
    out
}

// ---------------------------------------------------------------------------------------
// responses, as the originals read them
// ---------------------------------------------------------------------------------------

#[derive(Debug)]
struct Response {
    status: u16,
    text: String,
}

impl Response {
    /// `response.json()`.
    fn json(&self) -> PyResult {
        pyjson::loads(&self.text)
    }
}

/// The text `requests` hands to `json.loads`: the Content-Type's charset if it is
/// Latin-1, Latin-1 for `text/*` without one (`requests`' HTTP default), otherwise
/// UTF-8 (invalid bytes replaced); a UTF-8 byte-order mark is dropped when no charset
/// is declared (`requests` guesses `utf-8-sig`).
fn decode_body(body: &[u8], content_type: Option<&str>) -> String {
    let ct = content_type.unwrap_or("").to_ascii_lowercase();
    let charset = ct.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim() == "charset").then(|| v.trim().trim_matches(['"', '\'']).to_string())
    });
    let latin1 = match charset.as_deref() {
        Some(cs) => matches!(
            cs,
            "iso-8859-1" | "iso8859-1" | "iso_8859_1" | "latin-1" | "latin1" | "l1"
        ),
        None => ct.trim_start().starts_with("text/"),
    };
    if latin1 {
        return body.iter().map(|&b| char::from(b)).collect();
    }
    let bytes = match (charset.is_none() && !ct.contains("application/json"), body) {
        (true, [0xef, 0xbb, 0xbf, rest @ ..]) => rest,
        _ => body,
    };
    String::from_utf8_lossy(bytes).into_owned()
}

fn failed(status: u16) -> PyValue {
    PyValue::Str(format!("Failed to fetch data with status code: {status}"))
}

fn key(k: &str) -> PyValue {
    PyValue::str(k)
}

fn index(i: i64) -> PyValue {
    PyValue::int(i)
}

/// `v[k0][k1]...` with Python's errors.
fn path(v: &PyValue, keys: &[PyValue]) -> PyResult {
    let mut cur = v.clone();
    for k in keys {
        cur = getitem(&cur, k)?;
    }
    Ok(cur)
}

/// `try: return f(response.json()) except: return response.json()`.
fn or_whole(parsed: PyResult, f: impl FnOnce(&PyValue) -> PyResult) -> PyResult {
    if let Ok(j) = &parsed {
        if let Ok(v) = f(j) {
            return Ok(v);
        }
    }
    parsed
}

/// `data.get(name)` (`None` when absent); only dicts have `.get`.
fn dict_get(data: &PyValue, name: &str) -> Result<Option<PyValue>, PyException> {
    match data {
        PyValue::Dict(entries) => Ok(entries
            .iter()
            .find(|(k, _)| matches!(k, PyValue::Str(s) if s == name))
            .map(|(_, v)| v.clone())),
        other => Err(PyException::new(
            "AttributeError",
            format!("'{}' object has no attribute 'get'", other.type_name()),
        )),
    }
}

/// Python's `item in container`.
fn contains(container: &PyValue, item: &PyValue) -> Result<bool, PyException> {
    match container {
        PyValue::Dict(entries) => {
            if matches!(item, PyValue::List(_) | PyValue::Dict(_)) {
                return Err(PyException::new(
                    "TypeError",
                    format!("unhashable type: '{}'", item.type_name()),
                ));
            }
            Ok(entries.iter().any(|(k, _)| k.py_eq(item)))
        }
        PyValue::List(xs) | PyValue::Tuple(xs) => Ok(xs.iter().any(|x| x.py_eq(item))),
        PyValue::Str(s) => match item {
            PyValue::Str(sub) => Ok(s.contains(sub.as_str())),
            other => Err(PyException::new(
                "TypeError",
                format!(
                    "'in <string>' requires string as left operand, not {}",
                    other.type_name()
                ),
            )),
        },
        other => Err(PyException::new(
            "TypeError",
            format!("argument of type '{}' is not iterable", other.type_name()),
        )),
    }
}

/// Python's `float(v)`.
fn py_float(v: &PyValue) -> PyResult {
    match v {
        PyValue::Float(x) => Ok(PyValue::Float(*x)),
        PyValue::Bool(b) => Ok(PyValue::Float(f64::from(u8::from(*b)))),
        PyValue::Int(n) => int_to_f64(n).map(PyValue::Float),
        PyValue::Str(s) => parse_py_float(s).map(PyValue::Float).ok_or_else(|| {
            PyException::new(
                "ValueError",
                format!("could not convert string to float: {}", str_repr(s)),
            )
        }),
        other => Err(PyException::new(
            "TypeError",
            format!(
                "float() argument must be a string or a real number, not '{}'",
                other.type_name()
            ),
        )),
    }
}

/// `float(str)`: surrounding whitespace, `inf`/`infinity`/`nan` in any case with an
/// optional sign, and `_` between digits.
fn parse_py_float(s: &str) -> Option<f64> {
    let t = s.trim();
    let (sign, body) = match t.as_bytes().first() {
        Some(b'-') => (-1.0, &t[1..]),
        Some(b'+') => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    match body.to_ascii_lowercase().as_str() {
        "inf" | "infinity" => return Some(sign * f64::INFINITY),
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    let chars: Vec<char> = t.chars().collect();
    let mut cleaned = String::with_capacity(t.len());
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' {
            let between = i > 0
                && chars[i - 1].is_ascii_digit()
                && chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if !between {
                return None;
            }
            continue;
        }
        if !(c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E')) {
            return None;
        }
        cleaned.push(c);
    }
    cleaned.parse::<f64>().ok()
}

/// `{key: data[key] for key in list(data)[-10:]}`.
fn last_ten(data: &PyValue) -> PyResult {
    let keys: Vec<PyValue> = match data {
        PyValue::Dict(entries) => entries.iter().map(|(k, _)| k.clone()).collect(),
        PyValue::List(xs) | PyValue::Tuple(xs) => xs.clone(),
        PyValue::Str(s) => s.chars().map(|c| PyValue::Str(c.to_string())).collect(),
        other => {
            return Err(PyException::new(
                "TypeError",
                format!("'{}' object is not iterable", other.type_name()),
            ))
        }
    };
    let mut out: Vec<(PyValue, PyValue)> = Vec::new();
    for k in &keys[keys.len().saturating_sub(10)..] {
        let v = getitem(data, k)?;
        if matches!(k, PyValue::List(_) | PyValue::Dict(_)) {
            return Err(PyException::new(
                "TypeError",
                format!("unhashable type: '{}'", k.type_name()),
            ));
        }
        match out.iter_mut().find(|(existing, _)| existing.py_eq(k)) {
            Some(slot) => slot.1 = v,
            None => out.push((k.clone(), v)),
        }
    }
    Ok(PyValue::Dict(out))
}

#[cfg(test)]
mod tests {

    #[test]
    fn model_strings_stay_one_path_segment() {
        assert_eq!(super::path_segment("USD"), "USD");
        assert_eq!(super::path_segment("192.168.0.1"), "192.168.0.1");
        assert_eq!(super::path_segment("2001:db8::1"), "2001:db8::1");
        assert_eq!(
            super::path_segment("../admin?x=1#y"),
            "..%2Fadmin%3Fx=1%23y"
        );
        assert_eq!(super::path_segment(".."), "%2E%2E");
        assert_eq!(super::path_segment("a b%"), "a%20b%25");
    }
    use super::*;

    fn s(x: &str) -> PyValue {
        PyValue::str(x)
    }

    fn keys() -> LiveKeys {
        LiveKeys {
            geocode: Some("geo-secret".into()),
            rapid_api: Some("rapid-secret".into()),
            omdb: Some("omdb-secret".into()),
            exchangerate: Some("fx-secret".into()),
        }
    }

    /// Expected URLs: `requests.Request('GET', url, params=...).prepare().url`
    /// (requests 2.34, CPython 3.11).
    #[test]
    fn urls_are_encoded_like_requests() {
        let f = PyValue::Float;
        let req = Request::new("https://api.open-meteo.com".into(), "/v1/forecast")
            .param("latitude", &f(40.7128))
            .param("longitude", &f(-74.0))
            .param("current", &s("temperature_2m"));
        assert_eq!(
            req.url(None),
            "https://api.open-meteo.com/v1/forecast?latitude=40.7128&longitude=-74.0&current=temperature_2m"
        );
        let odd = PyValue::List(vec![
            PyValue::int(1),
            PyValue::None,
            PyValue::List(vec![PyValue::int(2), s("a b")]),
            PyValue::Dict(vec![(s("k"), PyValue::int(1))]),
        ]);
        let req = Request::new("https://api.open-meteo.com".into(), "/v1/forecast")
            .param("latitude", &odd)
            .param("longitude", &PyValue::None)
            .param("x", &PyValue::Bool(true))
            .param("y", &s("a b&c=d/é~*"))
            .param("z", &PyValue::Tuple(vec![PyValue::int(1), PyValue::int(2)]));
        assert_eq!(
            req.url(None),
            "https://api.open-meteo.com/v1/forecast?latitude=1&latitude=2&latitude=a+b&latitude=k&x=True&y=a+b%26c%3Dd%2F%C3%A9~%2A&z=1&z=2"
        );
        let zip = |z: &str| Request::new("http://ziptasticapi.com".into(), &format!("/{z}"));
        assert_eq!(
            Request::new("http://ip-api.com".into(), "/json/a b?c#d").url(None),
            "http://ip-api.com/json/a%20b?c#d"
        );
        assert_eq!(
            zip("90%zz10").url(None),
            "http://ziptasticapi.com/90%25zz10"
        );
        assert_eq!(
            zip("90%2010 ^|\\x").url(None),
            "http://ziptasticapi.com/90%2010%20%5E%7C%5Cx"
        );
        assert_eq!(
            zip("é\"<>{}`").url(None),
            "http://ziptasticapi.com/%C3%A9%22%3C%3E%7B%7D%60"
        );
        let q = PyValue::int(1);
        assert_eq!(
            zip("x?").param("a", &q).url(None),
            "http://ziptasticapi.com/x?a=1"
        );
        assert_eq!(
            zip("x#f").param("a", &q).url(None),
            "http://ziptasticapi.com/x?a=1#f"
        );
        assert_eq!(
            zip("x?b=2")
                .param("a", &q)
                .url(Some("http://127.0.0.1:9/p")),
            "http://127.0.0.1:9/p/x?b=2&a=1"
        );
    }

    #[test]
    fn secrets_are_elided_everywhere() {
        let req = Request::new("https://geocode.maps.co".into(), "/search")
            .param("q", &s("Paris"))
            .param("api_key", &s("k y/1"))
            .secret("k y/1");
        let url = req.url(None);
        assert!(url.contains("api_key=k+y%2F1"), "{url}");
        assert_eq!(
            req.redact(&url),
            "https://geocode.maps.co/search?q=Paris&api_key=<key>"
        );
        assert_eq!(req.redact("raw k y/1 and k%20y/1"), "raw <key> and <key>");
        let b = LiveBackend::enabled(keys());
        assert!(!format!("{b:?}").contains("secret"));
    }

    #[test]
    fn keys_come_from_the_environment_or_one_error_line() {
        let all = |v: &str| Some(format!("value-of-{v}"));
        let k = LiveKeys::from_lookup(all).expect("all set");
        assert_eq!(k.omdb.as_deref(), Some("value-of-OMDB_API_KEY"));
        let err = LiveKeys::from_lookup(|v| {
            (v == "RAPID_API_KEY" || v == "EXCHANGERATE_API_KEY").then(|| "x".to_string())
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the live REST backend needs API keys: GEOCODE_API_KEY, OMDB_API_KEY not set \
             (it reads GEOCODE_API_KEY, RAPID_API_KEY, OMDB_API_KEY and EXCHANGERATE_API_KEY)"
        );
        let empty =
            LiveKeys::from_lookup(|v| Some(if v == "OMDB_API_KEY" { "" } else { "x" }.into()))
                .unwrap_err();
        assert!(matches!(empty, LiveError::MissingKeys { missing } if missing == ["OMDB_API_KEY"]));

        let b = LiveBackend::from_lookup(|v| match v {
            BASE_URL_VAR => Some("http://127.0.0.1:8123/".into()),
            _ => Some("k".into()),
        })
        .expect("ok");
        assert_eq!(b.base_url(), Some("http://127.0.0.1:8123"));
        let err = LiveBackend::from_lookup(|v| match v {
            BASE_URL_VAR => Some("ftp://example.org".into()),
            _ => Some("k".into()),
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid live API base URL \"ftp://example.org\" (OTB_LIVE_BASE_URL): the scheme \
             must be http or https"
        );
        assert!(LiveBackend::from_lookup(|v| match v {
            BASE_URL_VAR => Some("  ".into()),
            _ => Some("k".into()),
        })
        .expect("blank means unset")
        .base_url()
        .is_none());
    }

    #[test]
    fn base_overrides_are_validated() {
        let b = || LiveBackend::enabled(keys());
        for bad in [
            "not a url",
            "http://h/x?q=1",
            "http://h/#f",
            "http://u:p@h/",
            "file:///tmp",
        ] {
            assert!(b().with_base_override(bad).is_err(), "{bad}");
        }
        let ok = b().with_base_override("http://[::1]:9/api/").expect("ok");
        assert_eq!(ok.base_url(), Some("http://[::1]:9/api"));
        assert!(ok.base.as_ref().is_some_and(|o| o.loopback));
        let remote = b().with_base_override("https://mock.example").expect("ok");
        assert!(!remote.base.as_ref().is_some_and(|o| o.loopback));
    }

    #[test]
    fn disabled_backend_refuses_and_names_the_request() {
        let args = vec![("movie_name".to_string(), s("Avatar"))];
        let e = LiveBackend::disabled()
            .call("get_movie_rating", &args)
            .expect("answers REST calls")
            .unwrap_err();
        assert!(
            e.message.starts_with("live backend not enabled: "),
            "{}",
            e.message
        );
        assert!(e.message.contains("omdbapi.com/?t=Avatar&apikey=<key>"));
        assert!(LiveBackend::disabled().call("math_gcd", &[]).is_none());
        assert!(LiveBackend::enabled(keys()).call("math_gcd", &[]).is_none());
        for name in super::super::REST_FUNCTIONS {
            assert!(live_endpoint(name, &[]).is_some(), "{name}");
        }
    }

    #[test]
    fn bodies_are_decoded_like_requests() {
        assert_eq!(decode_body(b"\xef\xbb\xbf[1]", None), "[1]");
        assert_eq!(
            decode_body(b"\xef\xbb\xbf[1]", Some("application/json")),
            "\u{feff}[1]"
        );
        assert_eq!(decode_body("é".as_bytes(), Some("text/html")), "Ã©");
        assert_eq!(
            decode_body("é".as_bytes(), Some("text/html; charset=UTF-8")),
            "é"
        );
        assert_eq!(
            decode_body(b"\xe9", Some("application/json; charset=\"latin-1\"")),
            "é"
        );
        assert_eq!(decode_body(b"\xff", None), "\u{fffd}");
    }

    #[test]
    fn python_helpers_match_cpython() {
        assert_eq!(py_float(&s(" 1_000.5 ")).expect("ok").repr(), "1000.5");
        assert_eq!(py_float(&s("-Infinity")).expect("ok").repr(), "-inf");
        assert_eq!(
            py_float(&s("1__0")).unwrap_err().to_string(),
            "ValueError: could not convert string to float: '1__0'"
        );
        assert_eq!(
            py_float(&PyValue::None).unwrap_err().to_string(),
            "TypeError: float() argument must be a string or a real number, not 'NoneType'"
        );
        assert_eq!(py_float(&PyValue::int(3)).expect("ok").repr(), "3.0");
        assert!(
            contains(&PyValue::Dict(vec![(s("EUR"), PyValue::int(1))]), &s("EUR")).expect("ok")
        );
        assert_eq!(
            contains(&PyValue::Dict(vec![]), &PyValue::List(vec![]))
                .unwrap_err()
                .message,
            "unhashable type: 'list'"
        );
        assert_eq!(
            contains(&PyValue::int(1), &s("EUR")).unwrap_err().message,
            "argument of type 'int' is not iterable"
        );
        assert_eq!(
            dict_get(&PyValue::List(vec![]), "x")
                .unwrap_err()
                .to_string(),
            "AttributeError: 'list' object has no attribute 'get'"
        );
        let entries: Vec<(PyValue, PyValue)> = (0..12)
            .map(|i| (s(&i.to_string()), PyValue::int(i)))
            .collect();
        let ten = last_ten(&PyValue::Dict(entries)).expect("ok");
        assert!(ten.repr().starts_with("{'2': 2, '3': 3"), "{}", ten.repr());
        assert_eq!(
            last_ten(&PyValue::List(vec![PyValue::int(0), PyValue::int(0)]))
                .expect("ok")
                .repr(),
            "{0: 0}"
        );
        assert!(last_ten(&PyValue::List(vec![s("a")])).is_err());
        assert_eq!(quote_plus("a b+c"), "a+b%2Bc");
    }
}
