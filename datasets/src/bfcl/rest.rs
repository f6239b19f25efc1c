//! The 19 BFCL functions that call a web API ("REST functions"), behind one trait and a
//! chain of interchangeable backends (`../shared/spec/bfcl-opaque.md`, "Executing
//! tools"; per-function behaviour in `bfcl-functions.md`, "Network functions (19)").
//!
//! # Mechanism
//!
//! A REST call is identified by its *canonical call string*: the real function name and
//! each keyword argument as `key=repr(value)`, joined by `", "` in the order the caller
//! gave them (not signature order), e.g.
//! `retrieve_holiday_by_year(year='2010', country='FR')`. The paper's frozen responses
//! are keyed by the md5 hex digest of that string ([`call_key`]).
//!
//! A [`BackendChain`] asks each [`RestBackend`] in turn; `None` means "no answer here,
//! ask the next one". The three backends:
//!
//! | backend | answers | used for |
//! |---|---|---|
//! | [`RecordedBackend`] | calls whose key is in a frozen responses file | paper parity |
//! | [`SimulatedBackend`] | every REST call, from a seeded offline world | the default |
//! | [`LiveBackend`] | every REST call, over HTTP with the user's keys (`live.rs`) | explicit opt-in (`--backend live`) |
//!
//! The usual chains are [`BackendChain::simulated`], [`BackendChain::paper`]
//! (recorded first, simulated for the misses) and [`BackendChain::live`] (the real
//! APIs alone, so that nothing is ever invented).
//!
//! # The simulated world
//!
//! A pure function of the seed and the call: same input, same output, on every platform
//! (hashes are SHA-256, arithmetic avoids libm transcendental functions). Static facts
//! (movie directors, zip code cities, company names, holidays, time zones) do not
//! depend on the seed; "real-time" quantities (temperatures, exchange rates, stock
//! prices and history, covid counts) and everything derived for unknown inputs (the
//! coordinates of a city not in the built-in table, an unknown ASIN's product) do.
//! Return types are those of the original Python functions (tuples, strings such as
//! `"4.2"` and `"$180.00"`, ints, dicts), and so are the failure modes, e.g. an unknown
//! movie raises `KeyError: 'Rated'`, a private IP gives the string `"private range"`, an
//! unknown covid country returns the API's whole JSON answer as a dict. The world is
//! frozen at [`WORLD_DATE`].
//!
//! # Known limitations
//!
//! - The live backend's answers change with the world and need four API keys
//!   (`GEOCODE_API_KEY`, `RAPID_API_KEY`, `OMDB_API_KEY`, `EXCHANGERATE_API_KEY`); a
//!   [`LiveBackend::disabled`] one raises `"live backend not enabled: ..."`. The
//!   project's tests never touch the network: they point the live backend at a local
//!   server (`OTB_LIVE_BASE_URL`, [`LiveBackend::with_base_override`]).
//! - The recorded backend stores what the paper's grader stored: JSON, so tuples come
//!   back as lists. The simulated backend returns real tuples, as the originals do.
//! - Simulated values are plausible, not true; only the recorded backend reproduces the
//!   paper's numbers.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use md5::{Digest as _, Md5};
use num_bigint::BigInt;
use sha2::Sha256;

use super::exec::PyException;
use super::pyvalue::{binop, BinOp, PyValue};

/// The 19 REST functions, by real name.
pub const REST_FUNCTIONS: [&str; 19] = [
    "get_weather_data",
    "get_coordinates_from_city",
    "convert_currency",
    "find_term_on_urban_dictionary",
    "get_coordinate_by_ip_address",
    "get_zipcode_by_ip_address",
    "get_covid_death_by_country",
    "get_active_covid_case_by_country",
    "get_rating_by_amazon_ASIN",
    "get_price_by_amazon_ASIN",
    "get_product_name_by_amazon_ASIN",
    "get_company_name_by_stock_name",
    "get_stock_price_by_stock_name",
    "get_stock_history",
    "retrieve_city_based_on_zipcode",
    "retrieve_holiday_by_year",
    "get_time_zone_by_coord",
    "get_movie_rating",
    "get_movie_director",
];

/// Whether `real_name` is one of the [`REST_FUNCTIONS`].
pub fn is_rest(real_name: &str) -> bool {
    REST_FUNCTIONS.contains(&real_name)
}

/// The canonical Python call string: `name(k=repr(v), ...)` in the given keyword order.
pub fn canonical_call_string(real_name: &str, kwargs: &[(String, PyValue)]) -> String {
    let args: Vec<String> = kwargs
        .iter()
        .map(|(k, v)| format!("{k}={}", v.repr()))
        .collect();
    format!("{real_name}({})", args.join(", "))
}

/// The key of a call in a recorded responses file: md5 hex of the canonical call string.
pub fn call_key(real_name: &str, kwargs: &[(String, PyValue)]) -> String {
    hex::encode(Md5::digest(
        canonical_call_string(real_name, kwargs).as_bytes(),
    ))
}

/// One source of answers for REST calls.
pub trait RestBackend: Send + Sync {
    /// A short name for messages (`"recorded"`, `"simulated"`, `"live"`).
    fn name(&self) -> &str;
    /// The call's outcome: its return value or the exception it raised; `None` when this
    /// backend has no answer and the next one should be asked.
    fn call(
        &self,
        real_name: &str,
        kwargs: &[(String, PyValue)],
    ) -> Option<Result<PyValue, PyException>>;
}

/// Why a recorded responses file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    #[error("cannot read recorded API responses {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "recorded API responses {} are truncated or not valid JSON \
         (line {line}, column {column}): {source}",
        path.display(),
        line = source.line(),
        column = source.column()
    )]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("recorded API responses {}: {detail}", path.display())]
    Format { path: PathBuf, detail: String },
}

// ---------------------------------------------------------------------------------------
// recorded
// ---------------------------------------------------------------------------------------

/// Frozen responses keyed by [`call_key`] (the paper's `recorded_api_responses.json`:
/// `{md5: {"output": ..., "error": null | "..."}}`). Answers any call whose key is
/// present, whatever the function; a miss is `None`.
#[derive(Debug, Clone)]
pub struct RecordedBackend {
    source: PathBuf,
    entries: HashMap<String, Recorded>,
}

#[derive(Debug, Clone)]
enum Recorded {
    Output(PyValue),
    Error(String),
}

impl RecordedBackend {
    /// Loads a recorded responses file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, RestError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| RestError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json_str(&text, path)
    }

    /// Parses the contents of a recorded responses file; `source` names it in errors.
    pub fn from_json_str(text: &str, source: impl AsRef<Path>) -> Result<Self, RestError> {
        let path = source.as_ref().to_path_buf();
        let protected = protect_big_numbers(text);
        let json: serde_json::Value =
            serde_json::from_str(&protected).map_err(|e| RestError::Json {
                path: path.clone(),
                source: e,
            })?;
        let format = |detail: String| RestError::Format {
            path: path.clone(),
            detail,
        };
        let map = json
            .as_object()
            .ok_or_else(|| format("top level is not an object of md5 -> entry".into()))?;
        let mut entries = HashMap::with_capacity(map.len());
        for (key, entry) in map {
            let obj = entry
                .as_object()
                .ok_or_else(|| format(format!("entry {key} is not an object")))?;
            let recorded = match obj.get("error") {
                Some(serde_json::Value::Null) | None => {
                    let out = obj
                        .get("output")
                        .ok_or_else(|| format(format!("entry {key} has no \"output\"")))?;
                    Recorded::Output(restore_big_numbers(PyValue::from_json(out)))
                }
                Some(serde_json::Value::String(e)) => Recorded::Error(e.clone()),
                Some(other) => Recorded::Error(other.to_string()),
            };
            entries.insert(key.to_ascii_lowercase(), recorded);
        }
        Ok(RecordedBackend {
            source: path,
            entries,
        })
    }

    /// The file the responses came from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Number of recorded calls.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no call is recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the call has a recorded response.
    pub fn contains(&self, real_name: &str, kwargs: &[(String, PyValue)]) -> bool {
        self.entries.contains_key(&call_key(real_name, kwargs))
    }
}

/// Marks a number literal that serde_json (without `arbitrary_precision`) cannot hold.
const BIG_NUMBER_MARK: &str = "\u{0}pynumber:";

