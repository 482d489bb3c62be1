//! The workspace's architecture, read from its sources:
//!
//! * no crate (`api`, `controller`, `policy-wasm`, `e2e-tests`, `test-support`) has an import
//!   circle in its `src/`, between modules (a module and its own child count apart) or between
//!   top-level modules;
//! * the controller's rooms (`controller/src/<room>/`, see its `lib.rs`) each use only the rooms
//!   their `mod.rs` names on its `//! May use:` line.
//!
//! A module's imports are read from its code: its `use` trees, its inline `crate::`, `super::` and
//! `self::` paths and the plain paths into its own child modules (`node::start(..)`); doc links
//! are comments and do not count. Unit tests (a file's `#[cfg(test)] mod tests`) are left out of
//! the circles (a test of a part may go through the whole), not out of the rooms' rules.
//! Binaries (`src/main.rs`, `src/bin/`) are crates of their own. The test suites' modules share their `main.rs`'s imports by design and are
//! not read.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

use e2e_tests::workspace_root;

/// The workspace's crates, by folder.
const CRATES: [&str; 5] = [
    "api",
    "controller",
    "policy-wasm",
    "e2e-tests",
    "test-support",
];

/// Which file of a crate imports which, by path relative to `src/`.
type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn the_reader_reads() {
    let api = file_graph(&without_unit_tests(sources("api")));
    assert!(api["validation/mod.rs"].contains("defaults.rs"));
    assert!(api["extra_args/memory_file.rs"].contains("memcached_options.rs"));
    let e2e = file_graph(&sources("e2e-tests"));
    assert!(e2e["harness/environment/operator.rs"].contains("harness/clients/checks.rs"));
    assert!(
        e2e["harness/mod.rs"].contains("harness/environment/node.rs"),
        "a use path from a child module"
    );
    assert!(
        api["validation/mod.rs"].contains("validation/workload.rs"),
        "a child module by a relative path"
    );
    assert_eq!(
        tokens("r#\"a::b\"# 'x' '\\'' // c::d\n/* e::f */ g::h"),
        [
            Token::Ident("g".into()),
            Token::PathSep,
            Token::Ident("h".into())
        ]
    );
}

#[test]
fn no_module_imports_one_that_imports_it() {
    for krate in CRATES {
        let circles = circles(&file_graph(&without_unit_tests(sources(krate))));
        assert!(
            circles.is_empty(),
            "import circles between the modules of {krate}:\n{}",
            circles.join("\n")
        );
    }
}

#[test]
fn no_top_level_module_imports_one_that_imports_it() {
    for krate in CRATES {
        let circles = circles(&room_graph(&file_graph(&without_unit_tests(sources(
            krate,
        )))));
        assert!(
            circles.is_empty(),
            "import circles between the top-level modules of {krate}:\n{}",
            circles.join("\n")
        );
    }
}

#[test]
fn the_controllers_rooms_use_only_what_their_mod_rs_names() {
    let files = sources("controller");
    let undeclared = undeclared_uses(&files, &room_graph(&file_graph(&files)));
    assert!(
        undeclared.is_empty(),
        "rooms using rooms their mod.rs does not name on its `//! May use:` line:\n{}",
        undeclared.join("\n")
    );
}

