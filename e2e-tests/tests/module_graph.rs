//! No crate of the workspace has an import circle in its sources (`src/`):
//! each crate's modules read from their code (`use` trees, inline
//! `crate::`/`super::`/`self::` paths, and plain paths into a child module;
//! unit tests left out), every module one node, a module's own child one
//! too; then the same with every module folded into its top-level module.
//! (The controller's rooms have their own, stricter rules:
//! `controller/tests/rooms.rs`. The test suites' modules share their
//! `main.rs`'s imports by design and are not read.)

use std::collections::{BTreeMap, BTreeSet};

use e2e_tests::workspace_root;

/// The workspace's crates, by folder.
const CRATES: [&str; 4] = ["api", "controller", "policy-wasm", "e2e-tests"];

/// Module (`a::b`, `""` for the library's root) of `krate` -> its source
/// without unit tests. Binaries (`src/main.rs`, `src/bin`) are crates of
/// their own.
fn sources(krate: &str) -> BTreeMap<String, String> {
    let mut modules = BTreeMap::new();
    let root = workspace_root().join(krate).join("src");
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path != root.join("bin") {
                    dirs.push(path);
                }
                continue;
            }
            if path == root.join("main.rs") {
                continue;
            }
            let relative = path.strip_prefix(&root).unwrap().with_extension("");
            let mut parts: Vec<String> = relative
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            modules.insert(parts.join("::"), code.to_string());
        }
    }
    modules
}

/// The paths `code` names: every `use` tree expanded, and inline paths that
/// start with `crate`, `super` or `self`.
fn paths(code: &str) -> Vec<Vec<String>> {
    let tokens = tokens(code);
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "use" {
            i = use_tree(&tokens, i + 1, &[], &mut found);
        } else if matches!(tokens[i].as_str(), "crate" | "super" | "self") {
            let mut path = vec![tokens[i].clone()];
            while tokens.get(i + 1).is_some_and(|t| t == "::")
                && tokens.get(i + 2).is_some_and(|t| is_ident(t))
            {
                path.push(tokens[i + 2].clone());
                i += 2;
            }
            // A bare keyword (`pub(super)`, `self.x`) names no module.
            if path.len() > 1 {
                found.push(path);
            }
        }
        i += 1;
    }
    found
}

/// Identifiers, `::`, braces, commas and semicolons of `code`; comments,
/// string and character literals skipped (their text is no path).
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or_default();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && at(i + 1) == '/') {
                i += 1;
            }
            i += 2;
        } else if is_ident_char(c) {
            let start = i;
            while i < chars.len() && is_ident_char(chars[i]) {
                i += 1;
            }
            let ident: String = chars[start..i].iter().collect();
            let hashes = chars[i..].iter().take_while(|c| **c == '#').count();
            if matches!(ident.as_str(), "r" | "br") && at(i + hashes) == '"' {
                // A raw string: r"...", r#"..."#.
                i += hashes + 1;
                while i < chars.len()
                    && !(chars[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#'))
                {
                    i += 1;
                }
                i += 1 + hashes;
            } else {
                tokens.push(ident);
            }
        } else if c == ':' && at(i + 1) == ':' {
            tokens.push("::".into());
            i += 2;
        } else if "{},;*".contains(c) {
            tokens.push(c.to_string());
            i += 1;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' && at(i + 1) == '\\' {
            // '\n', '\'', '\u{..}'.
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c == '\'' && at(i + 2) == '\'' {
            i += 3;
        } else {
            // A lifetime's quote, an operator, white space.
            i += 1;
        }
    }
    tokens
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn is_ident(token: &str) -> bool {
    token.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Expand the use tree at `i` under `prefix`; the index after it.
fn use_tree(
    tokens: &[String],
    mut i: usize,
    prefix: &[String],
    found: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                while tokens.get(i).is_some_and(|t| t != "}") {
                    i = use_tree(tokens, i, &path, found);
                    if tokens.get(i).is_some_and(|t| t == ",") {
                        i += 1;
                    }
                }
                return i + 1;
            }
            Some("as") => i += 2,
            Some("::") => i += 1,
            Some(t) if is_ident(t) || t == "*" => {
                if t != "self" && t != "*" {
                    path.push(t.to_string());
                }
                i += 1;
            }
            _ => {
                found.push(path);
                return i;
            }
        }
    }
}

