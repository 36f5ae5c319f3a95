//! `--tcp HOST:PORT`: a line-oriented TCP target. A request writes one line
//! (`--send`, default `ping`) on a pooled connection and is complete when a
//! whole line comes back — an echo server, a Redis `PING` (`+PONG`), or any
//! service that answers a line with a line. It is also the known target the
//! load driver's own timing is checked against: a local echo server whose
//! service time is set by the test.
use std::{
    net::{SocketAddr, ToSocketAddrs},
    sync::Arc,
};

use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::TcpStream,
};

use super::{
    clock::{Clock, ClockKind},
    pool::Pool,
    targets::{ConnectFuture, RequestError, RequestFuture, Target, TargetError, TargetFactory},
};

/// Default most connections of the pool.
pub(crate) const DEFAULT_POOL: usize = 16;

/// The validated `--tcp ADDR [--send LINE] [--pool-size N]`.
#[derive(Debug, Clone)]
pub struct TcpFactory {
    addr: SocketAddr,
    line: String,
    pool_max: usize,
}

impl TcpFactory {
    pub fn new(addr: &str, line: Option<&str>, pool_max: Option<usize>) -> Result<Self, String> {
        let addr = addr
            .to_socket_addrs()
            .map_err(|e| format!("--tcp {addr}: {e}; give HOST:PORT, e.g. 127.0.0.1:7000"))?
            .next()
            .ok_or_else(|| format!("--tcp {addr}: no address; give HOST:PORT"))?;
        let line = line.unwrap_or("ping");
        if line.contains('\n') {
            return Err("--send must be one line (the newline is added)".into());
        }
        if pool_max == Some(0) {
            return Err("--pool-size must be at least 1".into());
        }
        Ok(Self {
            addr,
            line: format!("{line}\n"),
            pool_max: pool_max.unwrap_or(DEFAULT_POOL),
        })
    }
}

type Conn = BufReader<TcpStream>;

async fn connect_one(addr: SocketAddr) -> Result<Conn, String> {
    let s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(BufReader::new(s))
}

impl TargetFactory for TcpFactory {
    fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "tcp",
            "addr": self.addr.to_string(),
            "send": self.line.trim_end_matches('\n'),
            "pool_max": self.pool_max,
        })
    }

    fn summary(&self) -> String {
        format!(
            "TCP {}: a line `{}` per request, answered by a line (pool of up to {} connections)",
            self.addr,
            self.line.trim_end_matches('\n'),
            self.pool_max
        )
    }

    fn supports_virtual_clock(&self) -> bool {
        false
    }

    fn connect<'a>(&'a self, clock: &'a Clock, concurrency: usize) -> ConnectFuture<'a> {
        Box::pin(async move {
            if clock.kind() != ClockKind::Real {
                return Err(TargetError::WrongClock {
                    target: "tcp",
                    clock: clock.kind(),
                });
            }
            let size = concurrency.clamp(1, self.pool_max);
            let pool = Pool::connect(size, || connect_one(self.addr))
                .await
                .map_err(|reason| TargetError::Connect {
                    target: self.addr.to_string(),
                    reason,
                })?;
            Ok(Arc::new(TcpTarget {
                addr: self.addr,
                line: Arc::from(self.line.as_bytes()),
                pool,
            }) as Arc<dyn Target>)
        })
    }
}

struct TcpTarget {
    addr: SocketAddr,
    line: Arc<[u8]>,
    pool: Pool<Conn>,
}

fn io_error(e: std::io::Error) -> RequestError {
    RequestError::Other {
        kind: "tcp_io",
        message: e.to_string(),
    }
}

impl Target for TcpTarget {
    fn call(&self) -> RequestFuture {
        let (addr, line, lease) = (self.addr, self.line.clone(), self.pool.take());
        Box::pin(async move {
            let lease = lease.await.map_err(|e| RequestError::Other {
                kind: "tcp_pool",
                message: e.to_string(),
            })?;
            // A connection lost earlier is replaced here.
            let mut conn = match lease.pooled() {
                Some(c) => c,
                None => connect_one(addr)
                    .await
                    .map_err(|message| RequestError::Other {
                        kind: "tcp_connect",
                        message,
                    })?,
            };
            conn.get_mut().write_all(&line).await.map_err(io_error)?;
            let mut answer = Vec::new();
            let n = conn
                .read_until(b'\n', &mut answer)
                .await
                .map_err(io_error)?;
            if n == 0 || answer.last() != Some(&b'\n') {
                return Err(RequestError::Other {
                    kind: "tcp_closed",
                    message: "the server closed the connection before answering".into(),
                });
            }
            // Only a connection whose answer was read whole goes back: an
            // abandoned request (timeout) drops its connection.
            lease.put_back(conn);
            Ok(())
        })
    }
}
