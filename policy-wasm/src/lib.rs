//! Kubewarden policy for `Memcached` (memcached.c5c3.io): waPC glue only.
//! Every default and rule lives in `memcached-api`.

// A global allocator cannot be written without unsafe code: the one module the workspace allows it in.
#[cfg(any(target_arch = "wasm32", test))]
#[allow(unsafe_code)]
mod arena;
mod host;
mod memcached;
mod namespace;
pub mod request;
pub mod settings;

use kubewarden_policy_sdk::wapc_guest::CallResult;

#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: arena::Arena = arena::Arena::new();

/// waPC `validate`: judge one admission request.
pub fn validate(payload: &[u8]) -> CallResult {
    #[cfg(target_arch = "wasm32")]
    return ALLOCATOR.call(|| judge(payload));
    #[cfg(not(target_arch = "wasm32"))]
    judge(payload)
}

fn judge(payload: &[u8]) -> CallResult {
    let response = request::evaluate(payload);
    let answer = serde_json::to_vec(&response)?;
    release(response);
    Ok(answer)
}

/// Let go of what a call built. When the arena holds everything the call
/// allocated, freeing it would free nothing (the next call reclaims the
/// arena), so the tree is not even walked.
fn release<T>(built: T) {
    #[cfg(target_arch = "wasm32")]
    if ALLOCATOR.holds_the_call() {
        std::mem::forget(built);
        return;
    }
    drop(built);
}

/// waPC `validate_settings`: check the policy settings.
pub fn validate_settings(payload: &[u8]) -> CallResult {
    Ok(serde_json::to_vec(&settings::validation_response(payload))?)
}

/// Registers the policy's waPC functions.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)] // the waPC host calls it by this exact symbol name
#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    use kubewarden_policy_sdk::wapc_guest::register_function;
    register_function("validate", validate);
    register_function("validate_settings", validate_settings);
    register_function(
        "protocol_version",
        kubewarden_policy_sdk::protocol_version_guest,
    );
}
