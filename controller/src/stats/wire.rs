//! Talking to one memcached: connecting within a timeout, sending, reading
//! bounded lines, and logging in with ASCII authentication (`-Y`) only when
//! the server asks; shared by [`crate::stats::client`]'s `stats` and the
//! [`crate::stats::session`]s that copy keys.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::stats::credentials::Credentials;

/// Connect timeout per pod.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Timeout for authenticating and reading the whole `stats` answer.
pub const READ_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest line accepted (a `STAT` line is under 100 bytes).
pub const MAX_LINE_BYTES: usize = 1024;

/// Why a memcached could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    /// TCP connect failed or timed out.
    #[error("connect: {0}")]
    Connect(String),
    /// TLS handshake failed.
    #[error("TLS: {0}")]
    Tls(String),
    /// The server refused the credentials.
    #[error("authentication refused: {0}")]
    Auth(String),
    /// The connection was reset or closed before the whole answer.
    #[error("closed: {0}")]
    Closed(String),
    /// The answer is not what memcached answers.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The server accepted the connection but gave no complete answer in
    /// time: a frozen memcached (a TCP probe still passes).
    #[error("accepted the connection but gave no complete answer within {READ_TIMEOUT:?}")]
    Silent,
}

/// A TCP connection to `addr`, within [`CONNECT_TIMEOUT`].
pub async fn connect(addr: SocketAddr) -> Result<TcpStream, StatsError> {
    let tcp = timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| StatsError::Connect(format!("timed out after {CONNECT_TIMEOUT:?}")))?
        .map_err(|e| StatsError::Connect(e.to_string()))?;
    let _ = tcp.set_nodelay(true);
    Ok(tcp)
}

/// memcached's answer to any command before authentication (`-Y`).
pub const UNAUTHENTICATED: &str = "CLIENT_ERROR unauthenticated";

pub async fn send<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> Result<(), StatsError> {
    stream.write_all(bytes).await.map_err(io_error)?;
    stream.flush().await.map_err(io_error)
}

/// A failed read or write: a TLS refusal that arrives after the handshake
/// (TLS 1.3 servers refuse a client certificate with the first record) is
/// TLS, anything else a connection reset or closed.
pub fn io_error(error: std::io::Error) -> StatsError {
    let tls = (error.get_ref()).is_some_and(|inner| inner.is::<tokio_rustls::rustls::Error>());
    if tls {
        StatsError::Tls(error.to_string())
    } else {
        StatsError::Closed(error.to_string())
    }
}

/// Log in with `credentials` (each of their passwords in turn), after the
/// server answered a command with [`UNAUTHENTICATED`].
pub async fn log_in<S: AsyncBufRead + AsyncWrite + Unpin>(
    stream: &mut S,
    credentials: Option<&Credentials>,
) -> Result<(), StatsError> {
    let Some(c) = credentials else {
        return Err(StatsError::Auth(
            "the server requires authentication and no credentials are configured".into(),
        ));
    };
    let mut refused = String::new();
    for password in c.passwords() {
        let token = format!("{} {password}", c.username);
        let auth = format!("set auth 0 0 {}\r\n{token}\r\n", token.len());
        send(stream, auth.as_bytes()).await?;
        refused = read_line(stream).await?;
        if refused == "STORED" {
            return Ok(());
        }
    }
    Err(StatsError::Auth(refused))
}

/// One line without its terminator, at most [`MAX_LINE_BYTES`]: a server
/// streaming bytes without a newline costs a bounded buffer, not the
/// whole read timeout's worth of memory.
pub async fn read_line<S: AsyncBufRead + Unpin>(stream: &mut S) -> Result<String, StatsError> {
    let mut line = Vec::new();
    let n = (&mut *stream)
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', &mut line)
        .await
        .map_err(io_error)?;
    if n == 0 {
        return Err(StatsError::Closed("connection closed".into()));
    }
    if !line.ends_with(b"\n") {
        return Err(StatsError::Protocol(format!(
            "line longer than {MAX_LINE_BYTES} bytes or cut short"
        )));
    }
    let text = String::from_utf8_lossy(&line);
    Ok(text.trim_end_matches(['\r', '\n']).to_string())
}