/// Python's `json.loads` reads integers of any size and overflowing floats as `inf`;
/// serde_json refuses both ("number out of range"). The recorded file holds such
/// outputs (big factorials), so before parsing, every integer literal of more than 18
/// digits and every float literal that overflows is wrapped in a marked string, which
/// [`restore_big_numbers`] turns back into an `int` / `float`.
fn protect_big_numbers(text: &str) -> std::borrow::Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let (mut i, mut copied, mut in_string, mut escaped) = (0, 0, false, false);
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if b == b'-' || b.is_ascii_digit() {
            let start = i;
            while i < bytes.len()
                && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
            {
                i += 1;
            }
            let token = &text[start..i];
            let is_int = !token.contains(['.', 'e', 'E']);
            let digits = token.bytes().filter(u8::is_ascii_digit).count();
            let too_big = if is_int {
                digits > 18
            } else {
                token.parse::<f64>().is_ok_and(f64::is_infinite)
            };
            if too_big {
                let o = out.get_or_insert_with(|| String::with_capacity(text.len() + 64));
                o.push_str(&text[copied..start]);
                o.push_str("\"\\u0000pynumber:");
                o.push_str(token);
                o.push('"');
                copied = i;
            }
            continue;
        }
        i += 1;
    }
    match out {
        Some(mut o) => {
            o.push_str(&text[copied..]);
            std::borrow::Cow::Owned(o)
        }
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// Undoes [`protect_big_numbers`] inside a converted value.
fn restore_big_numbers(v: PyValue) -> PyValue {
    match v {
        PyValue::Str(s) => match s.strip_prefix(BIG_NUMBER_MARK) {
            Some(token) => match token.parse::<BigInt>() {
                Ok(n) => PyValue::Int(n),
                Err(_) => token
                    .parse::<f64>()
                    .map_or(PyValue::Str(s.clone()), PyValue::Float),
            },
            None => PyValue::Str(s),
        },
        PyValue::List(items) => PyValue::List(items.into_iter().map(restore_big_numbers).collect()),
        PyValue::Tuple(items) => {
            PyValue::Tuple(items.into_iter().map(restore_big_numbers).collect())
        }
        PyValue::Dict(entries) => PyValue::Dict(
            entries
                .into_iter()
                .map(|(k, v)| (k, restore_big_numbers(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A recorded error text `"KeyError: 'Rated'"` -> `KeyError` / `'Rated'`; text without
/// an exception class prefix becomes an `Exception`.
fn recorded_exception(text: &str) -> PyException {
    if let Some((kind, message)) = text.split_once(": ") {
        let is_class = kind.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && kind.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if is_class {
            return PyException::new(kind, message);
        }
    }
    PyException::new("Exception", text)
}

impl RestBackend for RecordedBackend {
    fn name(&self) -> &str {
        "recorded"
    }

    fn call(
        &self,
        real_name: &str,
        kwargs: &[(String, PyValue)],
    ) -> Option<Result<PyValue, PyException>> {
        match self.entries.get(&call_key(real_name, kwargs))? {
            Recorded::Output(v) => Some(Ok(v.clone())),
            Recorded::Error(e) => Some(Err(recorded_exception(e))),
        }
    }
}

// ---------------------------------------------------------------------------------------
// live (in `live.rs`)
// ---------------------------------------------------------------------------------------

pub use super::live::{live_endpoint, LiveBackend, LiveDelays, LiveError, LiveKeys};

// ---------------------------------------------------------------------------------------
// chain
// ---------------------------------------------------------------------------------------

/// Backends asked in order; the first answer wins.
pub struct BackendChain(pub Vec<Box<dyn RestBackend>>);

impl fmt::Debug for BackendChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BackendChain").field(&self.names()).finish()
    }
}

impl BackendChain {
    /// A chain of the given backends, asked in order.
    pub fn new(backends: Vec<Box<dyn RestBackend>>) -> Self {
        BackendChain(backends)
    }

    /// The default chain: the simulated world only.
    pub fn simulated(seed: u64) -> Self {
        BackendChain(vec![Box::new(SimulatedBackend::new(seed))])
    }

    /// Paper parity: the recorded responses, then the simulated world for misses.
    pub fn paper(recorded: impl AsRef<Path>, seed: u64) -> Result<Self, RestError> {
        Ok(BackendChain(vec![
            Box::new(RecordedBackend::from_file(recorded)?),
            Box::new(SimulatedBackend::new(seed)),
        ]))
    }

    /// The real web APIs only: no fallback, so nothing is ever invented
    /// ([`LiveBackend`]; build it with [`LiveBackend::from_env`]).
    pub fn live(backend: LiveBackend) -> Self {
        BackendChain(vec![Box::new(backend)])
    }

    /// The backends' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|b| b.name()).collect()
    }

    /// Executes a REST call. A non-REST function, or a call no backend answers, gives a
    /// `LookupError` that names the call and the backends tried.
    pub fn call(
        &self,
        real_name: &str,
        kwargs: &[(String, PyValue)],
    ) -> Result<PyValue, PyException> {
        if !is_rest(real_name) {
            return Err(PyException::new(
                "LookupError",
                format!("{real_name} is not a REST function"),
            ));
        }
        for backend in &self.0 {
            if let Some(outcome) = backend.call(real_name, kwargs) {
                return outcome;
            }
        }
        Err(PyException::new(
            "LookupError",
            format!(
                "no REST backend answered {} (tried: {})",
                canonical_call_string(real_name, kwargs),
                if self.0.is_empty() {
                    "none".to_string()
                } else {
                    self.names().join(", ")
                }
            ),
        ))
    }
}

// ---------------------------------------------------------------------------------------
// simulated
// ---------------------------------------------------------------------------------------

/// The date the simulated world is frozen at (a Tuesday; US Eastern summer time).
pub const WORLD_DATE: (i64, u32, u32) = (2025, 7, 15);

pub(super) type PyResult = Result<PyValue, PyException>;

/// A deterministic offline world answering all 19 REST functions (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimulatedBackend {
    seed: u64,
}

impl SimulatedBackend {
    /// The world for `seed`; equal seeds give identical answers.
    pub fn new(seed: u64) -> Self {
        SimulatedBackend { seed }
    }

    /// The seed this world was built from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Executes one REST call in this world; `None` for a non-REST function.
    pub fn execute(&self, real_name: &str, kwargs: &[(String, PyValue)]) -> Option<PyResult> {
        self.dispatch(real_name, kwargs)
    }

    /// A uniform number in [0, 1) from the seed and `parts` (SHA-256, platform-free).
    fn unit(&self, parts: &[&str]) -> f64 {
        unit(self.seed, parts)
    }

    /// `1 +- rel`, uniform, from the seed and `parts`.
    fn jitter(&self, parts: &[&str], rel: f64) -> f64 {
        1.0 + (2.0 * self.unit(parts) - 1.0) * rel
    }

    fn pick(&self, parts: &[&str], n: usize) -> usize {
        (hash64(self.seed, parts) % n.max(1) as u64) as usize
    }

    /// Current temperature in °F, one decimal like open-meteo: warm at the equator,
    /// cold at the poles (July: the north is warmer), plus seeded local weather.
    fn temperature_f(&self, lat: f64, lon: f64) -> f64 {
        let x = lat.abs() / 90.0;
        let season = if lat > 0.0 { 6.0 } else { -6.0 } * x;
        let base_c = 27.0 - 44.0 * x * x.sqrt() + season;
        let key = format!("{lat:.3},{lon:.3}");
        let local = (2.0 * self.unit(&["weather", &key]) - 1.0) * 5.0;
        round_to(((base_c + local) * 9.0 / 5.0) + 32.0, 1)
    }

    fn rate_jitter(&self, code: &str) -> f64 {
        if code == "USD" {
            1.0
        } else {
            self.jitter(&["fx", code], 0.015)
        }
    }

    fn quote(&self, ticker: &str) -> Option<(&'static Stock, f64)> {
        let t = ticker.trim().to_ascii_uppercase();
        let s = STOCKS.iter().find(|s| s.0 == t)?;
        Some((s, round_to(s.2 * self.jitter(&["quote", s.0], 0.04), 2)))
    }
}

impl RestFunctions for SimulatedBackend {
    // -- open-meteo -----------------------------------------------------------------

    fn weather(&self, a: &Args) -> PyResult {
        let (lat, lon) = unpack2(a.req("coordinates")?)?;
        let coord = |v: PyValue, limit: f64| {
            let v = &v;
            query_param(v)
                .and_then(|s| s.trim().parse::<f64>().ok())
                .filter(|x| x.is_finite() && x.abs() <= limit)
        };
        match (coord(lat, 90.0), coord(lon, 180.0)) {
            (Some(lat), Some(lon)) => Ok(PyValue::Float(self.temperature_f(lat, lon))),
            _ => Ok(PyValue::str("Failed to fetch data with status code: 400")),
        }
    }

    // -- geocode.maps.co ------------------------------------------------------------

    fn city_coordinates(&self, a: &Args) -> PyResult {
        let none = || Ok(PyValue::str("No data found for the given city name."));
        let Some(query) = query_param(a.req("city_name")?) else {
            return none();
        };
        let key = normalise_city(&query);
        if !key.chars().any(char::is_alphabetic) {
            return none();
        }
        let (lat, lon) = match CITIES.iter().find(|c| c.0 == key) {
            Some(&(_, lat, lon)) => (lat.to_string(), lon.to_string()),
            None => {
                let lat = -55.0 + 125.0 * self.unit(&["city-lat", &key]);
                let lon = -180.0 + 360.0 * self.unit(&["city-lon", &key]);
                (format!("{lat:.7}"), format!("{lon:.7}"))
            }
        };
        Ok(PyValue::Tuple(vec![PyValue::Str(lat), PyValue::Str(lon)]))
    }

    // -- exchangerate-api -----------------------------------------------------------

    fn convert_currency(&self, a: &Args) -> PyResult {
        let amount = a.req("amount")?;
        let from = a.req("from_currency")?.py_str().to_ascii_uppercase();
        let to = a.req("to_currency")?;
        let Some(&(_, from_per_usd)) = CURRENCIES.iter().find(|c| c.0 == from) else {
            return Ok(PyValue::str("Failed to fetch data with status code: 404"));
        };
        let to = match to {
            PyValue::Str(s) => s.as_str(),
            PyValue::List(_) | PyValue::Dict(_) => {
                return Err(PyException::new(
                    "TypeError",
                    format!("unhashable type: '{}'", to.type_name()),
                ))
            }
            _ => "",
        };
        let Some(&(_, to_per_usd)) = CURRENCIES.iter().find(|c| c.0 == to) else {
            return Ok(PyValue::str("Target currency code not found."));
        };
        let rate = if from == to {
            1.0
        } else {
            let f = from_per_usd * self.rate_jitter(&from);
            let t = to_per_usd * self.rate_jitter(to);
            round_to(t / f, 4)
        };
        binop(BinOp::Mul, amount, &PyValue::Float(rate))
    }

    // -- urban dictionary -----------------------------------------------------------

    fn urban_dictionary(&self, a: &Args) -> PyResult {
        let term = query_param(a.req("term")?).unwrap_or_default();
        let key = term.trim().to_lowercase();
        if key.is_empty() {
            return Err(PyException::new("IndexError", "list index out of range"));
        }
        if let Some(&(_, def)) = SLANG.iter().find(|s| s.0 == key) {
            return Ok(PyValue::str(def));
        }
        let templates = [
            "What you call it when something is [{}] but nobody can explain why.",
            "[{}]: a word people use online to sound like they know what is going on.",
            "When your friend says \"{}\" and you just nod and [pretend to understand].",
            "{}. Originally an inside joke, now used by [everyone's uncle].",
        ];
        let t = templates[self.pick(&["urban", &key], templates.len())];
        Ok(PyValue::Str(t.replace("{}", term.trim())))
    }

    // -- ip-api ---------------------------------------------------------------------

    fn ip_lookup(&self, a: &Args, zip: bool) -> PyResult {
        let ip = a.req("ip_address")?.py_str();
        let loc = match classify_ip(&ip) {
            IpClass::Requester => &REQUESTER_LOCATION,
            IpClass::Public(key) => &IP_LOCATIONS[self.pick(&["ip", &key], IP_LOCATIONS.len())],
            IpClass::Message(m) => return Ok(PyValue::str(m)),
        };
        Ok(if zip {
            PyValue::str(loc.zip)
        } else {
            PyValue::Tuple(vec![PyValue::Float(loc.lat), PyValue::Float(loc.lon)])
        })
    }

    // -- covid-193 ------------------------------------------------------------------

    fn covid(&self, a: &Args, deaths: bool) -> PyResult {
        let country = query_param(a.req("country")?);
        let key = country.as_deref().unwrap_or("").trim().to_lowercase();
        let Some(&(name, d, act)) = COVID.iter().find(|c| c.0.to_lowercase() == key) else {
            let mut params = Vec::new();
            if let Some(c) = country {
                params.push((PyValue::str("country"), PyValue::Str(c)));
            }
            return Ok(dict(vec![
                ("get", PyValue::str("statistics")),
                ("parameters", PyValue::Dict(params)),
                ("errors", PyValue::List(vec![])),
                ("results", PyValue::int(0)),
                ("response", PyValue::List(vec![])),
            ]));
        };
        let (base, rel, tag) = if deaths {
            (d, 0.01, "deaths")
        } else {
            (act, 0.03, "active")
        };
        let n = (base as f64 * self.jitter(&["covid", tag, name], rel)).round() as i64;
        Ok(PyValue::int(n))
    }

    // -- real-time-amazon-data ------------------------------------------------------

    fn amazon(&self, a: &Args, field: AmazonField) -> PyResult {
        let asin = query_param(a.req("ASIN")?)
            .unwrap_or_default()
            .to_ascii_uppercase();
        if asin.len() != 10 || !asin.chars().all(|c| c.is_ascii_alphanumeric()) {
            // The API answers without `data`; the original retries five times
            // (1+2+4+8+16 s of sleep, skipped here) and returns None.
            return Ok(PyValue::None);
        }
        let (brand, product, lo, hi) =
            PRODUCTS[self.pick(&["asin", &asin, "product"], PRODUCTS.len())];
        Ok(match field {
            AmazonField::Title => {
                let color = COLORS[self.pick(&["asin", &asin, "color"], COLORS.len())];
                PyValue::Str(format!("{brand} {product}, {color}"))
            }
            AmazonField::Rating => {
                let tenths = 36 + self.pick(&["asin", &asin, "rating"], 14);
                PyValue::Str(format!("{}.{}", tenths / 10, tenths % 10))
            }
            AmazonField::Price => {
                let dollars = lo + self.pick(&["asin", &asin, "price"], hi - lo + 1);
                let cents = [0, 99, 49, 95, 0, 99][self.pick(&["asin", &asin, "cents"], 6)];
                PyValue::Str(format!("${dollars}.{cents:02}"))
            }
        })
    }

    // -- yahoo-finance15 ------------------------------------------------------------

    fn company_name(&self, a: &Args) -> PyResult {
        let query = query_param(a.req("stock_name")?).unwrap_or_default();
        let q = query.trim().to_lowercase();
        let hit = STOCKS.iter().find(|s| s.0.to_lowercase() == q).or_else(|| {
            STOCKS
                .iter()
                .find(|s| q.len() >= 2 && s.1.to_lowercase().contains(&q))
        });
        match hit {
            Some(s) => Ok(PyValue::str(s.1)),
            None => Ok(yahoo_envelope(vec![])),
        }
    }

    fn stock_price(&self, a: &Args) -> PyResult {
        let tickers = query_param(a.req("stock_name")?).unwrap_or_default();
        match tickers.split(',').find_map(|t| self.quote(t)) {
            Some((_, price)) => Ok(PyValue::Float(price)),
            None => Ok(yahoo_envelope(vec![])),
        }
    }

    fn stock_history(&self, a: &Args) -> PyResult {
        let symbol = query_param(a.req("stock_name")?).unwrap_or_default();
        let interval = query_param(a.req("interval")?).unwrap_or_default();
        let Some(spec) = INTERVALS.iter().find(|i| i.name == interval) else {
            return Ok(dict(vec![(
                "message",
                PyValue::Str(format!(
                    "Invalid interval '{interval}'. Allowed: 5m|15m|30m|1h|1d|1wk|1mo|3mo"
                )),
            )]));
        };
        let Some((stock, last_close)) = self.quote(&symbol) else {
            return Ok(dict(vec![(
                "message",
                PyValue::Str(format!("No data found for symbol '{symbol}'")),
            )]));
        };
        let stamps = history_timestamps(spec, 10);
        let n = stamps.len();
        // Walk backwards from today's close so the last bar matches the quote.
        let mut closes = vec![last_close; n];
        for i in (1..n).rev() {
            let r =
                (2.0 * self.unit(&["hist", stock.0, spec.name, &i.to_string()]) - 1.0) * spec.vol;
            closes[i - 1] = closes[i] / (1.0 + r);
        }
        let mut entries = Vec::with_capacity(n);
        for (i, &(ts, ref date)) in stamps.iter().enumerate() {
            let u = |tag: &str| self.unit(&["hist", stock.0, spec.name, &i.to_string(), tag]);
            let close = closes[i];
            let open = if i > 0 {
                closes[i - 1] * (1.0 + (2.0 * u("gap") - 1.0) * spec.vol * 0.3)
            } else {
                close / (1.0 + (2.0 * u("open") - 1.0) * spec.vol)
            };
            let high = open.max(close) * (1.0 + u("high") * spec.vol * 0.5);
            let low = open.min(close) * (1.0 - u("low") * spec.vol * 0.5);
            let volume = (spec.volume as f64 * (0.6 + 0.8 * u("volume"))).round() as i64;
            entries.push((
                PyValue::Str(ts.to_string()),
                dict(vec![
                    ("date", PyValue::Str(date.clone())),
                    ("date_utc", PyValue::int(ts)),
                    ("open", json_price(open)),
                    ("high", json_price(high)),
                    ("low", json_price(low)),
                    ("close", json_price(close)),
                    ("volume", PyValue::int(volume)),
                    ("adjclose", json_price(close)),
                ]),
            ));
        }
        Ok(PyValue::Dict(entries))
    }

    fn zipcode_city(&self, a: &Args) -> PyResult {
        zipcode_city(a)
    }

    fn holidays(&self, a: &Args) -> PyResult {
        holidays(a)
    }

    fn time_zone(&self, a: &Args) -> PyResult {
        time_zone(a)
    }

    fn movie(&self, a: &Args, field: &str) -> PyResult {
        movie_field(a, field)
    }
}

impl Default for SimulatedBackend {
    /// Seed 0.
    fn default() -> Self {
        SimulatedBackend::new(0)
    }
}

impl RestBackend for SimulatedBackend {
    fn name(&self) -> &str {
        "simulated"
    }

    fn call(&self, real_name: &str, kwargs: &[(String, PyValue)]) -> Option<PyResult> {
        self.execute(real_name, kwargs)
    }
}

/// Keyword arguments of one call (already bound by the executor).
pub(super) struct Args<'a> {
    pub(super) func: &'a str,
    pub(super) kwargs: &'a [(String, PyValue)],
}

impl<'a> Args<'a> {
    pub(super) fn get(&self, name: &str) -> Option<&'a PyValue> {
        self.kwargs.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// A required argument; its absence (an unbound call) raises CPython's TypeError.
    pub(super) fn req(&self, name: &str) -> Result<&'a PyValue, PyException> {
        self.get(name).ok_or_else(|| {
            PyException::new(
                "TypeError",
                format!(
                    "{}() missing 1 required positional argument: '{name}'",
                    self.func
                ),
            )
        })
    }
}

/// The 19 REST functions as one backend answers them (the simulated world, the live
/// APIs): a method per function, where functions that differ only in the field they
/// return share one, and [`RestFunctions::dispatch`], the one table from a function's
/// name to its method.
pub(super) trait RestFunctions {
    fn weather(&self, a: &Args) -> PyResult;
    fn city_coordinates(&self, a: &Args) -> PyResult;
    fn convert_currency(&self, a: &Args) -> PyResult;
    fn urban_dictionary(&self, a: &Args) -> PyResult;
    /// The coordinates, or with `zip` the zip code.
    fn ip_lookup(&self, a: &Args, zip: bool) -> PyResult;
    /// Total deaths, or without `deaths` the active cases.
    fn covid(&self, a: &Args, deaths: bool) -> PyResult;
    fn amazon(&self, a: &Args, field: AmazonField) -> PyResult;
    fn company_name(&self, a: &Args) -> PyResult;
    fn stock_price(&self, a: &Args) -> PyResult;
    fn stock_history(&self, a: &Args) -> PyResult;
    fn zipcode_city(&self, a: &Args) -> PyResult;
    fn holidays(&self, a: &Args) -> PyResult;
    fn time_zone(&self, a: &Args) -> PyResult;
    /// The OMDb `field` ("Rated", "Director") of a movie.
    fn movie(&self, a: &Args, field: &str) -> PyResult;

    /// Executes one REST call; `None` for a non-REST function.
    fn dispatch(&self, real_name: &str, kwargs: &[(String, PyValue)]) -> Option<PyResult> {
        let a = Args {
            func: real_name,
            kwargs,
        };
        Some(match real_name {
            "get_weather_data" => self.weather(&a),
            "get_coordinates_from_city" => self.city_coordinates(&a),
            "convert_currency" => self.convert_currency(&a),
            "find_term_on_urban_dictionary" => self.urban_dictionary(&a),
            "get_coordinate_by_ip_address" => self.ip_lookup(&a, false),
            "get_zipcode_by_ip_address" => self.ip_lookup(&a, true),
            "get_covid_death_by_country" => self.covid(&a, true),
            "get_active_covid_case_by_country" => self.covid(&a, false),
            "get_rating_by_amazon_ASIN" => self.amazon(&a, AmazonField::Rating),
            "get_price_by_amazon_ASIN" => self.amazon(&a, AmazonField::Price),
            "get_product_name_by_amazon_ASIN" => self.amazon(&a, AmazonField::Title),
            "get_company_name_by_stock_name" => self.company_name(&a),
            "get_stock_price_by_stock_name" => self.stock_price(&a),
            "get_stock_history" => self.stock_history(&a),
            "retrieve_city_based_on_zipcode" => self.zipcode_city(&a),
            "retrieve_holiday_by_year" => self.holidays(&a),
            "get_time_zone_by_coord" => self.time_zone(&a),
            "get_movie_rating" => self.movie(&a, "Rated"),
            "get_movie_director" => self.movie(&a, "Director"),
            _ => return None,
        })
    }
}

/// What `requests` puts in a query string for a param value: `None` drops the param,
/// anything else is `str(value)`.
fn query_param(v: &PyValue) -> Option<String> {
    match v {
        PyValue::None => None,
        other => Some(other.py_str()),
    }
}

/// Python's `a, b = value` with CPython's error texts.
pub(super) fn unpack2(v: &PyValue) -> Result<(PyValue, PyValue), PyException> {
    let items: Vec<PyValue> = match v {
        PyValue::List(items) | PyValue::Tuple(items) => items.clone(),
        PyValue::Dict(entries) => entries.iter().map(|(k, _)| k.clone()).collect(),
        PyValue::Str(s) => s.chars().map(|c| PyValue::Str(c.to_string())).collect(),
        other => {
            return Err(PyException::new(
                "TypeError",
                format!("cannot unpack non-iterable {} object", other.type_name()),
            ))
        }
    };
    let n = items.len();
    let mut it = items.into_iter();
    match (it.next(), it.next(), n) {
        (Some(a), Some(b), 2) => Ok((a, b)),
        _ if n > 2 => Err(PyException::new(
            "ValueError",
            "too many values to unpack (expected 2)",
        )),
        _ => Err(PyException::new(
            "ValueError",
            format!("not enough values to unpack (expected 2, got {n})"),
        )),
    }
}

// -- small helpers ------------------------------------------------------------------

/// 64 bits of SHA-256 over the seed and the parts (separated, so `["ab","c"]` differs
/// from `["a","bc"]`).
fn hash64(seed: u64, parts: &[&str]) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    let out = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&out[..8]);
    u64::from_le_bytes(first)
}

