//! `otb serve --model scripted:echo` under load: many concurrent streaming clients
//! (`stream: true`, each on its own kept-alive connection, one request after another)
//! for a while. Every request is answered (200, the echo as server-sent events ending
//! in `[DONE]`), every client is served while the load lasts (none waits out the
//! others), and the server's memory is flat. The suite runs 200 clients for 5 s;
//! `scripts/bench-serve.sh` runs the same for 60 s (`OTB_SERVE_LOAD_S`,
//! `OTB_SERVE_CLIENTS`) and prints the figures (requests, errors, latency
//! percentiles, the server's RSS at the start, middle and end).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// `otb serve` on a free port of 127.0.0.1, killed when dropped.
struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `otb serve --model scripted:echo` with its store in `store`; returns
    /// once it says where it serves.
    fn start(store: &std::path::Path) -> Server {
        let mut child = common::otb()
            .arg("--store")
            .arg(store)
            .args(["serve", "--model", "scripted:echo", "--addr", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start otb serve");
        let mut line = String::new();
        let stderr = child.stderr.take().expect("piped stderr");
        BufReader::new(stderr)
            .read_line(&mut line)
            .expect("read serve's line");
        // `otb: serving echo (scripted:echo) at http://ADDR/v1/chat/completions`
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|s| s.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Server { child, addr }
    }

    /// The server's resident set (KiB), from `/proc` (Linux); 0 elsewhere.
    fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0)
    }
}

/// What one client saw.
#[derive(Default)]
struct Seen {
    /// Each answered request's latency (request written to `[DONE]` read).
    latencies: Vec<Duration>,
    /// Replies that arrived before the load's end.
    in_time: usize,
    /// What went wrong, one line per failed request.
    errors: Vec<String>,
}

