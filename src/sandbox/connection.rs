//! Connections a handler can cut: the `drop_*` faults must look, to the caller, like a
//! provider that vanished mid-call — the connection closes and no HTTP response ever
//! arrives, not even a status line.
//!
//! Every accepted socket is wrapped in a [`KillableStream`] whose kill switch reaches the
//! handlers as `ConnectInfo<Connection>`. Once killed, every read and write on the socket
//! fails, so hyper abandons the connection before writing a byte of the response and
//! drops (closes) the socket.

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// A TCP listener whose connections can be cut from inside a handler.
pub(super) struct KillableListener(pub(super) TcpListener);

impl Listener for KillableListener {
    type Io = KillableStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        // axum's own loop for TcpListener retries (and backs off on) accept errors.
        let (inner, address) = Listener::accept(&mut self.0).await;
        let stream = KillableStream {
            inner,
            killed: Arc::default(),
        };
        (stream, address)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// An accepted socket with a kill switch.
pub(super) struct KillableStream {
    inner: TcpStream,
    killed: Arc<AtomicBool>,
}

/// The handler's side of a connection's kill switch.
#[derive(Clone)]
pub(super) struct Connection {
    killed: Arc<AtomicBool>,
}

impl Connection {
    /// Cuts the connection: whatever the handler answers is never written.
    pub(super) fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
    }
}

impl Connected<IncomingStream<'_, KillableListener>> for Connection {
    fn connect_info(stream: IncomingStream<'_, KillableListener>) -> Self {
        Self {
            killed: stream.io().killed.clone(),
        }
    }
}

impl KillableStream {
    fn check(&self) -> io::Result<()> {
        if self.killed.load(Ordering::SeqCst) {
            Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the sandbox dropped this connection (fault injection)",
            ))
        } else {
            Ok(())
        }
    }
}

impl AsyncRead for KillableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
