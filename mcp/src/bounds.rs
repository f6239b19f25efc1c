//! Bounds on everything an upstream MCP server sends: how long it may take, how
//! large one message may be, how deep its JSON may nest, how many tools it may list
//! and how long a description may be. A server past one of them is one error line
//! that names it, never a hang or an unbounded allocation.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, ReadBuf};

/// The bounds one upstream connection is held to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// How long the `initialize` handshake may take.
    pub connect: Duration,
    /// How long one request (a tool call, a listing) may take.
    pub call: Duration,
    /// The largest message (one JSON-RPC line over stdio, one result over HTTP), in
    /// bytes.
    pub message_bytes: usize,
    /// The deepest nesting of a result's JSON (objects and arrays).
    pub depth: usize,
    /// The most tools one `tools/list` page may name.
    pub tools: usize,
    /// The longest tool description, in bytes.
    pub description_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connect: Duration::from_secs(20),
            call: Duration::from_secs(60),
            message_bytes: 8 << 20,
            depth: 64,
            tools: 1000,
            description_bytes: 16 << 10,
        }
    }
}

/// The longest timeout a user may set, in seconds (a day).
pub const MAX_TIMEOUT_S: f64 = 86_400.0;

/// A timeout a user wrote in seconds, if it is one: finite, above 0 and at most
/// [`MAX_TIMEOUT_S`]. Callers name the setting in their own error line.
pub fn timeout(seconds: f64) -> Option<Duration> {
    (seconds.is_finite() && seconds > 0.0 && seconds <= MAX_TIMEOUT_S)
        .then(|| Duration::from_secs_f64(seconds))
}

/// How deep `v` nests (a scalar is 0, `[]` and `{}` are 1), counting no further
/// than `stop` (so a hostile value costs no more than that).
pub fn depth(v: &serde_json::Value, stop: usize) -> usize {
    use serde_json::Value;
    // Iterative, so a deep value cannot overflow the stack.
    let mut deepest = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => Box::new(o.values()),
            _ => continue,
        };
        let d = d + 1;
        deepest = deepest.max(d);
        if deepest > stop {
            return deepest;
        }
        stack.extend(children.map(|c| (c, d)));
    }
    deepest
}

/// At most `n` bytes of `s` (cut at a character boundary), with `...` when cut; line
/// breaks shown as spaces, so an error line stays one line.
pub fn clip(s: &str, n: usize) -> String {
    let mut end = s.len().min(n);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out: String = s[..end]
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if end < s.len() {
        out.push_str("...");
    }
    out
}

/// The first thing that went wrong with an upstream's byte stream, shared between
/// the reader that saw it and the code that reports the failed request.
#[derive(Clone, Debug, Default)]
pub struct Fault(Arc<Mutex<Option<String>>>);

impl Fault {
    /// Record `why` unless something was recorded before.
    pub fn set(&self, why: String) {
        if let Ok(mut f) = self.0.lock() {
            f.get_or_insert(why);
        }
    }

    /// What was recorded, if anything.
    pub fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|f| f.clone())
    }
}

/// A stdio server's output as the MCP transport reads it, checked on the way: every
/// line must start like a JSON-RPC message (`{` or `[` after blanks) and be at most
/// `max` bytes. The first line that is not ends the stream with an I/O error (so
/// the transport closes and every waiting request fails at once) and is recorded in
/// the [`Fault`], which the error then names.
pub struct Guarded<R> {
    inner: R,
    max: usize,
    line: usize,
    started: bool,
    fault: Fault,
    failed: bool,
}

impl<R> Guarded<R> {
    /// `inner` held to lines of at most `max` bytes; faults go to `fault`.
    pub fn new(inner: R, max: usize, fault: Fault) -> Guarded<R> {
        Guarded {
            inner,
            max,
            line: 0,
            started: false,
            fault,
            failed: false,
        }
    }

    /// Check the bytes just read; the reason for refusing them, if any.
    fn check(&mut self, bytes: &[u8]) -> Option<String> {
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'\n' {
                self.line = 0;
                self.started = false;
                continue;
            }
            self.line += 1;
            if self.line > self.max {
                return Some(format!(
                    "sent a message of more than {} bytes (the limit)",
                    self.max
                ));
            }
            if !self.started && !b.is_ascii_whitespace() {
                if b != b'{' && b != b'[' {
                    let rest = &bytes[i..bytes.len().min(i + 80)];
                    let rest = rest.split(|c| *c == b'\n').next().unwrap_or(rest);
                    return Some(format!(
                        "printed something that is not an MCP message on stdout: `{}`",
                        clip(&String::from_utf8_lossy(rest), 60)
                    ));
                }
                self.started = true;
            }
        }
        None
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Guarded<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(Err(std::io::Error::other("the server broke the protocol")));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let why = this.check(&buf.filled()[before..]);
                match why {
                    Some(why) => {
                        this.failed = true;
                        this.fault.set(why.clone());
                        buf.set_filled(before);
                        Poll::Ready(Err(std::io::Error::other(why)))
                    }
                    None => Poll::Ready(Ok(())),
                }
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn read_all(input: &[u8], max: usize) -> (Result<Vec<u8>, String>, Option<String>) {
        let fault = Fault::default();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let mut g = Guarded::new(input, max, fault.clone());
        let mut out = Vec::new();
        let r = rt.block_on(g.read_to_end(&mut out));
        (r.map(|_| out).map_err(|e| e.to_string()), fault.get())
    }

    #[test]
    fn messages_pass_and_garbage_or_floods_stop_the_stream() {
        let ok = b"{\"jsonrpc\":\"2.0\"}\n  [1]\n\n";
        assert_eq!(read_all(ok, 100).0.as_deref(), Ok(&ok[..]));
        let (r, why) = read_all(b"{\"a\":1}\nHello, I am a server\n", 100);
        assert!(r.is_err());
        let why = why.expect("a fault");
        assert!(
            why.contains("not an MCP message") && why.contains("Hello, I am"),
            "{why}"
        );
        let (r, why) = read_all(&[b'{'; 500], 100);
        assert!(r.is_err());
        assert!(why.expect("a fault").contains("more than 100 bytes"));
        // The limit is per line.
        let lines = b"{\"a\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\n".repeat(50);
        assert!(read_all(&lines, 100).0.is_ok());
    }

    #[test]
    fn depth_counts_nesting_and_stops_early() {
        let v = serde_json::json!({"a": [1, {"b": []}], "c": 2});
        assert_eq!(depth(&v, 100), 4);
        assert_eq!(depth(&serde_json::json!(3), 100), 0);
        let mut deep = serde_json::json!(0);
        for _ in 0..10_000 {
            deep = serde_json::Value::Array(vec![deep]);
        }
        assert!(depth(&deep, 64) > 64);
        // serde_json's own recursion in drop is what the value costs; leak it
        // instead of dropping 10,000 levels on the test thread's stack.
        std::mem::forget(deep);
    }

    #[test]
    fn clip_cuts_at_a_character_and_keeps_one_line() {
        assert_eq!(clip("héllo\nworld", 3), "hé...");
        assert_eq!(clip("a\nb", 10), "a b");
    }
}