fn unit(seed: u64, parts: &[&str]) -> f64 {
    (hash64(seed, parts) >> 11) as f64 / (1u64 << 53) as f64
}

/// Rounds to `decimals` places (half away from zero), like the APIs' JSON numbers.
fn round_to(x: f64, decimals: u32) -> f64 {
    let scale = [1.0, 10.0, 100.0, 1000.0, 10000.0][decimals.min(4) as usize];
    (x * scale).round() / scale
}

/// A price as a JSON API sends it: two decimals, and `236` (an int after
/// `json.loads`) when the cents are zero.
fn json_price(x: f64) -> PyValue {
    let r = round_to(x, 2);
    if r.fract() == 0.0 && r.abs() < 1e15 {
        PyValue::Int(BigInt::from(r as i64))
    } else {
        PyValue::Float(r)
    }
}

fn dict(entries: Vec<(&str, PyValue)>) -> PyValue {
    PyValue::Dict(
        entries
            .into_iter()
            .map(|(k, v)| (PyValue::str(k), v))
            .collect(),
    )
}

/// yahoo-finance15's response envelope, returned whole by the originals on a miss.
fn yahoo_envelope(body: Vec<PyValue>) -> PyValue {
    dict(vec![
        (
            "meta",
            dict(vec![
                ("version", PyValue::str("v1.0")),
                ("status", PyValue::int(200)),
                ("copywrite", PyValue::str("https://devAPI.ai")),
            ]),
        ),
        ("body", PyValue::List(body)),
    ])
}

