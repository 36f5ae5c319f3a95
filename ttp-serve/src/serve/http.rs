//! serve's HTTP server: HTTP/1.1 by hyper on a single-threaded tokio
//! runtime of its own thread, plain or behind TLS (rustls, from
//! `--web-config`), with basic authentication in front of every answer.
//! The answers themselves are serve's ([`Answer`]). docs/serve.md, "Why
//! these crates" and "TLS and basic auth".
use std::{convert::Infallible, net::TcpListener, sync::Arc, thread::JoinHandle, time::Duration};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode, body::Incoming, header, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{io::AsyncWriteExt, sync::Notify};

use super::web::WebConfig;

/// One answer: status, content type, body.
pub(crate) struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

/// What serve answers to a GET of `path` with this `Accept` header.
pub(crate) type Answer = dyn Fn(&str, Option<&str>) -> Reply + Send + Sync;

/// Connections served at once; more wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 64;
/// Time a client has to finish the TLS handshake and to send each
/// request's headers.
const HANDSHAKE_AND_HEADERS: Duration = Duration::from_secs(10);
/// A connection is closed after this long (a scraper reconnects): no
/// client keeps a thread's memory forever.
const CONNECTION_LIFE: Duration = Duration::from_secs(300);

/// The server thread; [`Server::stop`] ends it and closes the socket.
pub(crate) struct Server {
    stop: Arc<Notify>,
    thread: JoinHandle<()>,
}

impl Server {
    pub(crate) fn start(
        listener: TcpListener,
        web: WebConfig,
        answer: Arc<Answer>,
    ) -> anyhow::Result<Self> {
        listener.set_nonblocking(true)?;
        let stop = Arc::new(Notify::new());
        let stopped = Arc::clone(&stop);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("ttp-http".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            eprintln!("ttp: the HTTP server cannot use its socket: {e}");
                            return;
                        }
                    };
                    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
                    loop {
                        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
                            return;
                        };
                        let (tcp, _) = tokio::select! {
                            () = stopped.notified() => return,
                            r = listener.accept() => match r {
                                Ok(c) => c,
                                // Out of fds and the like: try again shortly.
                                Err(_) => {
                                    tokio::time::sleep(Duration::from_millis(100)).await;
                                    continue;
                                }
                            },
                        };
                        let (web, answer) = (web.clone(), Arc::clone(&answer));
                        tokio::spawn(async move {
                            let _ =
                                tokio::time::timeout(CONNECTION_LIFE, connection(tcp, web, answer))
                                    .await;
                            drop(permit);
                        });
                    }
                });
                // Dropping the runtime here ends every connection task.
            })?;
        Ok(Self { stop, thread })
    }

    /// Stops accepting, ends the connections, releases the port.
    pub(crate) fn stop(self) {
        self.stop.notify_one();
        let _ = self.thread.join();
    }
}

/// First byte of a TLS record carrying a handshake (RFC 8446, 5.1).
const TLS_HANDSHAKE: u8 = 0x16;

async fn connection(tcp: tokio::net::TcpStream, web: WebConfig, answer: Arc<Answer>) {
    let _ = tcp.set_nodelay(true);
    let service = {
        let users = web.users.clone();
        service_fn(move |req: Request<Incoming>| {
            let reply = respond(&req, users.as_deref(), &*answer);
            async move { Ok::<_, Infallible>(reply) }
        })
    };
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HANDSHAKE_AND_HEADERS);
    match web.tls {
        None => {
            let _ = http.serve_connection(TokioIo::new(tcp), service).await;
        }
        Some(tls) => {
            // A plain HTTP request on the TLS port gets a plain answer
            // saying so (as Go's servers do), not a dropped connection.
            let mut first = [0u8; 1];
            let peeked = tokio::time::timeout(HANDSHAKE_AND_HEADERS, tcp.peek(&mut first)).await;
            if !matches!(peeked, Ok(Ok(1))) {
                return;
            }
            if first[0] != TLS_HANDSHAKE {
                let mut tcp = tcp;
                let _ = tcp
                    .write_all(b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
                    .await;
                return;
            }
            let acceptor = tokio_rustls::TlsAcceptor::from(tls);
            let Ok(Ok(stream)) =
                tokio::time::timeout(HANDSHAKE_AND_HEADERS, acceptor.accept(tcp)).await
            else {
                return;
            };
            let _ = http.serve_connection(TokioIo::new(stream), service).await;
        }
    }
}

fn respond(
    req: &Request<Incoming>,
    users: Option<&super::web::Users>,
    answer: &Answer,
) -> Response<Full<Bytes>> {
    if let Some(users) = users {
        let auth = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        if !users.allows(auth) {
            let mut r = reply(Reply {
                status: 401,
                content_type: "text/plain; charset=utf-8",
                body: "Unauthorized\n".into(),
            });
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Basic realm=\"ttp-ebpf\""),
            );
            return r;
        }
    }
    reply(if req.method() == hyper::Method::GET {
        let accept = req
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok());
        answer(req.uri().path(), accept)
    } else {
        Reply {
            status: 405,
            content_type: "text/plain; charset=utf-8",
            body: "only GET is answered\n".into(),
        }
    })
}

fn reply(r: Reply) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(r.body)));
    *resp.status_mut() =
        StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(r.content_type),
    );
    resp
}
