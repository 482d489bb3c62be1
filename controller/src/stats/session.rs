//! A session with one memcached for commands beyond `stats` (the key copies
//! of [`crate::handover`]): over TLS when it serves TLS, logged in when it
//! asks, buffered both ways, each line bounded as `stats`'s are.

use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufStream};

use crate::stats::client::StatsClient;
use crate::stats::wire::{StatsError, UNAUTHENTICATED, connect, io_error, log_in, read_line, send};

/// A byte stream both ways: TCP or TLS.
pub trait Duplex: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Duplex for T {}

/// A logged-in connection to one memcached.
pub struct Session {
    stream: BufStream<Box<dyn Duplex>>,
}

/// The longest value a session reads: memcached's largest item (`-I 1024m`).
const MAX_VALUE_BYTES: usize = 1024 * 1024 * 1024;

impl StatsClient {
    /// A session with the memcached at `addr`: `version` first, the
    /// credentials only when it answers that it requires authentication (a
    /// meta command before logging in closes the connection of a recent
    /// memcached).
    pub async fn session(&self, addr: SocketAddr) -> Result<Session, StatsError> {
        let tcp = connect(addr).await?;
        let stream: Box<dyn Duplex> = match &self.tls {
            Some(tls) => {
                Box::new((tls.handshake(tcp).await).map_err(|e| StatsError::Tls(e.to_string()))?)
            }
            None => Box::new(tcp),
        };
        let mut stream = BufStream::new(stream);
        send(&mut stream, b"version\r\n").await?;
        match read_line(&mut stream).await?.as_str() {
            UNAUTHENTICATED => log_in(&mut stream, self.credentials.as_ref()).await?,
            version if version.starts_with("VERSION ") => {}
            other => return Err(StatsError::Protocol(format!("version answered {other:?}"))),
        }
        Ok(Session { stream })
    }
}

impl Session {
    /// Queue `bytes` to send; [`Session::flush`] sends them.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), StatsError> {
        self.stream.write_all(bytes).await.map_err(io_error)
    }

    /// Send what was queued.
    pub async fn flush(&mut self) -> Result<(), StatsError> {
        self.stream.flush().await.map_err(io_error)
    }

    /// The next line, without its terminator.
    pub async fn line(&mut self) -> Result<String, StatsError> {
        read_line(&mut self.stream).await
    }

    /// A data block of `len` bytes and its `\r\n`, `len` at most
    /// memcached's largest item.
    pub async fn data(&mut self, len: usize) -> Result<Vec<u8>, StatsError> {
        if len > MAX_VALUE_BYTES {
            return Err(StatsError::Protocol(format!("a value of {len} bytes")));
        }
        let mut data = vec![0; len + 2];
        self.stream.read_exact(&mut data).await.map_err(io_error)?;
        if !data.ends_with(b"\r\n") {
            return Err(StatsError::Protocol(
                "a data block without its \\r\\n".into(),
            ));
        }
        data.truncate(len);
        Ok(data)
    }
}