/// The module `path`, named in `module`, refers to: the longest prefix that is one.
fn resolve(path: &[String], module: &str, modules: &BTreeMap<String, String>) -> Option<String> {
    let mut segments: Vec<String> = module
        .split("::")
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            segments.clear();
            rest = &rest[1..];
        }
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                segments.pop();
                rest = &rest[1..];
            }
        }
        Some("self") => rest = &rest[1..],
        // A relative path: a child module of this one, or an outside crate.
        Some(_) => {}
        None => return None,
    }
    segments.extend(rest.iter().cloned());
    (1..=segments.len())
        .rev()
        .map(|n| segments[..n].join("::"))
        .find(|m| modules.contains_key(m))
}

/// The child modules of `module` that `code` names by a plain path
/// (`node::start_registry(..)`).
fn child_paths(code: &str, module: &str, modules: &BTreeMap<String, String>) -> Vec<String> {
    let tokens = tokens(code);
    (0..tokens.len().saturating_sub(1))
        .filter(|&i| tokens[i + 1] == "::" && is_ident(&tokens[i]))
        .filter(|&i| i == 0 || tokens[i - 1] != "::")
        .map(|i| match module {
            "" => tokens[i].clone(),
            _ => format!("{module}::{}", tokens[i]),
        })
        .filter(|child| modules.contains_key(child))
        .collect()
}

fn edges(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let modules = sources(krate);
    let mut edges = BTreeMap::new();
    for (module, code) in &modules {
        let targets: BTreeSet<String> = paths(code)
            .iter()
            .filter_map(|p| resolve(p, module, &modules))
            .chain(child_paths(code, module, &modules))
            .filter(|m| m != module)
            .collect();
        edges.insert(module.clone(), targets);
    }
    edges
}

/// A circle of `edges`, if there is one.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            return Some(stack[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, stack, done) {
                return Some(found);
            }
        }
        stack.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

#[test]
fn the_reader_reads() {
    let api = edges("api");
    assert!(api["validation"].contains("defaults"));
    assert!(api["extra_args::memory_file"].contains("memcached_options"));
    let e2e = edges("e2e-tests");
    assert!(e2e["cluster::operator"].contains("cluster::checks"));
    assert!(e2e["cluster"].contains("cluster::node"), "a plain path");
    assert_eq!(
        tokens("r#\"a::b\"# 'x' '\\'' // c::d\n/* e::f */ g::h"),
        ["g", "::", "h"]
    );
}

#[test]
fn no_module_imports_one_that_imports_it() {
    for krate in CRATES {
        assert_eq!(circle(&edges(krate)), None, "{krate}");
    }
}

#[test]
fn no_top_level_module_imports_one_that_imports_it() {
    for krate in CRATES {
        assert_eq!(circle(&folded(krate)), None, "{krate}");
    }
}

/// The modules of `krate`, each folded into its top-level module.
fn folded(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let top = |m: &str| m.split("::").next().unwrap_or_default().to_string();
    let mut folded: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, targets) in edges(krate) {
        let from = top(&module);
        let to = targets
            .iter()
            .map(|t| top(t))
            .filter(|t| *t != from && !from.is_empty());
        let to: Vec<String> = to.collect();
        folded.entry(from).or_default().extend(to);
    }
    folded
}

#[test]
fn a_circle_is_found() {
    let edges = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    assert_eq!(circle(&edges).map(|c| c.len()), Some(3));
}
