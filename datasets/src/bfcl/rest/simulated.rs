//! The simulated backend: a deterministic offline world answering all 19 REST
//! functions (see the [`super`] module docs). The facts it draws on are in
//! [`super::world`], its calendar arithmetic in [`super::calendar`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use num_bigint::BigInt;
use sha2::{Digest as _, Sha256};

use super::backend::{
    query_param, unpack2, AmazonField, Args, PyResult, RestBackend, RestFunctions,
};
use super::calendar::*;
use super::world::*;
use crate::bfcl::python::exception::PyException;
use crate::bfcl::python::value::{binop, BinOp, PyValue};
// ---------------------------------------------------------------------------------------

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

// -- small helpers ------------------------------------------------------------------

/// 64 bits of SHA-256 over the seed and the parts (separated, so `["ab","c"]` differs
/// from `["a","bc"]`).
pub(super) fn hash64(seed: u64, parts: &[&str]) -> u64 {
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

pub(super) fn unit(seed: u64, parts: &[&str]) -> f64 {
    (hash64(seed, parts) >> 11) as f64 / (1u64 << 53) as f64
}

/// Rounds to `decimals` places (half away from zero), like the APIs' JSON numbers.
pub(super) fn round_to(x: f64, decimals: u32) -> f64 {
    let scale = [1.0, 10.0, 100.0, 1000.0, 10000.0][decimals.min(4) as usize];
    (x * scale).round() / scale
}

/// A price as a JSON API sends it: two decimals, and `236` (an int after
/// `json.loads`) when the cents are zero.
pub(super) fn json_price(x: f64) -> PyValue {
    let r = round_to(x, 2);
    if r.fract() == 0.0 && r.abs() < 1e15 {
        PyValue::Int(BigInt::from(r as i64))
    } else {
        PyValue::Float(r)
    }
}

pub(super) fn dict(entries: Vec<(&str, PyValue)>) -> PyValue {
    PyValue::Dict(
        entries
            .into_iter()
            .map(|(k, v)| (PyValue::str(k), v))
            .collect(),
    )
}

/// yahoo-finance15's response envelope, returned whole by the originals on a miss.
pub(super) fn yahoo_envelope(body: Vec<PyValue>) -> PyValue {
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

/// Lower case, trimmed, up to the first comma ("Paris, France" -> "paris").
pub(super) fn normalise_city(q: &str) -> String {
    q.split(',').next().unwrap_or("").trim().to_lowercase()
}

// -- ip-api -------------------------------------------------------------------------

pub(super) enum IpClass {
    /// `http://ip-api.com/json/` with nothing after the slash locates the caller.
    Requester,
    /// A public address or a host name, keyed for the seeded location pick.
    Public(String),
    /// ip-api's `message` for a failed lookup.
    Message(&'static str),
}

pub(super) fn classify_ip(query: &str) -> IpClass {
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

pub(super) fn classify_v4(ip: Ipv4Addr) -> IpClass {
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

pub(super) fn classify_v6(ip: Ipv6Addr) -> IpClass {
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
pub(super) fn is_host_name(s: &str) -> bool {
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
// -- ziptastic ----------------------------------------------------------------------

pub(super) fn zipcode_city(a: &Args) -> PyResult {
    let zip = a.req("zipcode")?.py_str();
    Ok(match ZIPCODES.iter().find(|z| z.0 == zip) {
        Some(z) => PyValue::str(z.1),
        None => dict(vec![("error", PyValue::str("Zip Code not found!"))]),
    })
}

// -- date.nager.at ------------------------------------------------------------------

pub(super) fn holidays(a: &Args) -> PyResult {
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
// -- timezone-by-location -----------------------------------------------------------

pub(super) fn time_zone(a: &Args) -> PyResult {
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
pub(super) fn zone_at(lat: f64, lon: f64) -> String {
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
pub(super) fn cos_deg(deg: f64) -> f64 {
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

pub(super) fn movie_field(a: &Args, field: &str) -> PyResult {
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
