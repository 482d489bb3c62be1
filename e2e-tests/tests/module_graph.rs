//! No crate of the workspace has an import circle: each crate's modules read
//! from its sources (`use` trees and inline `crate::`/`super::`/`self::`
//! paths, tests left out), every module one node, a module's own child one
//! too; then the same with every module folded into its top-level module.
//! (The controller's rooms have their own, stricter rules:
//! `controller/tests/rooms.rs`.)

use std::collections::{BTreeMap, BTreeSet};

use e2e_tests::workspace_root;

/// The workspace's crates, by folder.
const CRATES: [&str; 4] = ["api", "controller", "policy-wasm", "e2e-tests"];

/// Module (`a::b`, `""` for the crate root) of `krate` -> its source without
/// comments and tests. Binaries (`src/bin`) are crates of their own.
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
            let code: String = code
                .lines()
                .map(|l| l.split("//").next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            modules.insert(parts.join("::"), code);
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

/// Identifiers, `::`, braces, commas and semicolons of `code`.
fn tokens(code: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut ident = c.to_string();
            while let Some(&n) = chars.peek().filter(|n| n.is_alphanumeric() || **n == '_') {
                ident.push(n);
                chars.next();
            }
            tokens.push(ident);
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            tokens.push("::".into());
        } else if "{},;*".contains(c) {
            tokens.push(c.to_string());
        } else if c == '"' {
            // Skip string literals: their text is no path.
            while let Some(n) = chars.next() {
                if n == '\\' {
                    chars.next();
                } else if n == '"' {
                    break;
                }
            }
        }
    }
    tokens
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

fn edges(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let modules = sources(krate);
    let mut edges = BTreeMap::new();
    for (module, code) in &modules {
        let targets: BTreeSet<String> = paths(code)
            .iter()
            .filter_map(|p| resolve(p, module, &modules))
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
    assert!(edges("e2e-tests")["cluster::operator"].contains("cluster::checks"));
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