/// Which field of a product an Amazon function returns.
#[derive(Debug, Clone, Copy)]
pub(super) enum AmazonField {
    Title,
    Rating,
    Price,
}

impl AmazonField {
    /// The field's key in the API's `data` object.
    pub(super) fn api_key(self) -> &'static str {
        match self {
            AmazonField::Title => "product_title",
            AmazonField::Rating => "product_star_rating",
            AmazonField::Price => "product_price",
        }
    }
}

/// Lower case, trimmed, up to the first comma ("Paris, France" -> "paris").
fn normalise_city(q: &str) -> String {
    q.split(',').next().unwrap_or("").trim().to_lowercase()
}

// -- ip-api -------------------------------------------------------------------------

enum IpClass {
    /// `http://ip-api.com/json/` with nothing after the slash locates the caller.
    Requester,
    /// A public address or a host name, keyed for the seeded location pick.
    Public(String),
    /// ip-api's `message` for a failed lookup.
    Message(&'static str),
}

fn classify_ip(query: &str) -> IpClass {
    if query.is_empty() {
        return IpClass::Requester;
    }
    match query.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => classify_v4(ip),
        Ok(IpAddr::V6(ip)) => classify_v6(ip),
        Err(_) if is_host_name(query) => IpClass::Public(query.to_ascii_lowercase()),
        Err(_) => IpClass::Message("invalid query"),
    }
}

fn classify_v4(ip: Ipv4Addr) -> IpClass {
    let [a, b, c, _] = ip.octets();
    let private = a == 10 || (a == 172 && (16..=31).contains(&b)) || (a == 192 && b == 168);
    let reserved = a == 0
        || a == 127
        || a >= 224
        || (a == 169 && b == 254)
        || (a == 100 && (64..=127).contains(&b))
        || (a == 192 && b == 0 && (c == 0 || c == 2))
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113);
    if private {
        IpClass::Message("private range")
    } else if reserved {
        IpClass::Message("reserved range")
    } else {
        IpClass::Public(ip.to_string())
    }
}

fn classify_v6(ip: Ipv6Addr) -> IpClass {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let first = ip.segments()[0];
    if (first & 0xfe00) == 0xfc00 {
        IpClass::Message("private range")
    } else if ip.is_loopback()
        || ip.is_unspecified()
        || (first & 0xffc0) == 0xfe80
        || (first & 0xff00) == 0xff00
        || first == 0x2001 && ip.segments()[1] == 0x0db8
    {
        IpClass::Message("reserved range")
    } else {
        IpClass::Public(ip.to_string())
    }
}

/// `example.com`-shaped: dot-separated labels of letters, digits and inner hyphens,
/// ending in an alphabetic top-level label.
fn is_host_name(s: &str) -> bool {
    let labels: Vec<&str> = s.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
        && labels
            .last()
            .is_some_and(|t| t.len() >= 2 && t.chars().all(|c| c.is_ascii_alphabetic()))
}

struct IpLocation {
    lat: f64,
    lon: f64,
    zip: &'static str,
}

/// Where the simulated machine itself is (Berkeley, CA).
const REQUESTER_LOCATION: IpLocation = IpLocation {
    lat: 37.8716,
    lon: -122.2728,
    zip: "94720",
};

/// City-level answers as ip-api gives them (4 decimals). US zips are in [`ZIPCODES`].
#[rustfmt::skip]
const IP_LOCATIONS: [IpLocation; 20] = [
    IpLocation { lat: 39.0438, lon: -77.4874, zip: "20147" },
    IpLocation { lat: 37.4056, lon: -122.0775, zip: "94043" },
    IpLocation { lat: 47.6062, lon: -122.3321, zip: "98101" },
    IpLocation { lat: 40.7128, lon: -74.006, zip: "10001" },
    IpLocation { lat: 41.8781, lon: -87.6298, zip: "60601" },
    IpLocation { lat: 32.7767, lon: -96.797, zip: "75201" },
    IpLocation { lat: 34.0522, lon: -118.2437, zip: "90012" },
    IpLocation { lat: 25.7617, lon: -80.1918, zip: "33101" },
    IpLocation { lat: 33.749, lon: -84.388, zip: "30303" },
    IpLocation { lat: 37.7749, lon: -122.4194, zip: "94103" },
    IpLocation { lat: 42.3601, lon: -71.0589, zip: "02108" },
    IpLocation { lat: 51.5074, lon: -0.1278, zip: "EC1A" },
    IpLocation { lat: 50.1109, lon: 8.6821, zip: "60311" },
    IpLocation { lat: 48.8566, lon: 2.3522, zip: "75001" },
    IpLocation { lat: 52.3676, lon: 4.9041, zip: "1012" },
    IpLocation { lat: 35.6762, lon: 139.6503, zip: "100-0001" },
    IpLocation { lat: 1.3521, lon: 103.8198, zip: "018989" },
    IpLocation { lat: -33.8688, lon: 151.2093, zip: "2000" },
    IpLocation { lat: 43.6532, lon: -79.3832, zip: "M5H" },
    IpLocation { lat: -23.5505, lon: -46.6333, zip: "01000-000" },
];

// -- ziptastic ----------------------------------------------------------------------

fn zipcode_city(a: &Args) -> PyResult {
    let zip = a.req("zipcode")?.py_str();
    Ok(match ZIPCODES.iter().find(|z| z.0 == zip) {
        Some(z) => PyValue::str(z.1),
        None => dict(vec![("error", PyValue::str("Zip Code not found!"))]),
    })
}

// -- date.nager.at ------------------------------------------------------------------

fn holidays(a: &Args) -> PyResult {
    let country = a.req("country")?.py_str();
    let year_text = a.req("year")?.py_str();
    let Ok(year) = year_text.parse::<i64>() else {
        return Ok(dict(vec![
            (
                "type",
                PyValue::str("https://tools.ietf.org/html/rfc9110#section-15.5.1"),
            ),
            (
                "title",
                PyValue::str("One or more validation errors occurred."),
            ),
            ("status", PyValue::int(400)),
            (
                "errors",
                dict(vec![(
                    "year",
                    PyValue::List(vec![PyValue::Str(format!(
                        "The value '{year_text}' is not valid."
                    ))]),
                )]),
            ),
        ]));
    };
    let code = country.to_ascii_uppercase();
    let Some(&(_, rules)) = HOLIDAYS.iter().find(|h| h.0 == code) else {
        // 404 with an empty body: `response.json()` raises.
        return Err(PyException::new(
            "JSONDecodeError",
            "Expecting value: line 1 column 1 (char 0)",
        ));
    };
    if !(1900..=2100).contains(&year) {
        return Ok(PyValue::List(vec![]));
    }
    let mut days: Vec<(i64, &Holiday)> = rules
        .iter()
        .filter(|h| h.since.is_none_or(|s| year >= s) && h.until.is_none_or(|u| year <= u))
        .map(|h| (h.when.day(year), h))
        .collect();
    days.sort_by_key(|d| d.0);
    Ok(PyValue::List(
        days.into_iter()
            .map(|(day, h)| {
                let (y, m, d) = civil_from_days(day);
                dict(vec![
                    ("date", PyValue::Str(format!("{y:04}-{m:02}-{d:02}"))),
                    ("localName", PyValue::str(h.local)),
                    ("name", PyValue::str(h.name)),
                    ("countryCode", PyValue::Str(code.clone())),
                    ("fixed", PyValue::Bool(false)),
                    ("global", PyValue::Bool(true)),
                    ("counties", PyValue::None),
                    ("launchYear", h.since.map_or(PyValue::None, PyValue::int)),
                    ("types", PyValue::List(vec![PyValue::str("Public")])),
                ])
            })
            .collect(),
    ))
}

#[derive(Debug, Clone, Copy)]
enum When {
    /// Month, day.
    Fixed(u32, u32),
    /// Days after Western Easter Sunday.
    Easter(i64),
    /// Days after Orthodox Easter Sunday (as a Gregorian date).
    Orthodox(i64),
    /// The `n`th (1-based; 0 = last) weekday (0 = Monday) of a month.
    Nth { month: u32, weekday: i64, n: i64 },
}

impl When {
    /// Days since 1970-01-01.
    fn day(self, year: i64) -> i64 {
        match self {
            When::Fixed(m, d) => days_from_civil(year, m, d),
            When::Easter(off) => {
                let (m, d) = western_easter(year);
                days_from_civil(year, m, d) + off
            }
            When::Orthodox(off) => orthodox_easter(year) + off,
            When::Nth { month, weekday, n } => {
                if n == 0 {
                    let next = if month == 12 {
                        days_from_civil(year + 1, 1, 1)
                    } else {
                        days_from_civil(year, month + 1, 1)
                    };
                    let last = next - 1;
                    last - (weekday_of(last) - weekday).rem_euclid(7)
                } else {
                    let first = days_from_civil(year, month, 1);
                    first + (weekday - weekday_of(first)).rem_euclid(7) + 7 * (n - 1)
                }
            }
        }
    }
}

struct Holiday {
    when: When,
    local: &'static str,
    name: &'static str,
    since: Option<i64>,
    until: Option<i64>,
}

const fn hol(when: When, local: &'static str, name: &'static str) -> Holiday {
    Holiday {
        when,
        local,
        name,
        since: None,
        until: None,
    }
}

const fn hol_years(
    when: When,
    local: &'static str,
    name: &'static str,
    since: Option<i64>,
    until: Option<i64>,
) -> Holiday {
    Holiday {
        when,
        local,
        name,
        since,
        until,
    }
}

