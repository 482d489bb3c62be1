//! The Secrets the Go operator's objects reference, created as a user moving
//! over would: its own Secret files, cert-manager's Secrets, and the auth
//! files fixed as docs/migration.md says.

use super::*;
use e2e_tests::harness::scenarios::controller::with_controller_stopped;

/// The Secrets the files' objects need, made as a user would before applying
/// them: the files' own Secrets applied as they are; for each cert-manager
/// Certificate the Secret it would write (no cert-manager here: its Issuers
/// are not applied); each TLS or credentials Secret a Memcached names that
/// no file holds, made here: TLS from a fresh CA for the Service names the
/// controller verifies, credentials under the key the Go operator reads
/// (`password-file`). Returns each credentials Secret's auth file by
/// namespace and name.
pub(super) fn create_secrets(
    env: &Env,
    files: &[GoFile],
) -> Result<BTreeMap<(String, String), String>, String> {
    // The files' own Secrets, as they are.
    let mut auth_files = BTreeMap::new();
    for file in files
        .iter()
        .filter(|f| f.docs.iter().all(|d| d["kind"] == "Secret"))
    {
        let outcome = file.apply(&env.kubectl);
        check(
            outcome.success,
            format!("{}: {}", file.name, outcome.stderr.trim()),
        )?;
        for doc in &file.docs {
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            let content = auth_file(doc)
                .ok_or_else(|| format!("{}: no auth file key in {name}", file.name))?;
            auth_files.insert((file.namespace.clone(), name.to_string()), content);
        }
    }
    let from_files: BTreeSet<(String, String)> = auth_files.keys().cloned().collect();
    let mut certificates: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for file in files {
        let ns = &file.namespace;
        for doc in &file.docs {
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            let group = doc["apiVersion"].as_str().unwrap_or_default();
            let security = &doc["spec"]["security"];
            let (tls, sasl) = (
                security["tls"]["certificateSecretRef"]["name"].as_str(),
                security["sasl"]["credentialsSecretRef"]["name"].as_str(),
            );
            match doc["kind"].as_str().unwrap_or_default() {
                "Memcached" => {
                    if let Some(secret) = tls {
                        let names = certificates.entry((ns.clone(), secret.to_string()));
                        names.or_default().push(format!("{name}.{ns}.svc"));
                    }
                    if let Some(secret) = sasl {
                        let content = format!("go-operator-user:{secret}-password\n");
                        auth_files
                            .entry((ns.clone(), secret.to_string()))
                            .or_insert(content);
                    }
                }
                "Certificate" if group.starts_with("cert-manager.io/") => {
                    let secret = doc["spec"]["secretName"].as_str().unwrap_or_default();
                    let names = (doc["spec"]["dnsNames"].as_array().into_iter().flatten())
                        .filter_map(|n| n.as_str().map(str::to_string));
                    let made = certificates.entry((ns.clone(), secret.to_string()));
                    made.or_default().extend(names);
                }
                "Issuer" if group.starts_with("cert-manager.io/") => {}
                "Secret" => {}
                kind => {
                    let file = &file.name;
                    return Err(format!(
                        "{file}: a {kind} is not among the kinds applied here"
                    ));
                }
            }
        }
    }
    for ((ns, name), content) in &auth_files {
        if !from_files.contains(&(ns.clone(), name.clone())) {
            env.kubectl.apply(
                &json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "namespace": ns},
                    "stringData": {"password-file": content},
                })
                .to_string(),
            )?;
        }
    }
    for ((ns, name), names) in &certificates {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        env.kubectl
            .apply(&tls_secret(ns, name, &pki::issue(&names)?))?;
    }
    Ok(auth_files)
}

/// The auth file a Secret document holds under the first key the controller
/// reads (`stringData`, else base64 `data`).
pub(super) fn auth_file(secret: &Value) -> Option<String> {
    use base64::Engine;
    AUTH_SECRET_KEYS.iter().find_map(|key| {
        if let Some(text) = secret["stringData"][key].as_str() {
            return Some(text.to_string());
        }
        let encoded = secret["data"][key].as_str()?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()?;
        String::from_utf8(bytes).ok()
    })
}

/// A credentials Secret from the files whose auth file lacks its final
/// newline (the Go operator's e2e Secret): the Memcached shows
/// `Degraded: InvalidAuthSecret` naming the key, and the fix
/// docs/migration.md gives (`kubectl create secret generic ... --dry-run=client
/// -o yaml | kubectl apply -f -`) makes it valid. The fix lands while the
/// controller is stopped, once the pods run the file as it is: the
/// controller started after has never read them with the old file, and the
/// pods, which refuse the fixed credentials, get them all the same.
pub(super) fn fix_unterminated_auth_files(
    env: &mut Env,
    file: &GoFile,
    credentials: &mut BTreeMap<(String, String), String>,
) -> Result<(), String> {
    let ns = &file.namespace;
    for object in file.memcacheds() {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let Some(secret) =
            object["spec"]["security"]["sasl"]["credentialsSecretRef"]["name"].as_str()
        else {
            continue;
        };
        let key = (ns.clone(), secret.to_string());
        let Some(content) = credentials
            .get(&key)
            .filter(|c| !c.ends_with('\n'))
            .cloned()
        else {
            continue;
        };
        wait_for(
            &format!("{}: Degraded/InvalidAuthSecret", file.name),
            SETTLE,
            || {
                let mc = env.kubectl.get(&["memcached", name, "-n", ns])?;
                match condition(&mc, "Degraded") {
                    Some(c)
                        if c["reason"] == "InvalidAuthSecret"
                            && c["message"]
                                .as_str()
                                .is_some_and(|m| m.contains("must end with a newline")) =>
                    {
                        Ok(())
                    }
                    other => Err(format!("Degraded: {other:?}")),
                }
            },
        )?;
        // As a user meets it: the pods run with the file as it is, then the fix.
        let listening = format!("{}: every pod of {ns}/{name} listening", file.name);
        wait_for(&listening, SETTLE, || {
            each_pod(env, ns, name, |ip| Memcache::connect(ip).map(drop))
        })?;
        let rolled_out = format!("{}: deployment {ns}/{name} rolled out", file.name);
        wait_for(&rolled_out, SETTLE, || {
            let deployment = env.kubectl.get(&["deployment", name, "-n", ns])?;
            let (spec, status) = (&deployment["spec"], &deployment["status"]);
            check(
                status["observedGeneration"] == deployment["metadata"]["generation"]
                    && status["updatedReplicas"] == spec["replicas"]
                    && status["readyReplicas"] == spec["replicas"],
                status.to_string(),
            )
        })?;
        let literal = format!("--from-literal=password-file={content}\n");
        let manifest = env.kubectl.ok(&[
            "create",
            "secret",
            "generic",
            secret,
            "-n",
            ns,
            &literal,
            "--dry-run=client",
            "-o",
            "yaml",
        ])?;
        with_controller_stopped(env, |env| env.kubectl.apply(&manifest).map(drop))?;
        credentials.insert(key, format!("{content}\n"));
    }
    Ok(())
}
