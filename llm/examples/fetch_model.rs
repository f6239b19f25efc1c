//! Setup step: fetch (download, verify, assemble) an embedded model.
//!
//! `cargo run -p llm --example fetch_model -- [NAME] [DIR]`
//! (defaults: `smollm2-135m`, `llm::models::default_cache_dir()`).

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "smollm2-135m".into());
    let dir = args
        .next()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(llm::models::default_cache_dir);
    match llm::fetch_model(&name, &dir) {
        Ok(p) => println!("{}", p.display()),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