/// Gregorian Easter Sunday (anonymous Gregorian algorithm): (month, day).
fn western_easter(y: i64) -> (u32, u32) {
    let a = y % 19;
    let b = y / 100;
    let c = y % 100;
    let d = b / 4;
    let e = b % 4;
    let f = (b + 8) / 25;
    let g = (b - f + 1) / 3;
    let h = (19 * a + b - d - g + 15) % 30;
    let i = c / 4;
    let k = c % 4;
    let l = (32 + 2 * e + 2 * i - h - k) % 7;
    let m = (a + 11 * h + 22 * l) / 451;
    let month = (h + l - 7 * m + 114) / 31;
    let day = (h + l - 7 * m + 114) % 31 + 1;
    (month as u32, day as u32)
}

/// Orthodox Easter Sunday (Meeus' Julian algorithm, shifted to the Gregorian
/// calendar), as days since 1970-01-01.
fn orthodox_easter(y: i64) -> i64 {
    let a = y % 4;
    let b = y % 7;
    let c = y % 19;
    let d = (19 * c + 15) % 30;
    let e = (2 * a + 4 * b - d + 34) % 7;
    let month = (d + e + 114) / 31;
    let day = (d + e + 114) % 31 + 1;
    let julian_to_gregorian = y / 100 - y / 400 - 2;
    days_from_civil(y, month as u32, day as u32) + julian_to_gregorian
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// Inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// 0 = Monday.
fn weekday_of(days: i64) -> i64 {
    (days + 3).rem_euclid(7)
}

/// UTC offset of New York on that day, in hours (-4 in summer time, else -5; the
/// post-2007 rule: second Sunday of March to first Sunday of November).
fn new_york_offset_hours(days: i64) -> i64 {
    let (y, _, _) = civil_from_days(days);
    let start = When::Nth {
        month: 3,
        weekday: 6,
        n: 2,
    }
    .day(y);
    let end = When::Nth {
        month: 11,
        weekday: 6,
        n: 1,
    }
    .day(y);
    if (start..end).contains(&days) {
        -4
    } else {
        -5
    }
}

// -- stock history ------------------------------------------------------------------

struct IntervalSpec {
    name: &'static str,
    /// Bar length in minutes for intraday intervals; 0 for daily and longer.
    minutes: i64,
    /// Relative size of one bar's move.
    vol: f64,
    /// Typical volume of one bar.
    volume: i64,
}

#[rustfmt::skip]
const INTERVALS: [IntervalSpec; 8] = [
    IntervalSpec { name: "5m", minutes: 5, vol: 0.002, volume: 600_000 },
    IntervalSpec { name: "15m", minutes: 15, vol: 0.0035, volume: 1_600_000 },
    IntervalSpec { name: "30m", minutes: 30, vol: 0.005, volume: 3_000_000 },
    IntervalSpec { name: "1h", minutes: 60, vol: 0.007, volume: 5_500_000 },
    IntervalSpec { name: "1d", minutes: 0, vol: 0.015, volume: 55_000_000 },
    IntervalSpec { name: "1wk", minutes: 0, vol: 0.03, volume: 270_000_000 },
    IntervalSpec { name: "1mo", minutes: 0, vol: 0.06, volume: 1_100_000_000 },
    IntervalSpec { name: "3mo", minutes: 0, vol: 0.1, volume: 3_400_000_000 },
];

/// The last `n` bar start times up to [`WORLD_DATE`] (oldest first) as
/// (unix seconds, date text). Daily and longer bars start at New York midnight; intraday
/// bars lie in the 9:30-16:00 New York session of weekdays.
fn history_timestamps(spec: &IntervalSpec, n: usize) -> Vec<(i64, String)> {
    let (wy, wm, wd) = WORLD_DATE;
    let today = days_from_civil(wy, wm, wd);
    let midnight = |day: i64| day * 86400 - new_york_offset_hours(day) * 3600;
    let date = |day: i64| {
        let (y, m, d) = civil_from_days(day);
        format!("{y:04}-{m:02}-{d:02}")
    };
    let prev_weekday = |mut day: i64| {
        day -= 1;
        while weekday_of(day) >= 5 {
            day -= 1;
        }
        day
    };
    let mut out = Vec::with_capacity(n);
    match spec.name {
        "1d" => {
            let mut day = today + 1;
            while out.len() < n {
                day = prev_weekday(day);
                out.push((midnight(day), date(day)));
            }
        }
        "1wk" => {
            let monday = today - weekday_of(today);
            for k in 0..n as i64 {
                let day = monday - 7 * k;
                out.push((midnight(day), date(day)));
            }
        }
        "1mo" | "3mo" => {
            let step = if spec.name == "1mo" { 1 } else { 3 };
            let mut month_index = wy * 12 + i64::from(wm) - 1;
            month_index -= month_index.rem_euclid(12) % step;
            for _ in 0..n {
                let day = days_from_civil(
                    month_index.div_euclid(12),
                    (month_index.rem_euclid(12) + 1) as u32,
                    1,
                );
                out.push((midnight(day), date(day)));
                month_index -= step;
            }
        }
        _ => {
            let step = spec.minutes.max(1);
            let last_offset = (389 / step) * step; // minutes after 9:30
            let mut day = today;
            let mut offset = last_offset;
            while out.len() < n {
                let local_minutes = 9 * 60 + 30 + offset;
                let ts = midnight(day) + local_minutes * 60;
                let (y, m, d) = civil_from_days(day);
                out.push((
                    ts,
                    format!(
                        "{y:04}-{m:02}-{d:02} {:02}:{:02}:00",
                        local_minutes / 60,
                        local_minutes % 60
                    ),
                ));
                offset -= step;
                if offset < 0 {
                    day = prev_weekday(day);
                    offset = last_offset;
                }
            }
        }
    }
    out.reverse();
    out
}

// -- timezone-by-location -----------------------------------------------------------

fn time_zone(a: &Args) -> PyResult {
    let parse = |name: &str, limit: f64| -> Result<Option<f64>, PyException> {
        Ok(query_param(a.req(name)?)
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|x| x.is_finite() && x.abs() <= limit))
    };
    let (Some(lon), Some(lat)) = (parse("long", 180.0)?, parse("lat", 90.0)?) else {
        return Ok(dict(vec![(
            "message",
            PyValue::str("Invalid coordinates: lat must be in [-90, 90], lon in [-180, 180]"),
        )]));
    };
    Ok(PyValue::Str(zone_at(lat, lon)))
}

/// The nearest reference point's zone; far from all of them (open sea), the nautical
/// `Etc/GMT` zone of the longitude (whose sign is inverted by convention).
fn zone_at(lat: f64, lon: f64) -> String {
    let scale = cos_deg(lat);
    let mut best: Option<(f64, &str)> = None;
    for &(zone, zlat, zlon) in TIME_ZONES.iter() {
        let mut dlon = (lon - zlon).abs();
        if dlon > 180.0 {
            dlon = 360.0 - dlon;
        }
        let dlat = lat - zlat;
        let d2 = dlat * dlat + (dlon * scale) * (dlon * scale);
        if best.is_none_or(|(b, _)| d2 < b) {
            best = Some((d2, zone));
        }
    }
    match best {
        Some((d2, zone)) if d2 <= 12.0 * 12.0 => zone.to_string(),
        _ => {
            let hours = (lon / 15.0).round() as i64;
            match hours {
                0 => "Etc/GMT".to_string(),
                h if h > 0 => format!("Etc/GMT-{h}"),
                h => format!("Etc/GMT+{}", -h),
            }
        }
    }
}

/// cos of an angle in degrees in [-90, 90] by a Taylor polynomial: close enough for
/// a nearest-neighbour search, and platform-independent (no libm).
fn cos_deg(deg: f64) -> f64 {
    let x = deg.clamp(-90.0, 90.0) * std::f64::consts::PI / 180.0;
    let x2 = x * x;
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..10 {
        let k = f64::from(k);
        term *= -x2 / ((2.0 * k - 1.0) * (2.0 * k));
        sum += term;
    }
    sum.max(0.0)
}

// -- omdb ---------------------------------------------------------------------------

/// A film as the simulated OMDb knows it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Movie {
    pub title: &'static str,
    pub rated: &'static str,
    pub director: &'static str,
    pub genre: &'static str,
}

/// OMDb's `?t=` title search: case-insensitive, surrounding blanks ignored.
pub(crate) fn find_movie(title: &str) -> Option<&'static Movie> {
    let t = title.trim().to_lowercase();
    MOVIES.iter().find(|m| m.title.to_lowercase() == t)
}

fn movie_field(a: &Args, field: &str) -> PyResult {
    let movie = query_param(a.req("movie_name")?).and_then(|t| find_movie(&t));
    match movie {
        Some(m) => Ok(PyValue::str(if field == "Rated" {
            m.rated
        } else {
            m.director
        })),
        // {"Response": "False", "Error": "Movie not found!"}["Rated"]
        None => Err(PyException::new("KeyError", format!("'{field}'"))),
    }
}

// ---------------------------------------------------------------------------------------
// world tables (plausible values written for this world, not API recordings)
// ---------------------------------------------------------------------------------------

/// Geocoding: normalised city name -> (lat, lon) strings as maps.co formats them.
const CITIES: &[(&str, &str, &str)] = &[
    ("paris", "48.8534951", "2.3483915"),
    ("london", "51.5073219", "-0.1276474"),
    ("new york", "40.7127281", "-74.0060152"),
    ("new york city", "40.7127281", "-74.0060152"),
    ("tokyo", "35.6821936", "139.762221"),
    ("berlin", "52.5170365", "13.3888599"),
    ("madrid", "40.4167047", "-3.7035825"),
    ("rome", "41.8933203", "12.4829321"),
    ("cairo", "30.0443879", "31.2357257"),
    ("beijing", "39.9057136", "116.3912972"),
    ("sydney", "-33.8698439", "151.2082848"),
    ("moscow", "55.7505412", "37.6174782"),
    ("los angeles", "34.0536909", "-118.242766"),
    ("chicago", "41.8755616", "-87.6244212"),
    ("san francisco", "37.7792588", "-122.4193286"),
    ("toronto", "43.6534817", "-79.3839347"),
    ("mumbai", "19.0815772", "72.8866275"),
    ("delhi", "28.6273928", "77.1716954"),
    ("new delhi", "28.6138954", "77.2090057"),
    ("sao paulo", "-23.5506507", "-46.6333824"),
    ("são paulo", "-23.5506507", "-46.6333824"),
    ("mexico city", "19.4326296", "-99.1331785"),
    ("buenos aires", "-34.6083696", "-58.4440583"),
    ("istanbul", "41.0091982", "28.9662187"),
    ("dubai", "25.2653471", "55.2924914"),
    ("singapore", "1.2899175", "103.8519072"),
    ("seoul", "37.5666791", "126.9782914"),
    ("bangkok", "13.7524938", "100.4935089"),
    ("amsterdam", "52.3730796", "4.8924534"),
    ("vienna", "48.2083537", "16.3725042"),
    ("lisbon", "38.7077507", "-9.1365919"),
    ("dublin", "53.3493795", "-6.2605593"),
    ("stockholm", "59.3251172", "18.0710935"),
    ("oslo", "59.9133301", "10.7389701"),
    ("lagos", "6.4550575", "3.3941795"),
    ("nairobi", "-1.2832533", "36.8172449"),
    ("johannesburg", "-26.2049999", "28.0497220"),
    ("seattle", "47.6038321", "-122.330062"),
    ("boston", "42.3554334", "-71.060511"),
    ("miami", "25.7741728", "-80.19362"),
    ("washington", "38.8950368", "-77.0365427"),
    ("berkeley", "37.8708393", "-122.272863"),
    ("rio de janeiro", "-22.9110137", "-43.2093727"),
    ("kyoto", "35.0115754", "135.7681441"),
    ("athens", "37.9755648", "23.7348324"),
    ("prague", "50.0596288", "14.446459"),
    ("warsaw", "52.2319581", "21.0067249"),
    ("hong kong", "22.2793278", "114.1628131"),
];

