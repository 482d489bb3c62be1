//! Policy settings: what a ClusterAdmissionPolicy's `settings:` may hold.

use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use memcached_api::admission;
use memcached_api::pod_security::Level;
use memcached_api::quantity::Quantity;
use memcached_api::validation::{DEFAULT_MEMORY_OVERHEAD, Options};
use serde::Deserialize;

/// The settings as written by the user.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// Memory kept free above maxMemoryMB in the container limit (a Quantity).
    #[serde(default = "default_overhead")]
    pub memory_overhead: String,
    /// Return defaulted objects; false makes the policy purely validating.
    #[serde(default = "default_mutate")]
    pub mutate: bool,
    /// The Pod Security level the pods must meet at least (`privileged`,
    /// `baseline` or `restricted`); a namespace's `enforce` label may ask for more.
    #[serde(default)]
    pub pod_security_level: Level,
}

fn default_overhead() -> String {
    DEFAULT_MEMORY_OVERHEAD.to_string()
}

fn default_mutate() -> bool {
    true
}

impl Settings {
    /// Decode settings JSON (`null` and `{}` mean all defaults) and check them.
    pub fn from_json(payload: &[u8]) -> Result<admission::Settings, String> {
        let value =
            serde_json::from_slice(payload).map_err(|e| format!("invalid settings: {e}"))?;
        Self::from_value(value)
    }

    /// Decode already-parsed settings (`null` and `{}` mean all defaults) and check them.
    pub fn from_value(value: serde_json::Value) -> Result<admission::Settings, String> {
        let value = if value.is_null() {
            serde_json::Value::Object(Default::default())
        } else {
            value
        };
        // The path names the offending setting: `mutate: invalid type: string "yes", ...`.
        let settings: Settings = serde_path_to_error::deserialize(value).map_err(|e| {
            match e.path().to_string().as_str() {
                "." => format!("invalid settings: {}", e.inner()),
                path => format!("invalid settings: {path}: {}", e.inner()),
            }
        })?;
        settings.check()
    }

    fn check(self) -> Result<admission::Settings, String> {
        let overhead = Quantity::parse(&self.memory_overhead).map_err(|e| {
            format!(
                "invalid settings: memoryOverhead {:?}: {e}",
                self.memory_overhead
            )
        })?;
        if overhead.is_negative() {
            return Err(format!(
                "invalid settings: memoryOverhead {:?} must not be negative",
                self.memory_overhead
            ));
        }
        Ok(admission::Settings {
            options: Options {
                memory_overhead: overhead,
                memory_overhead_text: self.memory_overhead,
            },
            mutate: self.mutate,
            pod_security: self.pod_security_level,
        })
    }
}

/// The answer to `validate_settings`.
pub fn validation_response(payload: &[u8]) -> SettingsValidationResponse {
    match Settings::from_json(payload) {
        Ok(_) => SettingsValidationResponse {
            valid: true,
            message: None,
        },
        Err(message) => SettingsValidationResponse {
            valid: false,
            message: Some(message),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_when_empty_or_null() {
        for payload in [&b"{}"[..], b"null"] {
            let s = Settings::from_json(payload).unwrap();
            assert!(s.mutate);
            assert_eq!(s.options, Options::default());
            assert_eq!(s.pod_security, Level::Restricted);
        }
    }

    #[test]
    fn reads_every_setting() {
        let s = Settings::from_json(
            br#"{"memoryOverhead": "64Mi", "mutate": false, "podSecurityLevel": "baseline"}"#,
        )
        .unwrap();
        assert!(!s.mutate);
        assert_eq!(s.options.memory_overhead, Quantity::mebi(64));
        assert_eq!(s.pod_security, Level::Baseline);
    }

    #[test]
    fn rejects_bad_settings_with_clear_messages() {
        let cases: [(&[u8], &str); 6] = [
            (
                br#"{"podSecurityLevel": "Restricted"}"#,
                "podSecurityLevel: unknown variant `Restricted`, expected one of `privileged`, `baseline`, `restricted`",
            ),
            (
                br#"{"memoryOverhead": "lots"}"#,
                "memoryOverhead \"lots\": quantities must match",
            ),
            (br#"{"memoryOverhead": "-1Mi"}"#, "must not be negative"),
            (
                br#"{"mutate": "yes"}"#,
                "invalid type: string \"yes\", expected a boolean",
            ),
            (br#"{"overhead": "1Mi"}"#, "unknown field `overhead`"),
            (b"[", "invalid settings: EOF"),
        ];
        for (payload, expected) in cases {
            let response = validation_response(payload);
            assert!(!response.valid);
            let message = response.message.unwrap();
            assert!(message.contains(expected), "{message}");
        }
    }
}
