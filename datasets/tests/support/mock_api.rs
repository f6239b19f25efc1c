//! A tiny HTTP/1.1 server on 127.0.0.1 for tests of the live REST backend: answers
//! every GET from a route function, records what it received, and never touches the
//! network beyond the loopback interface. Shared by `datasets/tests/live_backend.rs`
//! and the workspace's `tests/live_cli.rs` (through `#[path]`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    /// Path and query, as sent (`/v1/forecast?latitude=1`).
    pub target: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
}

impl Seen {
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// The raw (still encoded) value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        let query = self.target.split_once('?')?.1;
        query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the server answers.
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Reply {
    pub fn json(status: u16, body: &str) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            body: body.to_string(),
        }
    }

    pub fn html(status: u16, body: &str) -> Reply {
        Reply {
            status,
            content_type: "text/html",
            body: body.to_string(),
        }
    }
}

type Route = dyn Fn(&Seen) -> Reply + Send + Sync;

/// A running server; stopped and joined on drop.
pub struct MockApi {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl MockApi {
    pub fn start(route: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> MockApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let route: Arc<Route> = Arc::new(route);
        let handle = {
            let (seen, stop) = (Arc::clone(&seen), Arc::clone(&stop));
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = conn else { continue };
                    // One request per connection; errors only end that connection.
                    let _ = serve(stream, &*route, &seen);
                }
            })
        };
        MockApi {
            base: format!("http://{addr}"),
            addr,
            seen,
            stop,
            handle: Some(handle),
        }
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

impl Drop for MockApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(stream: TcpStream, route: &Route, seen: &Mutex<Vec<Seen>>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Ok(());
    };
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let request = Seen {
        method: method.to_string(),
        target: target.to_string(),
        headers,
    };
    let reply = route(&request);
    seen.lock().expect("lock").push(request);
    let mut out = stream;
    write!(
        out,
        "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reply.status,
        reply.content_type,
        reply.body.len()
    )?;
    out.write_all(reply.body.as_bytes())?;
    out.flush()
}

// ---------------------------------------------------------------------------------------
// a fake world in the real APIs' JSON shapes
// ---------------------------------------------------------------------------------------

/// The fake keys [`fake_apis`] accepts, by environment variable.
pub const FAKE_KEYS: [(&str, &str); 4] = [
    ("GEOCODE_API_KEY", "geo-key-1"),
    ("RAPID_API_KEY", "rapid-key-2"),
    ("OMDB_API_KEY", "omdb-key-3"),
    ("EXCHANGERATE_API_KEY", "fx-key-4"),
];

fn fake_key(var: &str) -> &'static str {
    FAKE_KEYS
        .iter()
        .find(|(v, _)| *v == var)
        .map(|(_, k)| *k)
        .unwrap_or("")
}

