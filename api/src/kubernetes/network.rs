//! The NetworkPolicy peers of `spec.networkPolicy.allowedSources`, as the API
//! server's `ValidateNetworkPolicyPeer` checks them.

use std::net::{Ipv4Addr, Ipv6Addr};

use k8s_openapi::api::networking::v1::{IPBlock, NetworkPolicyPeer};

use super::selector::validate_label_selector;
use crate::field::{ErrorList, FieldError, MAX_ERRORS_PER_LIST, Path};

const CIDR_DETAIL: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// Every error of the peers.
pub fn validate_peers(peers: &[NetworkPolicyPeer], path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (i, peer) in peers.iter().enumerate() {
        if errors.len() >= MAX_ERRORS_PER_LIST {
            break;
        }
        let path = path.index(i);
        let mut count = 0;
        if let Some(selector) = &peer.pod_selector {
            count += 1;
            errors.extend(validate_label_selector(
                selector,
                &path.child("podSelector"),
            ));
        }
        if let Some(selector) = &peer.namespace_selector {
            count += 1;
            errors.extend(validate_label_selector(
                selector,
                &path.child("namespaceSelector"),
            ));
        }
        if let Some(block) = &peer.ip_block {
            count += 1;
            errors.extend(validate_ip_block(block, &path.child("ipBlock")));
        }
        if count == 0 {
            errors.push(FieldError::required(path, "must specify a peer"));
        } else if count > 1 && peer.ip_block.is_some() {
            errors.push(FieldError::forbidden(
                path,
                "may not specify both ipBlock and another peer",
            ));
        }
    }
    errors
}

/// `ValidateIPBlock`: a CIDR, and exceptions strictly inside it, each valid
/// under the strict CIDR validation the API server applies since 1.36
/// (`StrictIPCIDRValidation`, beta and on by default; alpha in 1.33).
fn validate_ip_block(block: &IPBlock, path: &Path) -> ErrorList {
    if block.cidr.is_empty() {
        return vec![FieldError::required(path.child("cidr"), "")];
    }
    let (cidr, mut errors) = parse_cidr(&block.cidr, &path.child("cidr"));
    let Some(cidr) = cidr else {
        return errors;
    };
    for (i, text) in block.except.iter().flatten().enumerate() {
        if errors.len() >= MAX_ERRORS_PER_LIST {
            break;
        }
        let path = path.child("except").index(i);
        let (except, except_errors) = parse_cidr(text, &path);
        errors.extend(except_errors);
        if except.is_some_and(|except| !cidr.strictly_contains(&except)) {
            errors.push(FieldError::invalid(
                path,
                text.as_str(),
                "must be a strict subset of `cidr`",
            ));
        }
    }
    errors
}

/// apimachinery's `parseCIDR` with strict validation: the block as the
/// lenient parser reads it (`None` when it cannot), and the strict errors.
fn parse_cidr(text: &str, path: &Path) -> (Option<Cidr>, ErrorList) {
    let Some((cidr, leading_zeros)) = Cidr::parse_sloppy(text) else {
        return (
            None,
            vec![FieldError::invalid(path.clone(), text, CIDR_DETAIL)],
        );
    };
    let detail = if leading_zeros {
        "must not have leading 0s in IP or prefix length"
    } else if cidr.v4_mapped {
        "must not have an IPv4-mapped IPv6 address"
    } else if cidr.has_host_bits() {
        "must not have bits set beyond the prefix length"
    } else {
        return (Some(cidr), ErrorList::new());
    };
    (
        Some(cidr),
        vec![FieldError::invalid(path.clone(), text, detail)],
    )
}

/// An address block: the address as 128 bits (IPv4 mapped), its family and prefix.
struct Cidr {
    bits: u128,
    v4: bool,
    /// An IPv6 address of the form `::ffff:a.b.c.d`.
    v4_mapped: bool,
    prefix: u32,
}

