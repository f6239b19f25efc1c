//! Records the Hugging Face `tokenizers` library's ids for the texts of
//! `tests/wordpiece_texts`, which `tests/embed_model.rs` holds `src/wordpiece.rs` to, and
//! compares the two here.
//!
//! `cargo run -p textsim --features tokenizers-reference --example wordpiece_reference
//! -- [OUT]` (OUT defaults to `textsim/tests/data/wordpiece_reference.txt`); the MiniLM
//! model is fetched as the embedder fetches it. One line per text, in order: its ids
//! spelled out for the fragments and long texts, a hash of them for the 3,000 mixes.

#[path = "../tests/wordpiece_texts/mod.rs"]
mod wordpiece_texts;

use std::io::Write;

use textsim::wordpiece::WordPiece;
use textsim::{model, Embedder, MAX_TOKENS};
use tokenizers::{Tokenizer, TruncationParams};

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "textsim/tests/data/wordpiece_reference.txt".to_string());
    let e = Embedder::load_default()?;
    let json = std::fs::read(e.dir().join(model::TOKENIZER.name))?;
    let mut theirs = Tokenizer::from_bytes(&json)?;
    theirs.with_truncation(Some(TruncationParams {
        max_length: MAX_TOKENS,
        ..TruncationParams::default()
    }))?;
    theirs.with_padding(None);
    let ours = WordPiece::from_json(&json)?;

    let texts = wordpiece_texts::texts();
    let mut file = std::io::BufWriter::new(std::fs::File::create(&out)?);
    writeln!(
        file,
        "# tokenizers 0.23.2 ids (truncated to {MAX_TOKENS}) of the {} texts of \
         textsim/tests/wordpiece_texts, one line each; written by \
         examples/wordpiece_reference.rs",
        texts.len()
    )?;
    let mut differ = 0;
    for (i, text) in texts.iter().enumerate() {
        let want = theirs.encode(text.as_str(), true)?.get_ids().to_vec();
        if ours.encode(text, MAX_TOKENS) != want {
            differ += 1;
            eprintln!("text {i} {text:?}: tokenizers {want:?}");
        }
        writeln!(file, "{}", wordpiece_texts::record(i, &want))?;
    }
    file.flush()?;
    eprintln!(
        "{} texts, {differ} tokenized differently here; wrote {out}",
        texts.len()
    );
    Ok(())
}
