//! Kubewarden's `kubernetes/get_resource` host capability: one object of the
//! cluster, as policy-server reads it with its ServiceAccount (granted by the
//! `contextAwareResources` of metadata.yml and of the ClusterAdmissionPolicy,
//! and by the RBAC of that ServiceAccount).

use serde::Serialize;

/// The SDK's `GetResourceRequest`, field for field: the SDK's own type sits
/// behind its `cluster-context` feature, which pins another k8s-openapi.
#[derive(Serialize)]
pub struct GetResource<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    /// policy-server caches answers for 5 s unless this is set.
    pub disable_cache: bool,
    pub field_masks: Option<[&'static str; 1]>,
}

/// The object `request` names (JSON), or why the host could not answer.
pub fn get_resource(request: &GetResource<'_>) -> Result<Vec<u8>, String> {
    serde_json::to_vec(request)
        .map_err(|e| e.to_string())
        .and_then(|request| host_call(&request))
}

#[cfg(target_arch = "wasm32")]
fn host_call(request: &[u8]) -> Result<Vec<u8>, String> {
    wapc_guest::host_call("kubewarden", "kubernetes", "get_resource", request)
        .map_err(|e| first_line(&e.to_string()))
}

/// The host's error without what follows its first line (a backtrace, when
/// the host captures them): it ends up in a warning, which is one line.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn first_line(error: &str) -> String {
    error
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

#[cfg(not(target_arch = "wasm32"))]
fn host_call(_request: &[u8]) -> Result<Vec<u8>, String> {
    Err("no Kubewarden host outside WebAssembly".to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_host_error_is_cut_to_its_first_line() {
        let error = "Host error: Callback evaluation failure: forbidden\n\nStack backtrace:\n   0: <unknown>";
        assert_eq!(
            super::first_line(error),
            "Host error: Callback evaluation failure: forbidden"
        );
    }
}