impl Cidr {
    /// `netutils.ParseCIDRSloppy`: decimal IPv4 parts and prefix lengths may
    /// have leading zeros (reported as the second value).
    fn parse_sloppy(text: &str) -> Option<(Cidr, bool)> {
        let (address, prefix) = text.split_once('/')?;
        if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut leading_zeros = has_leading_zero(prefix);
        let prefix: u32 = prefix.parse().ok()?;
        let (bits, v4, v4_mapped, max) = if address.contains(':') {
            let a = address.parse::<Ipv6Addr>().ok()?;
            (u128::from(a), false, a.to_ipv4_mapped().is_some(), 128)
        } else {
            let parts: Vec<&str> = address.split('.').collect();
            if parts.len() != 4 {
                return None;
            }
            let mut octets = [0u8; 4];
            for (octet, part) in octets.iter_mut().zip(&parts) {
                if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                *octet = part.parse().ok()?;
                leading_zeros |= has_leading_zero(part);
            }
            (
                u128::from(u32::from(Ipv4Addr::from(octets))),
                true,
                false,
                32,
            )
        };
        (prefix <= max).then_some((
            Cidr {
                bits,
                v4,
                v4_mapped,
                prefix,
            },
            leading_zeros,
        ))
    }

    fn width(&self) -> u32 {
        if self.v4 { 32 } else { 128 }
    }

    /// The network part of `bits` under this prefix.
    fn network(&self, bits: u128) -> u128 {
        let host = self.width() - self.prefix;
        if host >= 128 { 0 } else { bits >> host }
    }

    /// True when an address bit beyond the prefix is set (`10.1.2.3/8`).
    fn has_host_bits(&self) -> bool {
        let host = self.width() - self.prefix;
        host > 0 && self.bits & (u128::MAX >> (128 - host)) != 0
    }

    /// Go's check: the block contains `other`'s address and has a shorter mask.
    fn strictly_contains(&self, other: &Cidr) -> bool {
        self.v4 == other.v4
            && self.network(self.bits) == self.network(other.bits)
            && self.prefix < other.prefix
    }
}

fn has_leading_zero(digits: &str) -> bool {
    digits.len() > 1 && digits.starts_with('0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(peers: serde_json::Value) -> Vec<String> {
        let peers: Vec<NetworkPolicyPeer> = serde_json::from_value(peers).unwrap();
        validate_peers(&peers, &Path::new("spec.networkPolicy.allowedSources"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn valid_peers() {
        assert!(
            check(json!([
                {"podSelector": {"matchLabels": {"app": "web"}}},
                {"namespaceSelector": {}, "podSelector": {}},
                {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
                {"ipBlock": {"cidr": "2001:db8::/32"}}
            ]))
            .is_empty()
        );
    }

    #[test]
    fn empty_peer() {
        assert_eq!(
            check(json!([{}])),
            ["spec.networkPolicy.allowedSources[0]: Required value: must specify a peer"]
        );
    }

    #[test]
    fn ip_block_with_a_selector() {
        assert_eq!(
            check(json!([{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}])),
            [
                "spec.networkPolicy.allowedSources[0]: Forbidden: may not specify both ipBlock and another peer"
            ]
        );
    }

    #[test]
    fn bad_cidrs() {
        assert_eq!(
            check(json!([{"ipBlock": {"cidr": "10.0.0.0/33"}}, {"ipBlock": {"cidr": ""}}])),
            [
                r#"spec.networkPolicy.allowedSources[0].ipBlock.cidr: Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"#,
                "spec.networkPolicy.allowedSources[1].ipBlock.cidr: Required value"
            ]
        );
    }

    #[test]
    fn except_outside_or_equal() {
        assert_eq!(
            check(
                json!([{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24", "10.0.0.0/16", "10.0.1.0/24", "x"]}}])
            ),
            [
                r#"spec.networkPolicy.allowedSources[0].ipBlock.except[0]: Invalid value: "10.1.0.0/24": must be a strict subset of `cidr`"#,
                r#"spec.networkPolicy.allowedSources[0].ipBlock.except[1]: Invalid value: "10.0.0.0/16": must be a strict subset of `cidr`"#,
                r#"spec.networkPolicy.allowedSources[0].ipBlock.except[3]: Invalid value: "x": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"#
            ]
        );
    }
}