/// Units per US dollar.
const CURRENCIES: &[(&str, f64)] = &[
    ("USD", 1.0),
    ("EUR", 0.9187),
    ("JPY", 157.31),
    ("GBP", 0.7862),
    ("CHF", 0.8931),
    ("CAD", 1.3712),
    ("AUD", 1.5094),
    ("NZD", 1.6418),
    ("CNY", 7.2503),
    ("HKD", 7.8112),
    ("SGD", 1.3498),
    ("INR", 83.512),
    ("KRW", 1381.2),
    ("BRL", 5.4022),
    ("MXN", 18.193),
    ("ARS", 901.5),
    ("CLP", 931.4),
    ("COP", 3948.7),
    ("SEK", 10.603),
    ("NOK", 10.711),
    ("DKK", 6.8592),
    ("PLN", 3.9817),
    ("CZK", 23.105),
    ("HUF", 362.44),
    ("TRY", 32.871),
    ("RUB", 88.02),
    ("ZAR", 18.334),
    ("AED", 3.6725),
    ("SAR", 3.75),
    ("ILS", 3.7193),
    ("EGP", 47.61),
    ("NGN", 1481.3),
    ("PKR", 278.35),
    ("THB", 36.712),
    ("IDR", 16251.0),
    ("MYR", 4.7015),
    ("PHP", 58.513),
    ("VND", 25452.0),
    ("TWD", 32.344),
];

const SLANG: &[(&str, &str)] = &[
    (
        "lit",
        "When a party, a song or a night out is [turned up]: loud, packed and great fun.",
    ),
    (
        "flex",
        "To [show off] something you own or did, usually money, muscles or a new phone.",
    ),
    (
        "ghosting",
        "Ending contact with someone by simply [never replying] again.",
    ),
    (
        "salty",
        "Being bitter or [annoyed] about something small, usually after losing.",
    ),
    (
        "yeet",
        "To throw something [with force] and no regard for where it lands.",
    ),
    ("sus", "Short for suspicious; someone acting [shady]."),
    (
        "rizz",
        "The ability to [charm] someone you are interested in.",
    ),
    ("no cap", "No lie; [for real]."),
    ("goat", "Greatest of all time; the [best] at something."),
    ("vibe", "The [mood] or feeling of a place, person or song."),
    ("stan", "An [overzealous] fan of a celebrity."),
    ("bussin", "Extremely good, usually said about [food]."),
    (
        "fomo",
        "Fear of missing out: the worry that everyone else is having [more fun].",
    ),
    (
        "yolo",
        "You only live once; the excuse for a [bad decision].",
    ),
    ("slay", "To do something [exceptionally well]."),
    ("mid", "[Average], nothing special, mildly disappointing."),
];

/// covid-193 country name -> (total deaths, active cases).
const COVID: &[(&str, i64, i64)] = &[
    ("USA", 1_219_487, 703_221),
    ("India", 533_623, 1_848),
    ("Brazil", 702_116, 1_795_224),
    ("UK", 232_112, 75_010),
    ("Russia", 400_023, 210_432),
    ("France", 167_985, 91_211),
    ("Germany", 183_027, 95_310),
    ("Italy", 196_487, 60_012),
    ("Spain", 121_852, 31_020),
    ("Mexico", 334_551, 9_870),
    ("Japan", 74_694, 12_340),
    ("S-Korea", 35_934, 48_201),
    ("Canada", 55_282, 20_115),
    ("Australia", 24_414, 52_873),
    ("China", 5_272, 120_345),
    ("Turkey", 101_419, 18_902),
    ("Argentina", 130_663, 25_310),
    ("Poland", 119_641, 6_024),
    ("Iran", 146_837, 8_712),
    ("Indonesia", 161_918, 4_203),
    ("South-Africa", 102_595, 2_931),
    ("Netherlands", 22_992, 8_230),
    ("Sweden", 27_330, 1_520),
    ("Peru", 220_975, 5_002),
    ("Colombia", 142_727, 4_110),
    ("Ukraine", 109_918, 21_340),
    ("Egypt", 24_830, 3_120),
    ("Nigeria", 3_155, 1_410),
    ("Philippines", 66_864, 7_880),
    ("Switzerland", 14_170, 3_310),
    ("Belgium", 34_339, 6_130),
    ("Portugal", 27_640, 9_210),
    ("Greece", 38_580, 5_260),
    ("Israel", 12_707, 3_810),
    ("Chile", 64_497, 7_510),
    ("Vietnam", 43_206, 9_910),
    ("Thailand", 34_729, 2_030),
    ("Pakistan", 30_656, 1_120),
    ("New-Zealand", 4_390, 8_020),
    ("Ireland", 9_889, 4_010),
];

/// (brand, product, lowest price, highest price) for generated ASIN products.
const PRODUCTS: &[(&str, &str, usize, usize)] = &[
    ("Apple", "iPhone 13, 128GB - Unlocked (Renewed)", 280, 520),
    (
        "Samsung",
        "Galaxy S23, 256GB - Unlocked (Renewed)",
        300,
        640,
    ),
    (
        "Anker",
        "USB-C Charger 65W, 3-Port Fast Charging Block",
        25,
        60,
    ),
    (
        "Sony",
        "WH-1000XM4 Wireless Noise Cancelling Headphones",
        180,
        350,
    ),
    (
        "Logitech",
        "MX Master 3S Wireless Performance Mouse",
        70,
        110,
    ),
    (
        "Amazon Basics",
        "Mechanical Gaming Keyboard, Full Size",
        30,
        70,
    ),
    (
        "JBL",
        "Flip 6 Portable Waterproof Bluetooth Speaker",
        90,
        140,
    ),
    ("Bose", "QuietComfort Earbuds II", 180, 280),
    (
        "Lenovo",
        "IdeaPad 3 15.6\" Laptop, 8GB RAM, 256GB SSD",
        330,
        560,
    ),
    ("Kindle", "Paperwhite (16 GB), 6.8\" Display", 130, 160),
    ("SanDisk", "1TB Extreme Portable SSD", 80, 150),
    ("Fitbit", "Charge 6 Fitness Tracker", 110, 160),
];

const COLORS: &[&str] = &[
    "Black",
    "White",
    "Midnight Blue",
    "Silver",
    "Graphite",
    "Red",
];

/// (ticker, company name as Yahoo's search returns it, typical price in USD).
type Stock = (&'static str, &'static str, f64);

const STOCKS: &[Stock] = &[
    ("AAPL", "Apple Inc.", 212.4),
    ("MSFT", "Microsoft Corporation", 503.0),
    ("GOOGL", "Alphabet Inc.", 182.0),
    ("GOOG", "Alphabet Inc.", 183.1),
    ("AMZN", "Amazon.com, Inc.", 225.7),
    ("META", "Meta Platforms, Inc.", 720.9),
    ("TSLA", "Tesla, Inc.", 316.9),
    ("NVDA", "NVIDIA Corporation", 170.7),
    ("NFLX", "Netflix, Inc.", 1250.0),
    ("IBM", "International Business Machines Corporation", 283.0),
    ("INTC", "Intel Corporation", 22.5),
    ("AMD", "Advanced Micro Devices, Inc.", 155.6),
    ("ORCL", "Oracle Corporation", 234.9),
    ("JPM", "JPMorgan Chase & Co.", 288.7),
    ("V", "Visa Inc.", 353.3),
    ("WMT", "Walmart Inc.", 95.9),
    ("KO", "The Coca-Cola Company", 69.9),
    ("PEP", "PepsiCo, Inc.", 135.2),
    ("DIS", "The Walt Disney Company", 121.8),
    ("BA", "The Boeing Company", 222.0),
    ("NKE", "NIKE, Inc.", 72.9),
    ("XOM", "Exxon Mobil Corporation", 111.4),
    ("BRK-B", "Berkshire Hathaway Inc.", 476.5),
    ("CSCO", "Cisco Systems, Inc.", 68.9),
    ("ADBE", "Adobe Inc.", 374.2),
    ("CRM", "Salesforce, Inc.", 259.8),
    ("UBER", "Uber Technologies, Inc.", 93.5),
    ("SBUX", "Starbucks Corporation", 92.4),
    ("MCD", "McDonald's Corporation", 296.4),
    (
        "TSM",
        "Taiwan Semiconductor Manufacturing Company Limited",
        236.0,
    ),
];

/// US zip code -> city as ziptastic spells it (upper case).
const ZIPCODES: &[(&str, &str)] = &[
    ("90210", "BEVERLY HILLS"),
    ("10001", "NEW YORK"),
    ("10118", "NEW YORK"),
    ("11201", "BROOKLYN"),
    ("94103", "SAN FRANCISCO"),
    ("94720", "BERKELEY"),
    ("94043", "MOUNTAIN VIEW"),
    ("94301", "PALO ALTO"),
    ("94305", "STANFORD"),
    ("95014", "CUPERTINO"),
    ("98101", "SEATTLE"),
    ("98052", "REDMOND"),
    ("60601", "CHICAGO"),
    ("60614", "CHICAGO"),
    ("02108", "BOSTON"),
    ("02139", "CAMBRIDGE"),
    ("33101", "MIAMI"),
    ("30303", "ATLANTA"),
    ("20001", "WASHINGTON"),
    ("20147", "ASHBURN"),
    ("75201", "DALLAS"),
    ("73301", "AUSTIN"),
    ("77001", "HOUSTON"),
    ("90012", "LOS ANGELES"),
    ("92101", "SAN DIEGO"),
    ("85001", "PHOENIX"),
    ("80202", "DENVER"),
    ("97201", "PORTLAND"),
    ("89101", "LAS VEGAS"),
    ("19103", "PHILADELPHIA"),
    ("15222", "PITTSBURGH"),
    ("37203", "NASHVILLE"),
    ("70112", "NEW ORLEANS"),
    ("55401", "MINNEAPOLIS"),
    ("48201", "DETROIT"),
    ("96813", "HONOLULU"),
    ("99501", "ANCHORAGE"),
    ("07030", "HOBOKEN"),
    ("08540", "PRINCETON"),
    ("06510", "NEW HAVEN"),
];