/// A `//! May use:` line naming a room that is not there (misspelt, moved) allows nothing.
#[test]
fn the_controllers_rooms_name_rooms_that_exist() {
    let files = sources("controller");
    let rooms: BTreeSet<String> = files
        .keys()
        .filter(|f| *f != "lib.rs")
        .map(|f| room_of(f))
        .collect();
    let mut unknown = Vec::new();
    for (file, text) in files.iter().filter(|(f, _)| f.ends_with("/mod.rs")) {
        for named in may_use(text).into_iter().flatten() {
            if !rooms.contains(named) {
                unknown.push(format!("{file} names {named}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "`//! May use:` lines naming no room of controller/src:\n{}",
        unknown.join("\n")
    );
}

/// The check finds what it is there to find.
#[test]
fn circles_and_undeclared_uses_are_found() {
    let files = BTreeMap::from([
        ("lib.rs".to_string(), "pub mod a;\npub mod b;\n".to_string()),
        (
            "a/mod.rs".to_string(),
            "//! May use: nothing else in the crate.\npub mod x;\npub mod y;\n".to_string(),
        ),
        // `super::y` from x, `crate::a::x` from y: a circle; a doc link is not an import.
        (
            "a/x.rs".to_string(),
            "//! See [`crate::b`].\nuse super::y::Y;\n".to_string(),
        ),
        (
            "a/y.rs".to_string(),
            "pub struct Y;\nfn f() { crate::a::x::g(\"crate::b::z\"); }\n".to_string(),
        ),
        (
            "b/mod.rs".to_string(),
            "//! May use: `a`.\npub mod z;\n".to_string(),
        ),
        (
            "b/z.rs".to_string(),
            "use crate::{a::x, b};\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n".to_string(),
        ),
    ]);
    let graph = file_graph(&files);
    assert_eq!(circles(&graph), ["a/x.rs -> a/y.rs -> a/x.rs"]);
    let rooms = room_graph(&graph);
    assert!(circles(&rooms).is_empty());
    assert_eq!(rooms["b"], BTreeSet::from(["a".to_string()]));
    assert!(undeclared_uses(&files, &rooms).is_empty());
    let mut files = files;
    files.insert(
        "a/mod.rs".into(),
        "pub mod x;\npub mod y;\nuse crate::b::z;\n".into(),
    );
    let rooms = room_graph(&file_graph(&files));
    assert_eq!(circles(&rooms), ["a -> b -> a"]);
    assert_eq!(
        undeclared_uses(&files, &rooms),
        ["a/mod.rs has no `//! May use:` line"]
    );
}

/// A circle through a child module named by a plain path, and one of three.
#[test]
fn a_circle_through_a_plain_path_is_found() {
    let files = BTreeMap::from([
        ("lib.rs".to_string(), "mod a;\nmod b;\n".to_string()),
        (
            "a/mod.rs".to_string(),
            "mod child;\nfn f() { child::g() }\n".to_string(),
        ),
        ("a/child.rs".to_string(), "use super::f;\n".to_string()),
        ("b/mod.rs".to_string(), "mod c;\n".to_string()),
        ("b/c.rs".to_string(), "use crate::b::d::D;\n".to_string()),
    ]);
    assert_eq!(
        circles(&file_graph(&files)),
        ["a/child.rs -> a/mod.rs -> a/child.rs"]
    );
    let three = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    assert_eq!(circles(&three), ["a -> b -> c -> a"]);
}

/// Every `.rs` file of `krate`'s `src/` but its binaries (`main.rs`, `bin/`), by its path
/// relative to `src`.
fn sources(krate: &str) -> BTreeMap<String, String> {
    fn walk(dir: &Path, src: &Path, files: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path != src.join("bin") {
                    walk(&path, src, files);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(src).unwrap().to_string_lossy();
                files.insert(
                    relative.replace('\\', "/"),
                    std::fs::read_to_string(&path).unwrap(),
                );
            }
        }
    }
    let src = workspace_root().join(krate).join("src");
    let mut files = BTreeMap::new();
    walk(&src, &src, &mut files);
    files.remove("main.rs");
    files
}

/// `files` without their unit tests (`#[cfg(test)]` then `mod tests`, to the end of the file).
fn without_unit_tests(files: BTreeMap<String, String>) -> BTreeMap<String, String> {
    files
        .into_iter()
        .map(|(file, text)| {
            let code = text
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            (file, code.to_string())
        })
        .collect()
}

/// The module path of a file: `a/mod.rs` and `a.rs` are `a`, `lib.rs` the root.
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// Which file imports which (the root, `lib.rs`, left out: nothing can import it back).
fn file_graph(files: &BTreeMap<String, String>) -> Graph {
    let modules: BTreeMap<Vec<String>, &String> = files.keys().map(|f| (module_of(f), f)).collect();
    let mut graph = BTreeMap::new();
    for (file, text) in files.iter().filter(|(f, _)| *f != "lib.rs") {
        let targets: &mut BTreeSet<String> = graph.entry(file.clone()).or_default();
        for path in crate_paths(&module_of(file), text) {
            // The deepest module of the path that is a file.
            let target = (1..=path.len())
                .map_while(|n| modules.get(&path[..n]))
                .last();
            if let Some(target) = target.filter(|t| **t != file && t.as_str() != "lib.rs") {
                targets.insert((*target).clone());
            }
        }
    }
    graph
}

/// The room of a file (its top-level module): its first folder, or its name at the top.
fn room_of(file: &str) -> String {
    module_of(file)[0].clone()
}

/// Which room uses which.
fn room_graph(files: &Graph) -> Graph {
    let mut rooms: Graph = BTreeMap::new();
    for (file, targets) in files {
        let room = room_of(file);
        let used = targets.iter().map(|t| room_of(t)).filter(|r| *r != room);
        rooms.entry(room.clone()).or_default().extend(used);
    }
    rooms
}

/// One circle of each group of nodes that reach each other, as `a -> b -> a`
/// (naming the group when it holds more).
fn circles(graph: &Graph) -> Vec<String> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut next = vec![from.clone()];
        while let Some(node) = next.pop() {
            for target in graph.get(&node).into_iter().flatten() {
                if seen.insert(target.clone()) {
                    next.push(target.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|n| (n, reach(n))).collect();
    let mut reported = BTreeSet::new();
    let mut found = Vec::new();
    for (node, reaches) in &reached {
        if !reaches.contains(*node) || reported.contains(*node) {
            continue;
        }
        // Its group: what it reaches that reaches it back.
        let group: BTreeSet<&String> = reaches
            .iter()
            .filter(|other| reached.get(other).is_some_and(|r| r.contains(*node)))
            .collect();
        reported.extend(group.iter().map(|n| (*n).clone()));
        // The shortest way back from `node` to itself within the group.
        let mut way: BTreeMap<&String, &String> = BTreeMap::new();
        let mut queue = VecDeque::from([*node]);
        'search: while let Some(at) = queue.pop_front() {
            for target in graph.get(at).into_iter().flatten() {
                if target == *node {
                    let mut circle = vec![(*node).clone()];
                    let mut back = at;
                    while back != *node {
                        circle.push(back.clone());
                        back = way[back];
                    }
                    circle.push((*node).clone());
                    let last = circle.len() - 1;
                    circle[1..last].reverse();
                    let mut line = circle.join(" -> ");
                    if group.len() > last {
                        let members: Vec<&str> = group.iter().map(|n| n.as_str()).collect();
                        line += &format!(" (and more circles among {})", members.join(", "));
                    }
                    found.push(line);
                    break 'search;
                }
                if group.contains(target) && !way.contains_key(target) {
                    way.insert(target, at);
                    queue.push_back(target);
                }
            }
        }
    }
    found
}

/// Each use of a room its `mod.rs` does not allow, and each room folder
/// without its `//! May use:` line (`nothing else in the crate`, or the
/// rooms it may use, each in backquotes).
fn undeclared_uses(files: &BTreeMap<String, String>, rooms: &Graph) -> Vec<String> {
    let mut wrong = Vec::new();
    for (room, used) in rooms {
        let Some(text) = files.get(&format!("{room}/mod.rs")) else {
            continue;
        };
        let Some(allowed) = may_use(text) else {
            wrong.push(format!("{room}/mod.rs has no `//! May use:` line"));
            continue;
        };
        for other in used.iter().filter(|u| !allowed.contains(u.as_str())) {
            wrong.push(format!("{room} uses {other}"));
        }
    }
    wrong
}

/// The rooms a room's `mod.rs` names on its `//! May use:` line, each in backquotes; `None`
/// without the line.
fn may_use(text: &str) -> Option<BTreeSet<&str>> {
    let line = text.lines().find(|l| l.starts_with("//! May use:"))?;
    Some(line.split('`').skip(1).step_by(2).collect())
}

/// A token of Rust source, comments and literals left out.
#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Punct(char),
}

fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let (mut tokens, mut i) = (Vec::new(), 0);
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let (mut depth, mut j) = (1, i + 2);
            while j < chars.len() && depth > 0 {
                if chars[j] == '/' && at(j + 1) == '*' {
                    depth += 1;
                    j += 1;
                } else if chars[j] == '*' && at(j + 1) == '/' {
                    depth -= 1;
                    j += 1;
                }
                j += 1;
            }
            i = j;
        } else if let Some(end) = raw_string_end(&chars, i) {
            i = end;
        } else if c == '"' || (matches!(c, 'b' | 'c') && at(i + 1) == '"') {
            let mut j = if c == '"' { i + 1 } else { i + 2 };
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            i = j + 1;
        } else if c == '\'' || (c == 'b' && at(i + 1) == '\'') {
            let j = if c == '\'' { i + 1 } else { i + 2 };
            if at(j) == '\\' {
                // An escaped char literal: up to its closing quote.
                let mut k = j + 2;
                while k < chars.len() && chars[k] != '\'' {
                    k += 1;
                }
                i = k + 1;
            } else if at(j + 1) == '\'' {
                i = j + 2;
            } else {
                // A lifetime: its name follows as an identifier.
                i = j;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Ident(chars[start..i].iter().collect()));
        } else if c == ':' && at(i + 1) == ':' {
            tokens.push(Token::PathSep);
            i += 2;
        } else {
            tokens.push(Token::Punct(c));
            i += 1;
        }
    }
    tokens
}

