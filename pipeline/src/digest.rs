//! Canonical encoding and sha256 digests.
//!
//! Keys and digests must not depend on map iteration order or whitespace, so every
//! JSON value that goes into a key is first rewritten with sorted object keys and no
//! insignificant whitespace (`serde_json::Value`'s default map is a `BTreeMap`, which
//! already sorts; this module makes that property explicit and tested).

use sha2::{Digest as _, Sha256};
use std::fmt;
use std::io::Read;
use std::path::Path;

/// A sha256 digest as 64 lowercase hex characters.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Digest(pub String);

impl Digest {
    /// sha256 of `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> Digest {
        Digest(hex::encode(Sha256::digest(bytes)))
    }

    /// Digest of a file's bytes, streamed.
    pub fn of_file(path: &Path) -> std::io::Result<Digest> {
        let mut f = std::fs::File::open(path)?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        Ok(Digest(hex::encode(h.finalize())))
    }

    /// Digest of a JSON value in canonical form.
    pub fn of_json(value: &serde_json::Value) -> Digest {
        Digest::of_bytes(canonical_json(value).as_bytes())
    }

    /// The first 12 hex characters, for display.
    pub fn short(&self) -> &str {
        &self.0[..self.0.len().min(12)]
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Canonical JSON: object keys sorted, no whitespace, serde_json's number formatting.
pub fn canonical_json(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                write_canonical(&map[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_form_ignores_key_order_and_whitespace() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"b": 1, "a": [1, {"y": 2, "x": 1}]}"#).unwrap();
        let b = json!({"a": [1, {"x": 1, "y": 2}], "b": 1});
        assert_eq!(canonical_json(&a), r#"{"a":[1,{"x":1,"y":2}],"b":1}"#);
        assert_eq!(Digest::of_json(&a), Digest::of_json(&b));
    }

    #[test]
    fn known_sha256() {
        // printf 'abc' | sha256sum
        assert_eq!(
            Digest::of_bytes(b"abc").0,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
