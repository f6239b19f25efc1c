//! BFCL-Opaque: the 150 executable function-calling instances with per-instance
//! anonymised tools (`../shared/spec/bfcl-opaque.md`).
//!
//! Module layers, lowest first (a module never uses one below it in this list):
//! [`python`] (the Python runtime) < [`data`] < [`opacify`] < [`rest`] (REST backends,
//! including `live`) < [`decoys`] < [`executor`] < [`grader`] < [`released`].

pub mod data;
pub mod decoys;
pub mod executor;
pub mod grader;
pub mod opacify;
pub mod python;
pub mod released;
pub mod released_checks;
pub mod rest;

// The runtime's modules at their former paths (`datasets::bfcl::pyvalue::PyValue`, ...).
pub use python::exec;
pub use python::json as pyjson;
pub use python::lambda;
/// The call-string and literal parser at its former path, with [`parse_call`]
/// (positional arguments bound to BFCL parameter names).
///
/// [`parse_call`]: python::exec::parse_call
pub mod pyparse {
    pub use super::python::exec::parse_call;
    pub use super::python::parse::*;
}
pub use python::pure;
pub use python::value as pyvalue;
pub use rest::live;

#[cfg(test)]
mod layers {
    //! The module graph is a DAG: every module uses only modules of a lower layer. This
    //! reads each source file's non-test code and checks its `super::X` /
    //! `crate::bfcl::X` paths against a fixed order.

    /// Identifiers following each occurrence of `prefix` in the code before the file's
    /// `#[cfg(test)]` module.
    fn refs(src: &str, prefix: &str) -> Vec<String> {
        let code: String = src
            .split("#[cfg(test)]")
            .next()
            .unwrap_or(src)
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut out = Vec::new();
        let mut rest = code.as_str();
        while let Some(i) = rest.find(prefix) {
            // a longer path that merely ends in `prefix` (`super::super::`) is not this one
            let before = &rest[..i];
            rest = &rest[i + prefix.len()..];
            if before.ends_with("::") || before.ends_with(|c: char| c.is_alphanumeric()) {
                continue;
            }
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            out.push(rest[..end].to_string());
        }
        out
    }

    /// Checks one group of sibling modules, lowest first: a module's `sibling_prefix`
    /// references must name a lower sibling, and its `crate::bfcl::X` references one of
    /// `outside` (what the whole group may use).
    fn check(group: &[(&str, &str)], sibling_prefix: &str, outside: &[&str]) {
        for (rank, (name, src)) in group.iter().enumerate() {
            for r in refs(src, sibling_prefix) {
                let dep = group.iter().position(|(n, _)| *n == r);
                let r = r.as_str();
                assert!(
                    dep.is_some_and(|d| d < rank) || outside.contains(&r),
                    "{name} uses {sibling_prefix}{r}, which is not below it"
                );
            }
            for r in refs(src, "crate::bfcl::") {
                let r = r.as_str();
                assert!(
                    outside.contains(&r) || group[..rank].iter().any(|(n, _)| *n == r),
                    "{name} uses crate::bfcl::{r}, which is not below it"
                );
            }
            assert!(
                refs(src, "super::super::").is_empty(),
                "{name} reaches two levels up outside its tests"
            );
        }
    }

    #[test]
    fn python_runtime_layers() {
        let group = [
            ("exception", include_str!("python/exception.rs")),
            ("value", include_str!("python/value.rs")),
            ("builtins", include_str!("python/builtins.rs")),
            ("json", include_str!("python/json.rs")),
            ("parse", include_str!("python/parse.rs")),
            ("bind", include_str!("python/bind.rs")),
            ("lambda", include_str!("python/lambda.rs")),
            ("pure", include_str!("python/pure.rs")),
            ("exec", include_str!("python/exec.rs")),
        ];
        // the runtime uses nothing of BFCL outside itself; of its parent module only the
        // depth limit
        check(&group, "super::", &["python", "MAX_DEPTH"]);
    }

    #[test]
    fn rest_layers() {
        let group = [
            ("backend", include_str!("rest/backend.rs")),
            ("calendar", include_str!("rest/calendar.rs")),
            ("world", include_str!("rest/world.rs")),
            ("recorded", include_str!("rest/recorded.rs")),
            ("simulated", include_str!("rest/simulated.rs")),
            ("live", include_str!("rest/live.rs")),
        ];
        check(&group, "super::", &["python"]);
    }

    #[test]
    fn bfcl_layers() {
        let group = [
            ("python", include_str!("python/mod.rs")),
            ("data", include_str!("data.rs")),
            ("opacify", include_str!("opacify.rs")),
            ("rest", include_str!("rest/mod.rs")),
            ("decoys", include_str!("decoys.rs")),
            ("executor", include_str!("executor.rs")),
            ("grader", include_str!("grader.rs")),
            ("released", include_str!("released.rs")),
        ];
        check(&group, "super::", &[]);
    }

    #[test]
    fn the_checker_sees_a_cycle() {
        let group = [("a", "use super::b::X;\n"), ("b", "fn f() {}\n")];
        let caught = std::panic::catch_unwind(|| check(&group, "super::", &[]));
        assert!(caught.is_err());
        let fine = [("b", "fn f() {}\n"), ("a", "use super::b::X;\n")];
        check(&fine, "super::", &[]);
    }
}