/// (zone id, latitude, longitude) reference points.
const TIME_ZONES: &[(&str, f64, f64)] = &[
    ("America/New_York", 40.71, -74.01),
    ("America/New_York", 35.23, -80.84),
    ("America/New_York", 25.76, -80.19),
    ("America/Detroit", 42.33, -83.05),
    ("America/Chicago", 41.88, -87.63),
    ("America/Chicago", 29.76, -95.37),
    ("America/Denver", 39.74, -104.99),
    ("America/Phoenix", 33.45, -112.07),
    ("America/Los_Angeles", 34.05, -118.24),
    ("America/Los_Angeles", 37.77, -122.42),
    ("America/Anchorage", 61.22, -149.9),
    ("Pacific/Honolulu", 21.31, -157.86),
    ("America/Toronto", 43.65, -79.38),
    ("America/Vancouver", 49.28, -123.12),
    ("America/Edmonton", 53.55, -113.49),
    ("America/Winnipeg", 49.9, -97.14),
    ("America/Halifax", 44.65, -63.57),
    ("America/Mexico_City", 19.43, -99.13),
    ("America/Bogota", 4.71, -74.07),
    ("America/Caracas", 10.48, -66.9),
    ("America/Lima", -12.05, -77.04),
    ("America/Sao_Paulo", -23.55, -46.63),
    ("America/Manaus", -3.12, -60.02),
    ("America/Argentina/Buenos_Aires", -34.6, -58.38),
    ("America/Santiago", -33.45, -70.67),
    ("America/Nuuk", 64.18, -51.69),
    ("Atlantic/Reykjavik", 64.15, -21.94),
    ("Europe/London", 51.51, -0.13),
    ("Europe/Dublin", 53.35, -6.26),
    ("Europe/Lisbon", 38.72, -9.14),
    ("Europe/Madrid", 40.42, -3.7),
    ("Europe/Paris", 48.86, 2.35),
    ("Europe/Berlin", 52.52, 13.4),
    ("Europe/Rome", 41.9, 12.5),
    ("Europe/Amsterdam", 52.37, 4.9),
    ("Europe/Stockholm", 59.33, 18.07),
    ("Europe/Warsaw", 52.23, 21.01),
    ("Europe/Athens", 37.98, 23.73),
    ("Europe/Istanbul", 41.01, 28.98),
    ("Europe/Kyiv", 50.45, 30.52),
    ("Europe/Moscow", 55.76, 37.62),
    ("Africa/Casablanca", 33.57, -7.59),
    ("Africa/Lagos", 6.52, 3.38),
    ("Africa/Cairo", 30.04, 31.24),
    ("Africa/Nairobi", -1.29, 36.82),
    ("Africa/Johannesburg", -26.2, 28.05),
    ("Asia/Jerusalem", 31.77, 35.21),
    ("Asia/Riyadh", 24.71, 46.68),
    ("Asia/Tehran", 35.69, 51.39),
    ("Asia/Dubai", 25.2, 55.27),
    ("Asia/Karachi", 24.86, 67.0),
    ("Asia/Kolkata", 28.61, 77.21),
    ("Asia/Kolkata", 19.08, 72.88),
    ("Asia/Dhaka", 23.81, 90.41),
    ("Asia/Almaty", 43.24, 76.89),
    ("Asia/Yekaterinburg", 56.84, 60.6),
    ("Asia/Novosibirsk", 55.03, 82.92),
    ("Asia/Bangkok", 13.76, 100.5),
    ("Asia/Jakarta", -6.2, 106.85),
    ("Asia/Singapore", 1.35, 103.82),
    ("Asia/Shanghai", 31.23, 121.47),
    ("Asia/Shanghai", 39.9, 116.4),
    ("Asia/Hong_Kong", 22.32, 114.17),
    ("Asia/Manila", 14.6, 120.98),
    ("Asia/Seoul", 37.57, 126.98),
    ("Asia/Tokyo", 35.68, 139.69),
    ("Asia/Vladivostok", 43.12, 131.89),
    ("Australia/Perth", -31.95, 115.86),
    ("Australia/Adelaide", -34.93, 138.6),
    ("Australia/Brisbane", -27.47, 153.03),
    ("Australia/Sydney", -33.87, 151.21),
    ("Pacific/Auckland", -36.85, 174.76),
    ("Antarctica/Palmer", -64.77, -64.05),
    ("Antarctica/Rothera", -67.57, -68.13),
    ("Antarctica/Troll", -72.01, 2.53),
    ("Antarctica/Syowa", -69.0, 39.58),
    ("Antarctica/Mawson", -67.6, 62.87),
    ("Antarctica/Davis", -68.58, 77.97),
    ("Antarctica/Vostok", -78.46, 106.84),
    ("Antarctica/Casey", -66.28, 110.53),
    ("Antarctica/DumontDUrville", -66.66, 140.0),
    ("Antarctica/McMurdo", -77.85, 166.67),
];

const fn movie(
    title: &'static str,
    rated: &'static str,
    director: &'static str,
    genre: &'static str,
) -> Movie {
    Movie {
        title,
        rated,
        director,
        genre,
    }
}

#[rustfmt::skip]
const MOVIES: &[Movie] = &[
    movie("Avatar", "PG-13", "James Cameron", "Action, Adventure, Fantasy"),
    movie("Pulp Fiction", "R", "Quentin Tarantino", "Crime, Drama"),
    movie("The Godfather", "R", "Francis Ford Coppola", "Crime, Drama"),
    movie("The Dark Knight", "PG-13", "Christopher Nolan", "Action, Crime, Drama"),
    movie("Inception", "PG-13", "Christopher Nolan", "Action, Adventure, Sci-Fi"),
    movie("Interstellar", "PG-13", "Christopher Nolan", "Adventure, Drama, Sci-Fi"),
    movie("Oppenheimer", "R", "Christopher Nolan", "Biography, Drama, History"),
    movie("Titanic", "PG-13", "James Cameron", "Drama, Romance"),
    movie("The Shawshank Redemption", "R", "Frank Darabont", "Drama"),
    movie("Forrest Gump", "PG-13", "Robert Zemeckis", "Drama, Romance"),
    movie("Back to the Future", "PG", "Robert Zemeckis", "Adventure, Comedy, Sci-Fi"),
    movie("The Matrix", "R", "Lana Wachowski, Lilly Wachowski", "Action, Sci-Fi"),
    movie("Jurassic Park", "PG-13", "Steven Spielberg", "Action, Adventure, Sci-Fi"),
    movie("Jaws", "PG", "Steven Spielberg", "Adventure, Thriller"),
    movie("Schindler's List", "R", "Steven Spielberg", "Biography, Drama, History"),
    movie("Toy Story", "G", "John Lasseter", "Animation, Adventure, Comedy"),
    movie("The Lion King", "G", "Roger Allers, Rob Minkoff", "Animation, Adventure, Drama"),
    movie("Frozen", "PG", "Chris Buck, Jennifer Lee", "Animation, Adventure, Comedy"),
    movie("Finding Nemo", "G", "Andrew Stanton, Lee Unkrich", "Animation, Adventure, Comedy"),
    movie("Spirited Away", "PG", "Hayao Miyazaki", "Animation, Adventure, Family"),
    movie("Gladiator", "R", "Ridley Scott", "Action, Adventure, Drama"),
    movie("Fight Club", "R", "David Fincher", "Drama"),
    movie("Parasite", "R", "Bong Joon Ho", "Drama, Thriller"),
    movie("The Avengers", "PG-13", "Joss Whedon", "Action, Sci-Fi"),
    movie("Barbie", "PG-13", "Greta Gerwig", "Adventure, Comedy, Fantasy"),
    movie("Casablanca", "PG", "Michael Curtiz", "Drama, Romance, War"),
    movie("The Silence of the Lambs", "R", "Jonathan Demme", "Crime, Drama, Thriller"),
    movie("Star Wars", "PG", "George Lucas", "Action, Adventure, Fantasy"),
    movie("Shrek", "PG", "Andrew Adamson, Vicky Jenson", "Animation, Adventure, Comedy"),
    movie("Up", "PG", "Pete Docter, Bob Peterson", "Animation, Adventure, Comedy"),
];

use When::{Easter, Fixed, Orthodox};

const fn nth(month: u32, weekday: i64, n: i64) -> When {
    When::Nth { month, weekday, n }
}

