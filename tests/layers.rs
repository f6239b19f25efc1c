//! The module graph of every crate of the workspace is layered: in every module folder
//! (a crate's `src/` and each directory module below it), no sibling module uses one
//! that, directly or not, uses it. Some folders also declare their order, lowest first
//! ([`DECLARED`]): there a module uses only modules listed before it.
//!
//! Read from the source tree, not the compiler: each file's code (comments, strings and
//! `#[cfg(test)]` items removed) is scanned for `crate::` / `super::` / `self::` paths
//! (`use` groups expanded), each path is made absolute and followed through the `use`
//! re-exports of the modules it passes (`pub use x::Y`, `use a as b`, globs), and a
//! path from module `a::b::c` to `a::d::e` is an edge `b -> d` of folder `a`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Folders with a declared order, lowest first: every module of the folder is listed
/// and uses only modules before it. Folders are named by their directory.
const DECLARED: &[(&str, &[&str])] = &[
    (
        "datasets/src/bfcl",
        &[
            "python",
            "data",
            "opacify",
            "rest",
            "decoys",
            "executor",
            "grader",
            "released",
            "released_checks",
            // the inline `pub mod pyparse { .. }` of bfcl/mod.rs (re-exports)
            "pyparse",
        ],
    ),
    (
        "datasets/src/bfcl/python",
        &[
            "exception",
            "value",
            "builtins",
            "json",
            "parse",
            "bind",
            "lambda",
            "pure",
            "exec",
        ],
    ),
    (
        "datasets/src/bfcl/rest",
        &[
            "backend",
            "calendar",
            "world",
            "recorded",
            "simulated",
            "live",
        ],
    ),
    (
        "datasets/src/chess",
        &[
            "rules",
            "engine",
            "strength",
            "tools",
            "game",
            "matches",
            "positions",
            "metrics",
        ],
    ),
];