/// Where a raw string literal (`r"..."`, `br#"..."#`, ...) starting at `i` ends.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(chars.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if chars.get(j) != Some(&'r')
        || (i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'))
    {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|c| **c == '#').count();
    j += hashes;
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"'
            && chars[j + 1..]
                .iter()
                .take(hashes)
                .filter(|c| **c == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(j)
}

/// Every path into the crate that `text`, the file of module `module`, uses, from the crate's
/// root: the paths of its `use` declarations, those written inline from `crate`, `super` or
/// `self`, and plain ones (`child::f()`), each as far as its identifiers go. A path into another
/// crate comes out as a path under `module` that names no module of this one.
fn crate_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let tokens = tokens(text);
    let ident = |i: usize| match tokens.get(i) {
        Some(Token::Ident(name)) => Some(name.as_str()),
        _ => None,
    };
    // Inline modules (`mod tests { ... }`) by the brace depth they opened at.
    let (mut inline, mut depth): (Vec<(String, usize)>, usize) = (Vec::new(), 0);
    let mut paths = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let current: Vec<String> = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(name, _)| name.clone()))
            .collect();
        match &tokens[i] {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Token::Ident(word)
                if word == "mod" && tokens.get(i + 2) == Some(&Token::Punct('{')) =>
            {
                if let Some(name) = ident(i + 1) {
                    inline.push((name.to_string(), depth));
                }
            }
            Token::Ident(word) if word == "use" => {
                let mut found = Vec::new();
                i = use_tree(&tokens, i + 1, Vec::new(), &mut found);
                paths.extend(found.into_iter().filter_map(|p| absolute(&current, &p)));
                continue;
            }
            Token::Ident(word)
                if tokens.get(i + 1) == Some(&Token::PathSep)
                    && (i == 0 || tokens[i - 1] != Token::PathSep) =>
            {
                let mut path = vec![word.clone()];
                while tokens.get(i + 1) == Some(&Token::PathSep) {
                    let Some(next) = ident(i + 2) else { break };
                    path.push(next.to_string());
                    i += 2;
                }
                paths.extend(absolute(&current, &path));
            }
            _ => {}
        }
        i += 1;
    }
    paths
}