/// Answers like open-meteo, geocode.maps.co, exchangerate-api, ip-api, the RapidAPI
/// hosts, ziptastic, nager.date and OMDb do (shapes copied from their documentation),
/// checking the keys where the originals send them.
pub fn fake_apis(req: &Seen) -> Reply {
    let rapid = |host: &str| -> Option<Reply> {
        if req.header("x-rapidapi-key") != Some(fake_key("RAPID_API_KEY"))
            || req.header("x-rapidapi-host") != Some(host)
        {
            return Some(Reply::json(
                403,
                r#"{"message":"You are not subscribed to this API."}"#,
            ));
        }
        None
    };
    let p = |name: &str| req.param(name).unwrap_or("");
    let path = req.path();
    if path == "/v1/forecast" {
        return match p("latitude").parse::<f64>() {
            Ok(lat) if lat.abs() <= 90.0 => Reply::json(
                200,
                r#"{"latitude":40.710335,"longitude":-73.99307,"generationtime_ms":0.02,
                    "utc_offset_seconds":0,"timezone":"GMT","elevation":32.0,
                    "current_units":{"time":"iso8601","interval":"seconds","temperature_2m":"°F"},
                    "current":{"time":"2025-07-15T14:00","interval":900,"temperature_2m":78.4}}"#,
            ),
            _ => Reply::json(
                400,
                r#"{"error":true,"reason":"Latitude must be in range of -90 to 90°."}"#,
            ),
        };
    }
    if path == "/search" {
        if p("api_key") != fake_key("GEOCODE_API_KEY") {
            return Reply::json(401, r#"{"error":"invalid api key"}"#);
        }
        return match p("q") {
            "Paris" => Reply::json(
                200,
                r#"[{"place_id":331232,"licence":"Data © OpenStreetMap","lat":"48.8588897",
                     "lon":"2.3200410217200766","display_name":"Paris, Île-de-France, France"}]"#,
            ),
            _ => Reply::json(200, "[]"),
        };
    }
    if let Some(rest) = path.strip_prefix("/v6/") {
        let Some((key, base)) = rest.split_once("/latest/") else {
            return Reply::json(404, r#"{"result":"error","error-type":"unknown-route"}"#);
        };
        if key != fake_key("EXCHANGERATE_API_KEY") {
            return Reply::json(403, r#"{"result":"error","error-type":"invalid-key"}"#);
        }
        return match base {
            "EUR" => Reply::json(
                200,
                r#"{"result":"success","base_code":"EUR",
                    "conversion_rates":{"EUR":1,"JPY":171.9067,"USD":1.0862}}"#,
            ),
            _ => Reply::json(404, r#"{"result":"error","error-type":"unsupported-code"}"#),
        };
    }
    if let Some(ip) = path.strip_prefix("/json/") {
        return match ip {
            "8.8.8.8" => Reply::json(
                200,
                r#"{"status":"success","country":"United States","city":"Ashburn",
                    "zip":"20149","lat":39.03,"lon":-77.5,"query":"8.8.8.8"}"#,
            ),
            _ => Reply::json(
                200,
                &format!(r#"{{"status":"fail","message":"private range","query":"{ip}"}}"#),
            ),
        };
    }
    if path == "/statistics" {
        if let Some(denied) = rapid("covid-193.p.rapidapi.com") {
            return denied;
        }
        return match p("country") {
            "France" => Reply::json(
                200,
                r#"{"get":"statistics","parameters":{"country":"France"},"errors":[],"results":1,
                    "response":[{"country":"France","cases":{"active":1234567,"total":38997490},
                    "deaths":{"total":167642}}]}"#,
            ),
            other => Reply::json(
                200,
                &format!(
                    r#"{{"get":"statistics","parameters":{{"country":"{other}"}},"errors":[],"results":0,"response":[]}}"#
                ),
            ),
        };
    }
    if path == "/product-details" {
        if let Some(denied) = rapid("real-time-amazon-data.p.rapidapi.com") {
            return denied;
        }
        return match (p("asin"), p("country")) {
            ("B08N5WRWNW", "US") => Reply::json(
                200,
                r#"{"status":"OK","data":{"asin":"B08N5WRWNW","product_title":"Echo Dot (4th Gen)",
                    "product_price":"$49.99","product_star_rating":"4.7"}}"#,
            ),
            _ => Reply::json(
                200,
                r#"{"status":"ERROR","error":{"message":"Invalid ASIN","code":400}}"#,
            ),
        };
    }
    if path == "/api/v1/markets/stock/history" {
        if let Some(denied) = rapid("yahoo-finance15.p.rapidapi.com") {
            return denied;
        }
        let entries: Vec<String> = (0..12)
            .map(|i| {
                let ts = 1_751_342_400 + i * 86_400;
                format!(r#""{ts}":{{"date_utc":{ts},"close":{}.5}}"#, 200 + i)
            })
            .collect();
        return Reply::json(
            200,
            &format!(
                r#"{{"meta":{{"symbol":"{}"}},"body":{{{}}}}}"#,
                p("symbol"),
                entries.join(",")
            ),
        );
    }
    if path == "/api/v1/markets/stock/quotes" {
        if let Some(denied) = rapid("yahoo-finance15.p.rapidapi.com") {
            return denied;
        }
        return Reply::json(
            200,
            r#"{"meta":{"version":"v1.0","status":200},
                "body":[{"symbol":"AAPL","regularMarketPrice":"211.16"}]}"#,
        );
    }
    if path == "/define" {
        if let Some(denied) = rapid("mashape-community-urban-dictionary.p.rapidapi.com") {
            return denied;
        }
        return match p("term") {
            "yeet" => Reply::json(
                200,
                r#"{"list":[{"definition":"To [throw] something with force.","word":"yeet"}]}"#,
            ),
            _ => Reply::json(200, r#"{"list":[]}"#),
        };
    }
    if path == "/timezone" {
        if let Some(denied) = rapid("timezone-by-location.p.rapidapi.com") {
            return denied;
        }
        return Reply::json(
            200,
            r#"{"Zones":[{"TimezoneId":"America/New_York","CountryAlpha2":"US"}],"Result":"Success"}"#,
        );
    }
    if let Some(rest) = path.strip_prefix("/api/v3/publicholidays/") {
        return match rest {
            "2010/FR" => Reply::json(
                200,
                r#"[{"date":"2010-01-01","localName":"Jour de l'an","name":"New Year's Day",
                     "countryCode":"FR","fixed":true,"global":true,"counties":null,
                     "launchYear":1967,"types":["Public"]},
                    {"date":"2010-07-14","localName":"Fête nationale","name":"Bastille Day",
                     "countryCode":"FR","fixed":true,"global":true,"counties":null,
                     "launchYear":null,"types":["Public"]}]"#,
            ),
            _ => Reply::json(404, ""),
        };
    }
    if path == "/90210" {
        return Reply::json(
            200,
            r#"{"country":"US","state":"CA","city":"BEVERLY HILLS"}"#,
        );
    }
    if path == "/" {
        if p("apikey") != fake_key("OMDB_API_KEY") {
            return Reply::json(401, r#"{"Response":"False","Error":"Invalid API key!"}"#);
        }
        return match p("t") {
            "Avatar" | "The+Matrix" => Reply::json(
                200,
                r#"{"Title":"Avatar","Year":"2009","Rated":"PG-13","Director":"James Cameron",
                    "Response":"True"}"#,
            ),
            "Broken" => Reply::html(502, "<html><body>Bad gateway</body></html>"),
            _ => Reply::json(200, r#"{"Response":"False","Error":"Movie not found!"}"#),
        };
    }
    Reply::html(404, "<html>not found</html>")
}