/// One streamed request on `conn`, its answer checked; whether the connection may
/// be used again (the server did not say `Connection: close`).
fn ask(conn: &mut BufReader<TcpStream>, client: usize, n: usize) -> Result<bool, String> {
    let body = format!(
        r#"{{"model":"echo","messages":[{{"role":"user","content":"client {client} request {n}"}}],"stream":true,"stream_options":{{"include_usage":true}}}}"#
    );
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: otb\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let w = conn.get_mut();
    w.write_all(head.as_bytes())
        .and_then(|()| w.write_all(body.as_bytes()))
        .map_err(|e| format!("write: {e}"))?;
    let mut status = String::new();
    conn.read_line(&mut status)
        .map_err(|e| format!("status line: {e}"))?;
    let mut len = None;
    let mut events = false;
    let mut close = false;
    loop {
        let mut line = String::new();
        if conn
            .read_line(&mut line)
            .map_err(|e| format!("head: {e}"))?
            == 0
        {
            return Err("connection closed in the head".into());
        }
        let l = line.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.strip_prefix("content-length:") {
            len = v.trim().parse::<usize>().ok();
        }
        events |= l == "content-type: text/event-stream";
        close |= l == "connection: close";
    }
    let len = len.ok_or_else(|| format!("no content-length ({})", status.trim()))?;
    let mut text = vec![0u8; len];
    conn.read_exact(&mut text)
        .map_err(|e| format!("body: {e}"))?;
    let text = String::from_utf8_lossy(&text);
    if !status.starts_with("HTTP/1.1 200") || !events {
        return Err(format!("{}: {text}", status.trim()));
    }
    let echo = format!(r#""content":"echo: client {client} request {n}""#);
    if !text.contains(&echo) || !text.ends_with("data: [DONE]\n\n") {
        return Err(format!("unexpected events: {text}"));
    }
    Ok(!close)
}

/// A client: a kept-alive connection (a new one when the server closes it or a
/// request fails), requests one after another until `until`.
fn client(addr: &str, id: usize, until: Instant) -> Seen {
    let mut seen = Seen::default();
    let mut conn: Option<BufReader<TcpStream>> = None;
    let mut n = 0;
    while Instant::now() < until {
        n += 1;
        let start = Instant::now();
        let c = match conn.take() {
            Some(c) => c,
            None => match TcpStream::connect(addr) {
                Ok(s) => BufReader::new(s),
                Err(e) => {
                    seen.errors.push(format!("connect: {e}"));
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            },
        };
        let mut c = c;
        match ask(&mut c, id, n) {
            Ok(keep) => {
                seen.latencies.push(start.elapsed());
                seen.in_time += usize::from(Instant::now() <= until);
                if keep {
                    conn = Some(c);
                }
            }
            Err(e) => seen.errors.push(e),
        }
    }
    seen
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `q` quantile (0..=1) of sorted `xs`, in milliseconds.
fn quantile_ms(xs: &[Duration], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let i = ((xs.len() as f64 - 1.0) * q).round() as usize;
    xs[i.min(xs.len() - 1)].as_secs_f64() * 1000.0
}

#[test]
fn serve_answers_many_streaming_clients_without_error_in_flat_memory() {
    let clients = env_or("OTB_SERVE_CLIENTS", 200) as usize;
    let secs = env_or("OTB_SERVE_LOAD_S", 5);
    let d = tempfile::tempdir().unwrap();
    let server = Server::start(&d.path().join("store"));
    // One request first: the server is up and has answered once.
    let mut first = BufReader::new(TcpStream::connect(&server.addr).unwrap());
    ask(&mut first, 0, 0).unwrap();
    drop(first);
    let rss_start = server.rss_kib();

    let begin = Instant::now();
    let until = begin + Duration::from_secs(secs);
    let threads: Vec<_> = (1..=clients)
        .map(|id| {
            let addr = server.addr.clone();
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || client(&addr, id, until))
                .unwrap()
        })
        .collect();
    // The server's memory while the load lasts: sampled every 100 ms.
    let mut samples = Vec::new();
    while Instant::now() < until {
        samples.push((begin.elapsed(), server.rss_kib()));
        std::thread::sleep(Duration::from_millis(100));
    }
    let seen: Vec<Seen> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let rss_end = server.rss_kib();
    let wall = begin.elapsed();

    let mut lat: Vec<Duration> = seen.iter().flat_map(|s| s.latencies.clone()).collect();
    lat.sort();
    let errors: Vec<&String> = seen.iter().flat_map(|s| &s.errors).collect();
    let starved = seen.iter().filter(|s| s.in_time == 0).count();
    let half = Duration::from_secs(secs) / 2;
    let rss_mid = samples
        .iter()
        .find(|(t, _)| *t >= half)
        .map_or(rss_end, |(_, r)| *r);
    let peak = samples
        .iter()
        .map(|(_, r)| *r)
        .max()
        .unwrap_or(0)
        .max(rss_end);
    let mib = |k: u64| k as f64 / 1024.0;
    println!(
        "serve load: {clients} streaming clients (kept-alive connections) for {secs} s: {} requests answered ({:.0}/s), {} errors, {starved} clients served no reply in time; latency p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms; server RSS start {:.1} MiB, middle {:.1} MiB, end {:.1} MiB, peak {:.1} MiB",
        lat.len(),
        lat.len() as f64 / wall.as_secs_f64(),
        errors.len(),
        quantile_ms(&lat, 0.5),
        quantile_ms(&lat, 0.9),
        quantile_ms(&lat, 0.99),
        quantile_ms(&lat, 1.0),
        mib(rss_start),
        mib(rss_mid),
        mib(rss_end),
        mib(peak),
    );
    assert!(
        errors.is_empty(),
        "{} errors, e.g. {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    assert!(lat.len() >= clients, "every client answered at least once");
    assert_eq!(
        starved, 0,
        "clients that got no reply while the load lasted"
    );
    // Flat: what the second half of the load added is small (no growth per request;
    // the connections' buffers are there by the middle).
    if rss_mid > 0 {
        assert!(
            rss_end <= rss_mid + rss_mid / 4 + 8 * 1024,
            "memory grew from {rss_mid} KiB to {rss_end} KiB"
        );
    }
}