// ---------------------------------------------------------------------------------
// Reading code

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `text` with comments and the contents of string and char literals blanked (newlines
/// kept, so offsets keep their line), so that paths and brackets are read from code only.
fn code_only(text: &str) -> String {
    let s: Vec<char> = text.chars().collect();
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        let prev_ident = i > 0 && is_ident(s[i - 1]);
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(s[i]));
                    i += 1;
                }
            }
        } else if !prev_ident && (c == 'r' || (c == 'b' && next == Some('r'))) && {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            while s.get(j) == Some(&'#') {
                j += 1;
            }
            s.get(j) == Some(&'"') && (j > i + 1 || c == 'r')
        } {
            // raw string: r"..", r#".."#, br".."
            let mut j = i + if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while s[j] == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            while j < s.len() {
                if s[j] == '"' && (1..=hashes).all(|h| s.get(j + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push('"');
            out.extend(s[i + 1..j - 1].iter().map(|&c| blank(c)));
            out.push('"');
            i = j;
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < s.len() && s[i] != '"' {
                if s[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < s.len() {
                    out.push(blank(s[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || s.get(i + 2) == Some(&'\'')) {
            // a char literal ('x', '\n', '\u{..}'); otherwise a lifetime
            let mut j = i + 2;
            while j < s.len() && s[j] != '\'' {
                j += 1;
            }
            out.push_str("' '");
            out.extend(std::iter::repeat_n(' ', j.saturating_sub(i + 2)));
            i = j + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `code` (from [`code_only`]) with every item, field or statement under
/// `#[cfg(test)]` blanked (so a test-only `mod x;` is not read either).
fn without_tests(code: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let mut s: Vec<char> = code.chars().collect();
    let attr: Vec<char> = ATTR.chars().collect();
    let mut i = 0;
    while i + attr.len() <= s.len() {
        if s[i..i + attr.len()] != attr[..] {
            i += 1;
            continue;
        }
        // The item ends at a `;` or `,` outside brackets, after its `{ .. }` body, or
        // before the bracket that closes what holds it.
        let mut depth = 0usize;
        let mut end = i + attr.len();
        while end < s.len() {
            match s[end] {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth == 0 => break,
                ')' | ']' => depth -= 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end += 1;
                        break;
                    }
                }
                ';' | ',' if depth == 0 => {
                    end += 1;
                    break;
                }
                _ => {}
            }
            end += 1;
        }
        for c in &mut s[i..end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = end;
    }
    s.into_iter().collect()
}

/// One path of a use tree or an expression, and the name it binds in a `use`.
#[derive(Debug, Clone, PartialEq)]
struct Written {
    segs: Vec<String>,
    /// The alias or last segment; `*` for a glob.
    name: String,
}

fn skip_ws(s: &[char], i: &mut usize) {
    while *i < s.len() && s[*i].is_whitespace() {
        *i += 1;
    }
}

fn ident(s: &[char], i: &mut usize) -> String {
    let start = *i;
    while *i < s.len() && is_ident(s[*i]) {
        *i += 1;
    }
    s[start..*i].iter().collect()
}

/// Reads a path at `i` (`a::b::{c, d::e as f, self}`), every leaf of its tree with
/// `prefix` in front, into `out`.
fn tree(s: &[char], i: &mut usize, prefix: &[String], out: &mut Vec<Written>) {
    let mut segs = prefix.to_vec();
    loop {
        skip_ws(s, i);
        if s.get(*i) == Some(&'{') {
            *i += 1;
            loop {
                skip_ws(s, i);
                match s.get(*i) {
                    Some('}') => {
                        *i += 1;
                        break;
                    }
                    Some(',') => *i += 1,
                    None => return,
                    _ => {
                        let before = *i;
                        tree(s, i, &segs, out);
                        if *i == before {
                            *i += 1;
                        }
                    }
                }
            }
            return;
        }
        if s.get(*i) == Some(&'*') {
            *i += 1;
            out.push(Written {
                segs,
                name: "*".into(),
            });
            return;
        }
        let seg = ident(s, i);
        if seg.is_empty() {
            return;
        }
        segs.push(seg);
        let mut j = *i;
        skip_ws(s, &mut j);
        if s.get(j) == Some(&':') && s.get(j + 1) == Some(&':') {
            *i = j + 2;
            continue;
        }
        let mut name = segs.last().cloned().unwrap_or_default();
        if segs.len() > 1 && name == "self" {
            segs.pop();
            name = segs.last().cloned().unwrap_or_default();
        }
        let mut k = j;
        if ident(s, &mut k) == "as" {
            skip_ws(s, &mut k);
            let alias = ident(s, &mut k);
            if !alias.is_empty() {
                name = alias;
                *i = k;
            }
        }
        out.push(Written { segs, name });
        return;
    }
}

/// Every path that starts with `crate::`, `super::` or `self::`, with the offset (in
/// chars) of its start, for the line number.
fn rooted_paths(code: &str) -> Vec<(usize, Written)> {
    let s: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if is_ident(s[i]) && (i == 0 || !(is_ident(s[i - 1]) || s[i - 1] == ':')) {
            let start = i;
            let mut j = i;
            let w = ident(&s, &mut j);
            if matches!(w.as_str(), "crate" | "super" | "self")
                && s.get(j) == Some(&':')
                && s.get(j + 1) == Some(&':')
            {
                let mut found = Vec::new();
                tree(&s, &mut i, &[], &mut found);
                out.extend(found.into_iter().map(|w| (start, w)));
                i = i.max(j);
                continue;
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// Every `use` declaration's leaves.
fn uses(code: &str) -> Vec<Written> {
    let s: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 < s.len() {
        let kw = s[i..i + 3] == ['u', 's', 'e'];
        if kw
            && (i == 0 || !is_ident(s[i - 1]))
            && s[i + 3].is_whitespace()
            && (i < 2 || s[i - 1] != ':')
        {
            let mut j = i + 3;
            skip_ws(&s, &mut j);
            if s.get(j) == Some(&':') {
                i = j; // `use ::extern_crate`
                continue;
            }
            tree(&s, &mut j, &[], &mut out);
            i = j.max(i + 3);
            continue;
        }
        i += 1;
    }
    out
}

/// The names of items `code` defines itself (`fn x`, `struct X`, ...).
fn defined(code: &str) -> BTreeSet<String> {
    const KINDS: &[&str] = &[
        "fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod",
    ];
    let words: Vec<&str> = code
        .split(|c: char| !(is_ident(c) || c == '!'))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|w| KINDS.contains(&w[0]) || w[0] == "macro_rules!")
        .map(|w| w[1].trim_end_matches('!').to_string())
        .collect()
}

// ---------------------------------------------------------------------------------
// A crate's modules

/// A module's own code: a file, or an inline `mod x { .. }` block of one.
#[derive(Debug)]
struct Unit {
    file: PathBuf,
    /// Line of the file where `code` starts (0-based).
    line0: usize,
    code: String,
    /// The items it defines.
    defs: BTreeSet<String>,
    /// Its `use` bindings: name (`*` for a glob) -> absolute path.
    binds: Vec<(String, Vec<String>)>,
}

#[derive(Debug, Default)]
struct Crate {
    /// Module path (from the crate root) -> its code. The root is `[]`.
    modules: BTreeMap<Vec<String>, Unit>,
}

fn split_inline(code: &str) -> (String, Vec<(String, usize, String)>) {
    // `mod name {` blocks (non-test ones: the test ones are already blanked)
    let s: Vec<char> = code.chars().collect();
    let mut outer = s.clone();
    let mut inner = Vec::new();
    let mut i = 0;
    while i + 3 < s.len() {
        if s[i..i + 3] == ['m', 'o', 'd']
            && (i == 0 || !is_ident(s[i - 1]))
            && s[i + 3].is_whitespace()
        {
            let mut j = i + 3;
            skip_ws(&s, &mut j);
            let name = ident(&s, &mut j);
            skip_ws(&s, &mut j);
            if !name.is_empty() && s.get(j) == Some(&'{') {
                let open = j;
                let mut depth = 0;
                while j < s.len() {
                    match s[j] {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                let body: String = s[open + 1..j.min(s.len())].iter().collect();
                let line = s[..open].iter().filter(|c| **c == '\n').count();
                inner.push((name, line, body));
                for c in &mut outer[open + 1..j.min(s.len())] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                i = j;
                continue;
            }
        }
        i += 1;
    }
    (outer.into_iter().collect(), inner)
}

/// `mod x;` declarations.
fn file_mods(code: &str) -> Vec<String> {
    let words: Vec<&str> = code
        .split(|c: char| !(is_ident(c) || c == ';' || c == '{'))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|w| w[0] == "mod" && w[1].ends_with(';'))
        .map(|w| w[1].trim_end_matches(';').to_string())
        .collect()
}

impl Crate {
    /// Reads the crate whose root file is `root` (`src/lib.rs` or `src/main.rs`).
    fn read(root: &Path) -> Crate {
        let mut c = Crate::default();
        c.add_file(Vec::new(), root, true);
        // `use` paths are made absolute once every module is known
        let binds: Vec<_> = c
            .modules
            .iter()
            .map(|(m, u)| {
                let b: Vec<_> = uses(&u.code)
                    .into_iter()
                    .filter_map(|w| Some((w.name.clone(), c.absolute(m, &w.segs)?)))
                    .collect();
                (m.clone(), b)
            })
            .collect();
        for (m, b) in binds {
            if let Some(u) = c.modules.get_mut(&m) {
                u.binds = b;
            }
        }
        c
    }

    fn add_file(&mut self, path: Vec<String>, file: &Path, owns_dir: bool) {
        let text =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            !text.contains("#[path"),
            "{}: `#[path]` modules are not read by this test",
            file.display()
        );
        let code = without_tests(&code_only(&text));
        // children of `x.rs` live in `x/`, of `mod.rs` / `lib.rs` in its own directory
        let dir = if owns_dir {
            file.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            file.with_extension("")
        };
        self.add_code(path, file, 0, code, &dir);
    }

    fn add_code(&mut self, path: Vec<String>, file: &Path, line0: usize, code: String, dir: &Path) {
        let (outer, inline) = split_inline(&code);
        for m in file_mods(&outer) {
            let mut child = path.clone();
            child.push(m.clone());
            let flat = dir.join(format!("{m}.rs"));
            let nested = dir.join(&m).join("mod.rs");
            if flat.is_file() {
                self.add_file(child, &flat, false);
            } else if nested.is_file() {
                self.add_file(child, &nested, true);
            } else {
                panic!("{}: no file for `mod {m};`", file.display());
            }
        }
        for (name, line, body) in inline {
            let mut child = path.clone();
            child.push(name.clone());
            self.add_code(child, file, line0 + line, body, &dir.join(&name));
        }
        self.modules.insert(
            path,
            Unit {
                file: file.to_path_buf(),
                line0,
                defs: defined(&outer),
                code: outer,
                binds: Vec::new(),
            },
        );
    }

    /// `w` written in module `m` as an absolute path, when it names this crate.
    fn absolute(&self, m: &[String], w: &[String]) -> Option<Vec<String>> {
        let (mut base, mut rest) = match w.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &w[1..]),
            Some("self") => (m.to_vec(), &w[1..]),
            Some("super") => (m.to_vec(), w),
            Some(first) => {
                // a relative `use` path: a child module of `m`, or another crate
                let mut child = m.to_vec();
                child.push(first.to_string());
                if !self.modules.contains_key(&child) {
                    return None;
                }
                (m.to_vec(), w)
            }
            None => return None,
        };
        while rest.first().map(String::as_str) == Some("super") {
            base.pop()?;
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// `t` with every segment that a module re-exports replaced by what it names, so
    /// that its longest module prefix is the module that defines the item.
    fn resolve(&self, t: &[String]) -> Vec<String> {
        let mut t = t.to_vec();
        'again: for _ in 0..32 {
            for i in 0..t.len() {
                if self.modules.contains_key(&t[..=i]) {
                    continue;
                }
                let here = &t[..i];
                let name = &t[i];
                let Some(unit) = self.modules.get(here) else {
                    break;
                };
                if unit.defs.contains(name) {
                    break;
                }
                let binds = &unit.binds;
                let mut target = binds
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, p)| p.clone());
                if target.is_none() {
                    // a glob import that brings the name
                    target = binds
                        .iter()
                        .filter(|(n, _)| n == "*")
                        .map(|(_, g)| {
                            let mut p = g.clone();
                            p.push(name.clone());
                            p
                        })
                        .find(|p| {
                            let r = self.resolve_shallow(p);
                            r.as_deref().is_some_and(|r| r != p.as_slice())
                                || self
                                    .modules
                                    .get(&p[..p.len() - 1])
                                    .is_some_and(|u| u.defs.contains(name))
                        });
                }
                match target {
                    Some(p) if p != t[..=i] => {
                        let mut next = p;
                        next.extend(t[i + 1..].iter().cloned());
                        t = next;
                        continue 'again;
                    }
                    _ => break,
                }
            }
            return t;
        }
        t
    }

    /// Whether the last segment of `p` is bound by a `use` of its module.
    fn resolve_shallow(&self, p: &[String]) -> Option<Vec<String>> {
        let (name, here) = p.split_last()?;
        self.modules
            .get(here)?
            .binds
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    }

    /// For every module folder (a module path), its children and their edges, each
    /// with the first place that makes it (file:line and the path as written).
    fn graph(&self) -> BTreeMap<Vec<String>, Folder> {
        let mut out: BTreeMap<Vec<String>, Folder> = BTreeMap::new();
        out.insert(Vec::new(), Folder::new()); // a crate's `src/`, even with one file
        for m in self.modules.keys() {
            if let Some((name, parent)) = m.split_last() {
                out.entry(parent.to_vec())
                    .or_default()
                    .entry(name.clone())
                    .or_default();
            }
        }
        for (m, unit) in &self.modules {
            for (at, w) in rooted_paths(&unit.code) {
                let Some(abs) = self.absolute(m, &w.segs) else {
                    continue;
                };
                let t = self.resolve(&abs);
                let k = m.iter().zip(&t).take_while(|(a, b)| a == b).count();
                if k >= m.len() || k >= t.len() || !self.modules.contains_key(&t[..=k]) {
                    continue; // inside itself, an ancestor, or an item of the folder's module
                }
                let line =
                    unit.line0 + unit.code.chars().take(at).filter(|c| *c == '\n').count() + 1;
                let file = unit.file.strip_prefix(workspace()).unwrap_or(&unit.file);
                out.entry(m[..k].to_vec())
                    .or_default()
                    .entry(m[k].clone())
                    .or_default()
                    .entry(t[k].clone())
                    .or_insert_with(|| format!("{}:{line}: {}", file.display(), w.segs.join("::")));
            }
        }
        out
    }
}

/// A folder's modules: module -> (module it uses -> where).
type Folder = BTreeMap<String, BTreeMap<String, String>>;

/// A cycle of `g`, as the modules along it (the first repeated at the end).
fn cycle(g: &Folder) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &Folder,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in g.get(n).into_iter().flat_map(|e| e.keys()) {
            if let Some(c) = visit(m, g, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(n, g, &mut Vec::new(), &mut done))
}

/// The cycle as text: `a -> b -> a`, each step with the line that makes it.
fn show(c: &[String], g: &Folder) -> String {
    let mut s = c.join(" -> ");
    for w in c.windows(2) {
        let at = g.get(&w[0]).and_then(|e| e.get(&w[1]));
        s.push_str(&format!(
            "\n    {} -> {}: {}",
            w[0],
            w[1],
            at.map_or("?", String::as_str)
        ));
    }
    s
}

/// Problems of a folder with a declared order `order` (lowest first).
fn check_order(name: &str, g: &Folder, order: &[&str]) -> Vec<String> {
    let mut bad = Vec::new();
    for m in g.keys() {
        if !order.contains(&m.as_str()) {
            bad.push(format!("{name}: module `{m}` is not in its declared order"));
        }
    }
    for m in order {
        if !g.contains_key(*m) {
            bad.push(format!("{name}: declared module `{m}` does not exist"));
        }
    }
    for (from, deps) in g {
        let rank = order.iter().position(|m| m == from);
        for (to, at) in deps {
            let dep = order.iter().position(|m| m == to);
            if let (Some(r), Some(d)) = (rank, dep) {
                if d >= r {
                    bad.push(format!(
                        "{name}: {from} uses {to}, which is not below it ({at})"
                    ));
                }
            }
        }
    }
    bad
}

// ---------------------------------------------------------------------------------
// The workspace

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every crate of the workspace: (directory relative to the workspace, root file).
fn crates() -> Vec<(String, PathBuf)> {
    let root = workspace();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let start = manifest
        .find("members")
        .expect("a [workspace] members list");
    let list = &manifest[start..];
    let list = &list[list.find('[').expect("members = [")..list.find(']').expect("]")];
    let mut dirs: Vec<String> = list
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    dirs.push(String::new()); // the root package (the `otb` binary)
    let mut out = Vec::new();
    for d in dirs {
        let src = root.join(&d).join("src");
        let mut found = false;
        for f in ["lib.rs", "main.rs"] {
            if src.join(f).is_file() {
                out.push((d.clone(), src.join(f)));
                found = true;
            }
        }
        assert!(found, "crate `{d}` has neither src/lib.rs nor src/main.rs");
    }
    out
}

/// Folder name (its directory) -> its graph, for every module folder of every crate.
fn all_folders() -> BTreeMap<String, Folder> {
    let mut out = BTreeMap::new();
    for (dir, root) in crates() {
        let krate = Crate::read(&root);
        for (m, g) in krate.graph() {
            let mut name = PathBuf::from(&dir).join("src");
            for seg in &m {
                name.push(seg);
            }
            let name = name.to_string_lossy().into_owned();
            let key = if m.is_empty() && root.ends_with("main.rs") {
                format!("{name} (bin)")
            } else {
                name
            };
            out.insert(key, g);
        }
    }
    out
}

#[test]
fn every_module_folder_of_every_crate_is_a_dag() {
    let folders = all_folders();
    // the walk reaches every crate and the nested folders
    for f in [
        "pipeline/src",
        "datasets/src",
        "datasets/src/chess",
        "datasets/src/search",
        "datasets/src/bfcl/python",
        "stages/src",
        "stages/src/offline",
        "llm/src",
        "textsim/src",
        "wheels/src",
        "src (bin)",
    ] {
        assert!(
            folders.contains_key(f),
            "{f} not walked: {:?}",
            folders.keys()
        );
    }
    // and reads the edges: plain `crate::` paths, `super::` in `use` groups, re-exports
    for (f, from, to) in [
        ("stages/src", "env", "models"),
        ("datasets/src/bfcl/rest", "simulated", "calendar"),
        ("datasets/src/bfcl", "rest", "python"),
        ("datasets/src/search", "questions", "corpus"),
        ("textsim/src", "cache", "embed"),
        ("llm/src", "embedded", "grammar"),
        ("pipeline/src", "engine", "store"),
    ] {
        assert!(
            folders[f].get(from).is_some_and(|e| e.contains_key(to)),
            "{f}: {from} -> {to} not seen: {:?}",
            folders[f]
        );
    }
    let cycles: Vec<String> = folders
        .iter()
        .filter_map(|(name, g)| Some(format!("{name}: {}", show(&cycle(g)?, g))))
        .collect();
    assert!(
        cycles.is_empty(),
        "import cycles among sibling modules:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn declared_orders_hold() {
    let folders = all_folders();
    let mut bad = Vec::new();
    for (name, order) in DECLARED {
        match folders.get(*name) {
            Some(g) => bad.extend(check_order(name, g, order)),
            None => bad.push(format!("{name}: no such module folder")),
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

// ---------------------------------------------------------------------------------
// The checker's own tests: it reads what it must and finds what it must.

/// A crate from `(file, text)` pairs written into a temporary directory.
fn synthetic(files: &[(&str, &str)]) -> (tempfile::TempDir, BTreeMap<Vec<String>, Folder>) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (f, text) in files {
        let p = dir.path().join(f);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
    }
    let g = Crate::read(&dir.path().join("lib.rs")).graph();
    (dir, g)
}

fn edges(g: &Folder) -> Vec<String> {
    g.iter()
        .flat_map(|(a, e)| e.keys().map(move |b| format!("{a}->{b}")))
        .collect()
}

#[test]
fn a_planted_cycle_is_found_and_shown() {
    let (_d, g) = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
        ("a.rs", "use crate::b::X;\n"),
        ("b.rs", "pub struct X;\nfn f() { super::c::g() }\n"),
        ("c.rs", "pub fn g() {}\nuse super::a;\n"),
    ]);
    let root = &g[&Vec::new()];
    let c = cycle(root).expect("a -> b -> c -> a");
    assert_eq!(c, ["a", "b", "c", "a"]);
    let text = show(&c, root);
    assert!(
        text.contains("b -> c: ") && text.contains("b.rs:2: super::c::g"),
        "{text}"
    );
}

#[test]
fn a_cycle_in_a_nested_folder_through_a_re_export_is_found() {
    let (_d, g) = synthetic(&[
        ("lib.rs", "pub mod env;\n"),
        (
            "env/mod.rs",
            "mod x;\nmod y;\npub use x::Thing;\npub use self::y as why;\n",
        ),
        ("env/x.rs", "use super::why::f;\npub struct Thing;\n"),
        ("env/y.rs", "use super::{Thing as T, x};\npub fn f() {}\n"),
    ]);
    let env = &g[&vec!["env".to_string()]];
    assert_eq!(edges(env), ["x->y", "y->x"]);
    assert!(cycle(env).is_some());
}

#[test]
fn tests_comments_and_strings_make_no_edges() {
    let (_d, g) = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\n#[cfg(test)]\nmod t;\n"),
        // `t.rs` is test-only: not read (it does not even exist)
        (
            "a.rs",
            "/// [`crate::b`]\n// crate::b\n/* crate::b */\nfn f() -> &'static str { \"crate::b::x\" }\n\
             const C: char = '{';\nstruct S {\n    #[cfg(test)]\n    x: crate::b::X,\n    y: u8,\n}\n\
             #[cfg(test)]\nmod tests {\n    use crate::b::X;\n}\npub fn g() {}\n",
        ),
        ("b.rs", "pub struct X;\nfn h() { crate::a::g() }\n"),
    ]);
    let root = &g[&Vec::new()];
    assert_eq!(edges(root), ["b->a"]);
    assert_eq!(cycle(root), None);
}

#[test]
fn items_of_the_folder_module_and_glob_imports() {
    let (_d, g) = synthetic(&[
        (
            "lib.rs",
            "pub mod a;\npub mod b;\npub mod c;\npub struct Error;\npub use c::*;\n",
        ),
        ("a.rs", "use crate::Error;\nuse super::Cee;\n"),
        ("b.rs", "use super::Error;\nuse crate::a;\n"),
        ("c.rs", "pub struct Cee;\n"),
    ]);
    // `Error` is the crate root's own item: no edge; `Cee` comes through the glob
    assert_eq!(edges(&g[&Vec::new()]), ["a->c", "b->a"]);
}

#[test]
fn a_declared_order_is_checked() {
    let (_d, g) = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use crate::b;\n"),
        ("b.rs", "\n"),
    ]);
    let root = &g[&Vec::new()];
    assert!(check_order("x", root, &["b", "a"]).is_empty());
    let bad = check_order("x", root, &["a", "b"]);
    assert!(
        bad[0].contains("a uses b, which is not below it"),
        "{bad:?}"
    );
    assert_eq!(check_order("x", root, &["a"]).len(), 1);
}
