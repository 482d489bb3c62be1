//! The Go operator's files as read from `../shared/go-operator`: which
//! ones, the namespace each is applied in, and the rounds that keep
//! same-named objects of two versions apart.

use super::*;

/// One file of the Go operator's objects.
pub(super) struct GoFile {
    /// Its path below `../shared/go-operator` (`samples/...`, `e2e/<scenario>/00-...`).
    pub(super) name: String,
    pub(super) path: PathBuf,
    /// Where it is applied: the namespace its objects name, else its own
    /// (one per sample, one per e2e scenario).
    pub(super) namespace: String,
    pub(super) docs: Vec<Value>,
}

impl GoFile {
    pub(super) fn memcacheds(&self) -> impl Iterator<Item = &Value> {
        self.docs.iter().filter(|d| d["kind"] == "Memcached")
    }

    /// `kubectl apply -f` of the file as it is, in its namespace.
    pub(super) fn apply(&self, kubectl: &Kubectl) -> Outcome {
        let path = self.path.to_string_lossy();
        kubectl.run(&["apply", "-f", &path, "-n", &self.namespace], None)
    }
}

/// Every file of the Go operator's samples and of its e2e scenarios' first
/// step, with the documents it holds; an error when `../shared/go-operator`
/// is absent (CI has it beside the checkout).
pub(super) fn go_operator_files() -> Result<Vec<GoFile>, String> {
    let dir = workspace_root().join("../shared/go-operator");
    if !dir.is_dir() {
        return Err(format!(
            "{} is absent: the Go operator's samples and e2e objects are applied from there \
             (unmodified copies, beside the checkout as in CI)",
            dir.display()
        ));
    }
    let mut paths = listed(&dir.join("samples"))?;
    for scenario in listed(&dir.join("e2e"))? {
        paths.extend(
            listed(&scenario)?
                .into_iter()
                .filter(|p| first_step_objects(p)),
        );
    }
    paths.sort();
    let files = paths
        .into_iter()
        .map(|path| {
            let name = path
                .strip_prefix(&dir)
                .unwrap_or(&path)
                .display()
                .to_string();
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{name}: {e}"))?;
            let docs: Vec<Value> =
                serde_saphyr::from_multiple(&text).map_err(|e| format!("{name}: {e}"))?;
            let namespace = namespace_of(&name, &docs)?;
            Ok(GoFile {
                name,
                path,
                namespace,
                docs,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    for (file, object) in files
        .iter()
        .flat_map(|f| f.memcacheds().map(move |m| (f, m)))
    {
        memory_limit_mib(object).map_err(|e| format!("{}: {e}", file.name))?;
    }
    let count = files.iter().flat_map(GoFile::memcacheds).count();
    check(
        count >= 30 && files.iter().any(refused_by_the_go_operator),
        format!(
            "{count} Memcacheds found in {}, or none of its webhook-rejection scenario",
            dir.display()
        ),
    )?;
    Ok(files)
}

pub(super) fn listed(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    entries
        .map(|entry| entry.map(|e| e.path()).map_err(|e| e.to_string()))
        .collect()
}

/// A file of an e2e scenario's first step (kuttl's `00-*.yaml`) that holds
/// objects, not what the step asserts (`00-assert*`, `00-errors*`).
pub(super) fn first_step_objects(path: &Path) -> bool {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name.strip_prefix("00-").is_some_and(|rest| {
        rest.ends_with(".yaml") && !rest.starts_with("assert") && !rest.starts_with("errors")
    })
}

/// The one namespace `docs` name, else the file's own: `go-<scenario>` for
/// an e2e scenario's files, `go-<sample>` for a sample.
pub(super) fn namespace_of(file: &str, docs: &[Value]) -> Result<String, String> {
    let named: BTreeSet<&str> = (docs.iter())
        .filter_map(|d| d["metadata"]["namespace"].as_str())
        .collect();
    let own = match file.strip_prefix("e2e/") {
        Some(rest) => rest.split('/').next().unwrap_or(rest),
        None => file
            .trim_start_matches("samples/")
            .trim_end_matches(".yaml"),
    };
    match Vec::from_iter(named).as_slice() {
        [] => Ok(format!("go-{}", own.replace('_', "-"))),
        [one] => Ok(one.to_string()),
        several => Err(format!("{file} names several namespaces: {several:?}")),
    }
}

/// The files holding Memcacheds, in rounds: a file whose Memcached has the
/// namespace and name of one in an earlier file (a v1beta1 sample and its
/// v1alpha1 twin) comes a round after it.
pub(super) fn rounds(files: &[GoFile]) -> Vec<Vec<&GoFile>> {
    let mut rounds: Vec<Vec<&GoFile>> = Vec::new();
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for file in files.iter().filter(|f| f.memcacheds().next().is_some()) {
        let identities: Vec<(String, String)> =
            (file.memcacheds()).map(|m| identity(file, m)).collect();
        let round = (identities.iter())
            .filter_map(|i| seen.get(i).map(|r| r + 1))
            .max()
            .unwrap_or(0);
        for identity in identities {
            seen.insert(identity, round);
        }
        if rounds.len() <= round {
            rounds.resize_with(round + 1, Vec::new);
        }
        rounds[round].push(file);
    }
    rounds
}

/// Where a Memcached of `file` is: its namespace and name.
pub(super) fn identity(file: &GoFile, memcached: &Value) -> (String, String) {
    let name = memcached["metadata"]["name"].as_str().unwrap_or_default();
    (file.namespace.clone(), name.to_string())
}

/// The files of `round` with a Memcached that a file of the `later` rounds
/// has again.
pub(super) fn later_twins<'a>(round: &[&'a GoFile], later: &[Vec<&GoFile>]) -> Vec<&'a GoFile> {
    let again: BTreeSet<(String, String)> = (later.iter().flatten())
        .flat_map(|f| f.memcacheds().map(|m| identity(f, m)))
        .collect();
    (round.iter().copied())
        .filter(|f| f.memcacheds().any(|m| again.contains(&identity(f, m))))
        .collect()
}