/// Public holidays per nager.date country code (national ones only).
#[rustfmt::skip]
const HOLIDAYS: &[(&str, &[Holiday])] = &[
    (
        "US",
        &[
            hol(Fixed(1, 1), "New Year's Day", "New Year's Day"),
            hol(nth(1, 0, 3), "Martin Luther King, Jr. Day", "Martin Luther King, Jr. Day"),
            hol(nth(2, 0, 3), "Presidents Day", "Washington's Birthday"),
            hol(nth(5, 0, 0), "Memorial Day", "Memorial Day"),
            hol_years(Fixed(6, 19), "Juneteenth National Independence Day", "Juneteenth National Independence Day", Some(2021), None),
            hol(Fixed(7, 4), "Independence Day", "Independence Day"),
            hol(nth(9, 0, 1), "Labor Day", "Labour Day"),
            hol(nth(10, 0, 2), "Columbus Day", "Columbus Day"),
            hol(Fixed(11, 11), "Veterans Day", "Veterans Day"),
            hol(nth(11, 3, 4), "Thanksgiving Day", "Thanksgiving Day"),
            hol(Fixed(12, 25), "Christmas Day", "Christmas Day"),
        ],
    ),
    (
        "GB",
        &[
            hol(Fixed(1, 1), "New Year's Day", "New Year's Day"),
            hol(Easter(-2), "Good Friday", "Good Friday"),
            hol(Easter(1), "Easter Monday", "Easter Monday"),
            hol(nth(5, 0, 1), "Early May Bank Holiday", "Early May Bank Holiday"),
            hol(nth(5, 0, 0), "Spring Bank Holiday", "Spring Bank Holiday"),
            hol(nth(8, 0, 0), "Summer Bank Holiday", "Summer Bank Holiday"),
            hol(Fixed(12, 25), "Christmas Day", "Christmas Day"),
            hol(Fixed(12, 26), "Boxing Day", "St. Stephen's Day"),
        ],
    ),
    (
        "FR",
        &[
            hol(Fixed(1, 1), "Jour de l'an", "New Year's Day"),
            hol(Easter(1), "Lundi de Pâques", "Easter Monday"),
            hol(Fixed(5, 1), "Fête du Travail", "Labour Day"),
            hol(Fixed(5, 8), "Victoire 1945", "Victory in Europe Day"),
            hol(Easter(39), "Ascension", "Ascension Day"),
            hol(Easter(50), "Lundi de Pentecôte", "Whit Monday"),
            hol(Fixed(7, 14), "Fête nationale", "Bastille Day"),
            hol(Fixed(8, 15), "Assomption", "Assumption Day"),
            hol(Fixed(11, 1), "Toussaint", "All Saints' Day"),
            hol(Fixed(11, 11), "Armistice 1918", "Armistice Day"),
            hol(Fixed(12, 25), "Noël", "Christmas Day"),
        ],
    ),
    (
        "DE",
        &[
            hol(Fixed(1, 1), "Neujahr", "New Year's Day"),
            hol(Easter(-2), "Karfreitag", "Good Friday"),
            hol(Easter(1), "Ostermontag", "Easter Monday"),
            hol(Fixed(5, 1), "Tag der Arbeit", "Labour Day"),
            hol(Easter(39), "Christi Himmelfahrt", "Ascension Day"),
            hol(Easter(50), "Pfingstmontag", "Whit Monday"),
            hol(Fixed(10, 3), "Tag der Deutschen Einheit", "German Unity Day"),
            hol(Fixed(12, 25), "Erster Weihnachtstag", "Christmas Day"),
            hol(Fixed(12, 26), "Zweiter Weihnachtstag", "St. Stephen's Day"),
        ],
    ),
    (
        "AT",
        &[
            hol(Fixed(1, 1), "Neujahr", "New Year's Day"),
            hol(Fixed(1, 6), "Heilige Drei Könige", "Epiphany"),
            hol(Easter(1), "Ostermontag", "Easter Monday"),
            hol(Fixed(5, 1), "Staatsfeiertag", "National Holiday"),
            hol(Easter(39), "Christi Himmelfahrt", "Ascension Day"),
            hol(Easter(50), "Pfingstmontag", "Whit Monday"),
            hol(Easter(60), "Fronleichnam", "Corpus Christi"),
            hol(Fixed(8, 15), "Maria Himmelfahrt", "Assumption Day"),
            hol(Fixed(10, 26), "Nationalfeiertag", "National Holiday"),
            hol(Fixed(11, 1), "Allerheiligen", "All Saints' Day"),
            hol(Fixed(12, 8), "Mariä Empfängnis", "Immaculate Conception"),
            hol(Fixed(12, 25), "Christtag", "Christmas Day"),
            hol(Fixed(12, 26), "Stefanitag", "St. Stephen's Day"),
        ],
    ),
    (
        "ES",
        &[
            hol(Fixed(1, 1), "Año Nuevo", "New Year's Day"),
            hol(Fixed(1, 6), "Día de Reyes / Epifanía del Señor", "Epiphany"),
            hol(Easter(-2), "Viernes Santo", "Good Friday"),
            hol(Fixed(5, 1), "Fiesta del trabajo", "Labour Day"),
            hol(Fixed(8, 15), "Asunción", "Assumption"),
            hol(Fixed(10, 12), "Fiesta Nacional de España", "National Day"),
            hol(Fixed(11, 1), "Todos los Santos", "All Saints Day"),
            hol(Fixed(12, 6), "Día de la Constitución", "Constitution Day"),
            hol(Fixed(12, 8), "Inmaculada Concepción", "Immaculate Conception"),
            hol(Fixed(12, 25), "Navidad", "Christmas Day"),
        ],
    ),
    (
        "IT",
        &[
            hol(Fixed(1, 1), "Capodanno", "New Year's Day"),
            hol(Fixed(1, 6), "Epifania", "Epiphany"),
            hol(Easter(0), "Pasqua", "Easter Sunday"),
            hol(Easter(1), "Lunedì dell'Angelo", "Easter Monday"),
            hol(Fixed(4, 25), "Festa della Liberazione", "Liberation Day"),
            hol(Fixed(5, 1), "Festa del Lavoro", "International Workers' Day"),
            hol(Fixed(6, 2), "Festa della Repubblica", "Republic Day"),
            hol(Fixed(8, 15), "Ferragosto o Assunzione", "Assumption Day"),
            hol(Fixed(11, 1), "Tutti i santi", "All Saints Day"),
            hol(Fixed(12, 8), "Immacolata Concezione", "Immaculate Conception"),
            hol(Fixed(12, 25), "Natale", "Christmas Day"),
            hol(Fixed(12, 26), "Santo Stefano", "St. Stephen's Day"),
        ],
    ),
    (
        "NL",
        &[
            hol(Fixed(1, 1), "Nieuwjaarsdag", "New Year's Day"),
            hol(Easter(-2), "Goede Vrijdag", "Good Friday"),
            hol(Easter(0), "Eerste Paasdag", "Easter Sunday"),
            hol(Easter(1), "Tweede Paasdag", "Easter Monday"),
            hol_years(Fixed(4, 30), "Koninginnedag", "Queen's Day", None, Some(2013)),
            hol_years(Fixed(4, 27), "Koningsdag", "King's Day", Some(2014), None),
            hol(Fixed(5, 5), "Bevrijdingsdag", "Liberation Day"),
            hol(Easter(39), "Hemelvaartsdag", "Ascension Day"),
            hol(Easter(49), "Eerste Pinksterdag", "Pentecost"),
            hol(Easter(50), "Tweede Pinksterdag", "Whit Monday"),
            hol(Fixed(12, 25), "Eerste Kerstdag", "Christmas Day"),
            hol(Fixed(12, 26), "Tweede Kerstdag", "St. Stephen's Day"),
        ],
    ),
    (
        "PL",
        &[
            hol(Fixed(1, 1), "Nowy Rok", "New Year's Day"),
            hol_years(Fixed(1, 6), "Święto Trzech Króli", "Epiphany", Some(2011), None),
            hol(Easter(0), "Wielkanoc", "Easter Sunday"),
            hol(Easter(1), "Drugi Dzień Wielkanocy", "Easter Monday"),
            hol(Fixed(5, 1), "Święto Pracy", "May Day"),
            hol(Fixed(5, 3), "Święto Narodowe Trzeciego Maja", "Constitution Day"),
            hol(Easter(49), "Zielone Świątki", "Pentecost Sunday"),
            hol(Easter(60), "Boże Ciało", "Corpus Christi"),
            hol(Fixed(8, 15), "Wniebowzięcie Najświętszej Maryi Panny", "Assumption Day"),
            hol(Fixed(11, 1), "Wszystkich Świętych", "All Saints' Day"),
            hol(Fixed(11, 11), "Narodowe Święto Niepodległości", "Independence Day"),
            hol(Fixed(12, 25), "Boże Narodzenie (pierwszy dzień)", "Christmas Day"),
            hol(Fixed(12, 26), "Boże Narodzenie (drugi dzień)", "St. Stephen's Day"),
        ],
    ),
    (
        "RO",
        &[
            hol(Fixed(1, 1), "Anul Nou", "New Year's Day"),
            hol(Fixed(1, 2), "A doua zi după Anul Nou", "Day after New Year's Day"),
            hol_years(Fixed(1, 24), "Ziua Unirii Principatelor Române", "Union Day", Some(2017), None),
            hol_years(Orthodox(-2), "Vinerea Mare", "Good Friday", Some(2018), None),
            hol(Orthodox(0), "Paștele", "Easter Sunday"),
            hol(Orthodox(1), "A doua zi de Paște", "Easter Monday"),
            hol(Fixed(5, 1), "Ziua Muncii", "Labour Day"),
            hol_years(Fixed(6, 1), "Ziua Copilului", "Children's Day", Some(2017), None),
            hol(Orthodox(49), "Rusaliile", "Pentecost"),
            hol(Orthodox(50), "A doua zi de Rusalii", "Whit Monday"),
            hol(Fixed(8, 15), "Adormirea Maicii Domnului", "Dormition of the Theotokos"),
            hol(Fixed(11, 30), "Sfântul Andrei", "St. Andrew's Day"),
            hol(Fixed(12, 1), "Ziua Națională", "National Day"),
            hol(Fixed(12, 25), "Crăciunul", "Christmas Day"),
            hol(Fixed(12, 26), "A doua zi de Crăciun", "St. Stephen's Day"),
        ],
    ),
    (
        "SK",
        &[
            hol(Fixed(1, 1), "Deň vzniku Slovenskej republiky", "Day of the Establishment of the Slovak Republic"),
            hol(Fixed(1, 6), "Zjavenie Pána", "Epiphany"),
            hol(Easter(-2), "Veľký piatok", "Good Friday"),
            hol(Easter(1), "Veľkonočný pondelok", "Easter Monday"),
            hol(Fixed(5, 1), "Sviatok práce", "International Workers' Day"),
            hol(Fixed(5, 8), "Deň víťazstva nad fašizmom", "Day of victory over fascism"),
            hol(Fixed(7, 5), "Sviatok svätého Cyrila a Metoda", "St. Cyril and Methodius Day"),
            hol(Fixed(8, 29), "Výročie SNP", "Slovak National Uprising anniversary"),
            hol(Fixed(9, 1), "Deň Ústavy Slovenskej republiky", "Day of the Constitution of the Slovak Republic"),
            hol(Fixed(9, 15), "Sedembolestná Panna Mária", "Day of Blessed Virgin Mary"),
            hol(Fixed(11, 1), "Sviatok všetkých svätých", "All Saints' Day"),
            hol(Fixed(11, 17), "Deň boja za slobodu a demokraciu", "Struggle for Freedom and Democracy Day"),
            hol(Fixed(12, 24), "Štedrý deň", "Christmas Eve"),
            hol(Fixed(12, 25), "Prvý sviatok vianočný", "Christmas Day"),
            hol(Fixed(12, 26), "Druhý sviatok vianočný", "St. Stephen's Day"),
        ],
    ),
    (
        "UA",
        &[
            hol(Fixed(1, 1), "Новий Рік", "New Year's Day"),
            hol_years(Fixed(1, 7), "Різдво", "(Julian) Christmas", None, Some(2023)),
            hol(Fixed(3, 8), "Міжнародний жіночий день", "International Women's Day"),
            hol(Orthodox(0), "Великдень", "(Julian) Easter Sunday"),
            hol(Orthodox(49), "Трійця", "(Julian) Pentecost"),
            hol(Fixed(5, 1), "День праці", "International Workers' Day"),
            hol_years(Fixed(5, 9), "День перемоги", "Victory day over Nazism in World War II", None, Some(2023)),
            hol(Fixed(6, 28), "День Конституції", "Constitution Day"),
            hol(Fixed(8, 24), "День Незалежності", "Independence Day"),
            hol_years(Fixed(10, 14), "День захисника України", "Defender of Ukraine Day", Some(2015), None),
            hol_years(Fixed(12, 25), "Різдво Христове", "Christmas Day", Some(2017), None),
        ],
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfcl::pyparse::parse_call;
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
            eprintln!(
                "skipped recorded_hits_every_rest_ground_truth: ../shared/data/otb/bfcl absent"
            );
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
        let err =
            RecordedBackend::from_json_str("{\"ab\": {\"error\": null}}", "r.json").unwrap_err();
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
        let out =
            |args: &[(String, PyValue)]| rec.call("f", args).expect("hit").expect("ok").repr();
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
            let chain =
                BackendChain::paper(dir.join("recorded_api_responses.json"), 0).expect("loads");
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
                        [
                            "date", "date_utc", "open", "high", "low", "close", "volume",
                            "adjclose"
                        ]
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
}
