//! The connection pool of the network targets (`--tcp`, `--postgres`): as
//! many connections as the phase's concurrency (capped by `--pool-size`),
//! made before the phase starts, so a wrong address fails before anything
//! is measured. A request waits for a permit (requests beyond the pool wait
//! for a connection, their latency still counted from their intended
//! start), takes a pooled connection or — when one was lost — makes a new
//! one, and puts it back only when its answer was read whole: a request
//! abandoned mid-way (a timeout) or broken drops its connection.
use std::{
    future::Future,
    sync::{Arc, Mutex},
};

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

pub struct Pool<C> {
    free: Arc<Mutex<Vec<C>>>,
    permits: Arc<Semaphore>,
}

impl<C> Pool<C> {
    /// `size` connections (at least 1) made one after the other by
    /// `connect`; the first error is returned.
    pub async fn connect<F, Fut, E>(size: usize, mut connect: F) -> Result<Self, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<C, E>>,
    {
        let size = size.max(1);
        let mut conns = Vec::with_capacity(size);
        for _ in 0..size {
            conns.push(connect().await?);
        }
        Ok(Self {
            free: Arc::new(Mutex::new(conns)),
            permits: Arc::new(Semaphore::new(size)),
        })
    }

    /// Waits for a permit; the lease holds it until dropped.
    pub fn take(&self) -> impl Future<Output = Result<Lease<C>, AcquireError>> + Send + 'static
    where
        C: Send + 'static,
    {
        let (free, permits) = (self.free.clone(), self.permits.clone());
        async move {
            let permit = permits.acquire_owned().await?;
            Ok(Lease {
                _permit: permit,
                free,
            })
        }
    }
}

/// A request's right to one connection of the pool.
pub struct Lease<C> {
    _permit: OwnedSemaphorePermit,
    free: Arc<Mutex<Vec<C>>>,
}

impl<C> Lease<C> {
    /// A pooled connection, or `None` when one was lost earlier (the caller
    /// makes a new one).
    pub fn pooled(&self) -> Option<C> {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    /// Returns a connection whose request completed whole.
    pub fn put_back(self, conn: C) {
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(conn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two connections, three requests: the third waits for a permit; a
    /// connection not put back (a broken request) leaves the next lease
    /// without a pooled one. Catches a pool that hands one connection to
    /// two requests or forgets a lost one.
    #[tokio::test]
    async fn leases_share_the_pool_and_lost_connections_are_not_reused() {
        let mut n = 0;
        let pool = Pool::connect(2, || {
            n += 1;
            let id = n;
            async move { Ok::<u32, ()>(id) }
        })
        .await
        .unwrap();
        let a = pool.take().await.unwrap();
        let b = pool.take().await.unwrap();
        let (ca, cb) = (a.pooled().unwrap(), b.pooled().unwrap());
        assert_ne!(ca, cb);
        use futures_util::FutureExt;
        let mut third = std::pin::pin!(pool.take());
        assert!(
            third.as_mut().now_or_never().is_none(),
            "a third lease while two are out"
        );
        a.put_back(ca);
        drop(b); // its connection broke: not put back
        let c = third.await.unwrap();
        assert_eq!(c.pooled(), Some(ca));
        let d = pool.take().await.unwrap();
        assert_eq!(d.pooled(), None, "the lost connection is not in the pool");
    }
}
