//! YAML output, in one style for `crd` and `render`: serde-saphyr (the
//! maintained YAML crate kube already builds on), block style with list
//! items at their key's indentation as kubectl prints, long lines kept whole
//! (never folded), multi-line text as literal blocks.

use serde::Serialize;

/// `value` as one YAML document.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, String> {
    let options = serde_saphyr::ser_options! {
        folded_wrap_chars: usize::MAX,
    };
    serde_saphyr::to_string_with_options(value, options).map_err(|e| e.to_string())
}
