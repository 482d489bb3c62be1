//! Test harness: the built `policy.wasm`, run the way Kubewarden's
//! policy-server runs it (waPC host on wasmtime, WASI on), and the fixtures.

pub mod generate;
#[cfg(feature = "cluster")]
pub mod harness;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};
use wapc::{WapcHost, WasiParams};
use wasmtime_provider::WasmtimeEngineProviderBuilder;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e-tests lives in the workspace")
        .to_path_buf()
}

/// `$POLICY_WASM`, or `policy.wasm` at the workspace root (built by `make policy.wasm`).
pub fn policy_path() -> PathBuf {
    std::env::var_os("POLICY_WASM")
        .map_or_else(|| workspace_root().join("policy.wasm"), PathBuf::from)
}

/// One instance of the policy module inside a waPC host.
pub struct Policy {
    host: WapcHost,
}

impl Policy {
    /// Load the policy from [`policy_path`].
    pub fn load() -> Result<Self, String> {
        let path = policy_path();
        let bytes = std::fs::read(&path).map_err(|e| {
            format!(
                "cannot read {} ({e}); build it with `make policy.wasm`",
                path.display()
            )
        })?;
        Self::from_bytes(&bytes)
    }

    /// Load a policy module from its bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let engine = WasmtimeEngineProviderBuilder::new()
            .module_bytes(bytes)
            .wasi_params(WasiParams::default())
            .build()
            .map_err(|e| format!("wasmtime cannot load the policy: {e}"))?;
        let host = WapcHost::new(
            Box::new(engine),
            Some(Box::new(|_, binding, ns, op, payload| {
                namespace_lookup(binding, ns, op, payload).map_err(Into::into)
            })),
        )
        .map_err(|e| format!("waPC host cannot start the policy: {e}"))?;
        Ok(Policy { host })
    }

    /// Call a waPC function with raw bytes and decode its JSON answer.
    pub fn call_raw(&self, function: &str, payload: &[u8]) -> Result<Value, String> {
        let out = self
            .host
            .call(function, payload)
            .map_err(|e| format!("{function} failed: {e}"))?;
        serde_json::from_slice(&out).map_err(|e| format!("{function} answered non-JSON: {e}"))
    }

    /// `validate` with the payload policy-server sends: `{"request": .., "settings": ..}`.
    pub fn validate(&self, request: &Value, settings: &Value) -> Result<Value, String> {
        let payload = json!({"request": request, "settings": settings});
        self.call_raw("validate", payload.to_string().as_bytes())
    }

    /// `validate_settings` with the settings as policy-server sends them.
    pub fn validate_settings(&self, settings: &Value) -> Result<Value, String> {
        self.call_raw("validate_settings", settings.to_string().as_bytes())
    }
}

/// The one host capability the policy uses, `kubernetes/get_resource`, for a
/// Namespace, answered as a fresh cluster would: the Namespace, with no labels.
/// Under no label no scale-up reads its Memcached (`needs_memcached`), so any
/// other read is a failure.
fn namespace_lookup(binding: &str, ns: &str, op: &str, payload: &[u8]) -> Result<Vec<u8>, String> {
    let request: Value = serde_json::from_slice(payload).unwrap_or_default();
    if (binding, ns, op) != ("kubewarden", "kubernetes", "get_resource")
        || request["api_version"] != "v1"
        || request["kind"] != "Namespace"
    {
        return Err(format!(
            "unexpected host call {binding}/{ns}/{op} {request}: the policy reads Namespaces only"
        ));
    }
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": request["name"]}});
    Ok(namespace.to_string().into_bytes())
}

/// One fixture: an AdmissionReview and what the policy must answer.
pub struct Fixture {
    /// File stem.
    pub name: String,
    /// The AdmissionReview document.
    pub review: Value,
    /// The expected outcome.
    pub expected: Expected,
}

/// What the policy must answer to a fixture.
#[derive(Debug, Deserialize)]
pub struct Expected {
    /// Policy settings for this fixture.
    pub settings: Value,
    /// Accepted or rejected.
    pub accepted: bool,
    /// Every error, rendered, in order (rejections as invalid).
    #[serde(default)]
    pub errors: Vec<String>,
    /// The whole message of a rejection that is not an invalid object (Pod Security).
    pub message: Option<String>,
    /// The rejection's HTTP code when not 400.
    pub code: Option<u16>,
    /// Warnings kubectl would print.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The whole object after defaulting, when the policy mutates.
    pub object: Option<Value>,
}

impl Expected {
    /// The rejection message: the errors aggregated like `apierrors.NewInvalid`.
    pub fn message(&self, name: &str) -> String {
        if let Some(message) = &self.message {
            return message.clone();
        }
        let aggregate = match self.errors.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        format!("Memcached.memcached.c5c3.io {name:?} is invalid: {aggregate}")
    }
}

/// Every fixture under `e2e-tests/fixtures`, by name.
pub fn fixtures() -> Vec<Fixture> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut names: Vec<String> = std::fs::read_dir(dir.join("requests"))
        .expect("fixtures/requests exists")
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".json")
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let read = |folder: &str| -> Value {
                let path = dir.join(folder).join(format!("{name}.json"));
                serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture readable"))
                    .expect("fixture is JSON")
            };
            let expected = serde_json::from_value(read("expected")).expect("expectation decodes");
            Fixture {
                review: read("requests"),
                expected,
                name,
            }
        })
        .collect()
}
