//! The lines of the docs that state facts of the option table
//! (`api/src/memcached_options.rs`) are generated from it: the policy
//! README's `memcached` row of the Defaults table, its bounds and the flags
//! `extraArgs` may not set because a field does, in "Validation"; and the
//! cache size of the project README. A line that
//! differs fails here, named; `UPDATE_DOCS=1` (what `make crd` runs)
//! rewrites it. (The CRD's descriptions state them too, checked against the
//! rows by `controller/tests/crd.rs`.)

use std::path::Path;

use memcached_api::memcached_options::{
    ExtraArgs, MAX_MEMORY_MB, Opt, SPEC_FIELDS, Schema, SpecField,
};

/// A generated piece of a document: the text between `before` and the
/// first `after` following it.
struct Piece {
    file: &'static str,
    before: &'static str,
    after: &'static str,
    text: String,
}

fn fields() -> impl Iterator<Item = SpecField> {
    SPEC_FIELDS.iter().filter_map(|option| option.field)
}

/// A field's bound as the README writes it: `<name> <low>-<high>`, or its name and pattern.
fn bound(field: &SpecField) -> String {
    match field.schema {
        Schema::Range(range) => format!("{} {}-{}", field.name, range.start(), range.end()),
        Schema::Pattern(pattern, _) => format!("{} `{pattern}`", field.name),
    }
}

fn pieces() -> Vec<Piece> {
    let defaults: Vec<String> = fields()
        .map(|field| format!("`{} {}`", field.name, field.default))
        .collect();
    let bounds: Vec<String> = fields().map(|field| bound(&field)).collect();
    let managed: Vec<String> = (SPEC_FIELDS.iter())
        .filter(|option| matches!(option.extra_args, ExtraArgs::Managed(_)))
        .filter_map(|option| match (option.option, option.field) {
            (Opt::Short(flag), Some(field)) => Some(format!("`-{flag}` ({})", field.name)),
            _ => None,
        })
        .collect();
    let cache = MAX_MEMORY_MB
        .field
        .expect("maxMemoryMB has a field")
        .default;
    vec![
        Piece {
            file: "policy-wasm/README.md",
            before: "\n| `memcached` | always present: ",
            after: " |\n",
            text: defaults.join(", "),
        },
        Piece {
            file: "policy-wasm/README.md",
            before: "\n   in `memcached`: ",
            after: ".\n",
            text: bounds.join(", "),
        },
        Piece {
            file: "policy-wasm/README.md",
            before: "\n     - flags the operator manages: ",
            after: ";\n",
            text: managed.join(", "),
        },
        Piece {
            file: "README.md",
            before: "The policy fills in the defaults (",
            after: " MB of cache,",
            text: cache.to_string(),
        },
    ]
}

#[test]
fn the_docs_state_the_option_tables_defaults_and_bounds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let update = std::env::var_os("UPDATE_DOCS").is_some();
    let mut wrong = Vec::new();
    for piece in pieces() {
        let path = root.join(piece.file);
        let mut doc = std::fs::read_to_string(&path).unwrap();
        let Some(start) = doc.find(piece.before).map(|at| at + piece.before.len()) else {
            wrong.push(format!("{}: no line with {:?}", piece.file, piece.before));
            continue;
        };
        let Some(end) = doc[start..].find(piece.after).map(|at| start + at) else {
            wrong.push(format!(
                "{}: no {:?} after {:?}",
                piece.file, piece.after, piece.before
            ));
            continue;
        };
        if doc[start..end] == piece.text {
            continue;
        }
        if update {
            doc.replace_range(start..end, &piece.text);
            std::fs::write(&path, doc).unwrap();
        } else {
            wrong.push(format!(
                "{}: after {:?} it says\n  {}\nwhere the option table gives\n  {}",
                piece.file,
                piece.before.trim(),
                &doc[start..end],
                piece.text
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{}\n(run `make crd`, which rewrites them)",
        wrong.join("\n")
    );
}