/// The paths of the use tree at `i` (after `use`, or inside braces), each
/// after `prefix`, into `found`; where the tree ends.
fn use_tree(
    tokens: &[Token],
    mut i: usize,
    prefix: Vec<String>,
    found: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix;
    loop {
        match tokens.get(i) {
            Some(Token::Ident(name)) if name != "as" => {
                if name != "self" || path.is_empty() {
                    path.push(name.clone());
                }
                i += 1;
                if tokens.get(i) == Some(&Token::PathSep) {
                    i += 1;
                    continue;
                }
                found.push(path);
                return skip_rename(tokens, i);
            }
            Some(Token::Punct('{')) => {
                i += 1;
                while !matches!(tokens.get(i), Some(Token::Punct('}')) | None) {
                    i = use_tree(tokens, i, path.clone(), found);
                    if tokens.get(i) == Some(&Token::Punct(',')) {
                        i += 1;
                    }
                }
                return i + 1;
            }
            Some(Token::Punct('*')) => {
                found.push(path);
                return i + 1;
            }
            Some(Token::PathSep) => i += 1,
            _ => return i,
        }
    }
}

fn skip_rename(tokens: &[Token], i: usize) -> usize {
    match tokens.get(i) {
        Some(Token::Ident(word)) if word == "as" => i + 2,
        _ => i,
    }
}

/// `path` from the crate's root, seen from module `current`: from `crate`, `super` or `self`, or
/// else from `current` (a child module, or another crate's path).
fn absolute(current: &[String], path: &[String]) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        "crate" => Some(rest.to_vec()),
        "self" => Some(current.iter().chain(rest).cloned().collect()),
        "super" => {
            let mut base = current.to_vec();
            base.pop();
            let mut rest = rest;
            while let Some(("super", more)) = rest.split_first().map(|(s, m)| (s.as_str(), m)) {
                base.pop();
                rest = more;
            }
            Some(base.into_iter().chain(rest.iter().cloned()).collect())
        }
        _ => Some(current.iter().chain(path).cloned().collect()),
    }
}
