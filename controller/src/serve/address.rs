//! Listen addresses as Go operators write them: `:8080` (every address,
//! IPv4 and IPv6), `127.0.0.1:8080`, `[::1]:8080`.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use socket2::{Domain, Protocol, Socket, Type};

/// Where a server listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenAddress {
    /// Every address of the host on this port: dual-stack `[::]`, or
    /// `0.0.0.0` where IPv6 is disabled.
    AnyHost(u16),
    /// One address (`0.0.0.0`: every IPv4 one; `[::]`: every one, IPv4 too).
    Exact(SocketAddr),
}

impl FromStr for ListenAddress {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if let Some(port) = text.strip_prefix(':') {
            return port
                .parse()
                .map(ListenAddress::AnyHost)
                .map_err(|_| format!("{text:?}: the port must be a number from 0 to 65535"));
        }
        text.parse().map(ListenAddress::Exact).map_err(|_| {
            format!("{text:?}: expected :PORT, IPV4:PORT or [IPV6]:PORT (an IP address, not a host name)")
        })
    }
}

impl fmt::Display for ListenAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddress::AnyHost(port) => write!(f, ":{port}"),
            ListenAddress::Exact(addr) => addr.fmt(f),
        }
    }
}

impl ListenAddress {
    /// A listening socket (non-blocking, ready for tokio).
    pub fn bind(&self) -> io::Result<std::net::TcpListener> {
        match *self {
            ListenAddress::Exact(addr) => listen(addr),
            ListenAddress::AnyHost(port) => {
                match listen(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)) {
                    Err(e) if ipv6_unavailable(&e) => {
                        tracing::info!(error = %e, "IPv6 unavailable: listening on IPv4 only");
                        listen(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))
                    }
                    other => other,
                }
            }
        }
    }
}

/// The kernel has no IPv6 (module absent, `ipv6.disable=1`) or no IPv6 address to bind.
fn ipv6_unavailable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL)
    )
}

/// Bind and listen; an IPv6 wildcard also accepts IPv4 (IPV6_V6ONLY off,
/// whatever the host's `net.ipv6.bindv6only` says).
fn listen(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        socket.set_only_v6(false)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ListenAddress, String> {
        text.parse()
    }

    #[test]
    fn parses_go_style_addresses() {
        assert_eq!(parse(":8080"), Ok(ListenAddress::AnyHost(8080)));
        assert_eq!(parse(":0"), Ok(ListenAddress::AnyHost(0)));
        assert_eq!(
            parse("127.0.0.1:9000"),
            Ok(ListenAddress::Exact("127.0.0.1:9000".parse().unwrap()))
        );
        assert_eq!(
            parse("0.0.0.0:8080"),
            Ok(ListenAddress::Exact("0.0.0.0:8080".parse().unwrap()))
        );
        assert_eq!(
            parse("[::1]:8443"),
            Ok(ListenAddress::Exact("[::1]:8443".parse().unwrap()))
        );
        assert_eq!(parse("[::]:8081").unwrap().to_string(), "[::]:8081");
        assert_eq!(parse(":8081").unwrap().to_string(), ":8081");
    }

    #[test]
    fn refuses_what_is_not_an_address() {
        for bad in [
            "",
            ":",
            ":http",
            ":65536",
            ":-1",
            "8080",
            "localhost:8080",
            "::1:8080",
            "[::1]",
            "1.2.3.4",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    /// The default bind (`:PORT`) answers over IPv4 and, where the host
    /// has IPv6, over IPv6: one socket, both families.
    #[test]
    fn any_host_accepts_ipv4_and_ipv6() {
        let listener = ListenAddress::AnyHost(0).bind().unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(false).unwrap();
        std::net::TcpStream::connect(("127.0.0.1", port)).expect("IPv4 connect");
        let (_, from) = listener.accept().unwrap();
        assert!(from.ip().to_canonical().is_loopback(), "{from}");
        if listener.local_addr().unwrap().is_ipv6() {
            std::net::TcpStream::connect(("::1", port)).expect("IPv6 connect");
            let (_, from) = listener.accept().unwrap();
            assert_eq!(from.ip(), Ipv6Addr::LOCALHOST, "{from}");
        } else {
            eprintln!("no IPv6 on this host: the IPv4 fallback was tested");
        }
    }
}
