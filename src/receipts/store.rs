//! The receipts database and its writer.
//!
//! Durability before the answer, at the cost of one SQLite commit per batch of calls. A call
//! queues its receipt, yields once (when other calls are under way) so that the calls ready on its
//! worker thread queue theirs too, and then commits the queue itself, unless another call is
//! committing already, in which case that call's commit (or the next one) carries this receipt
//! too: under load one commit covers many calls (group commit), and a lone call commits at once,
//! with no hand-over to another thread and back. In WAL mode a committed transaction is in the
//! database's files before anyone is answered, so it survives any crash of the gateway (SIGKILL
//! included).
//!
//! With `receipts.fsync: true` (`synchronous=FULL`) every commit is also flushed to stable
//! storage, surviving power loss; such commits take milliseconds, so they run on the writer thread
//! instead, never on the async runtime. The writer thread also applies the retention.
//!
//! With `receipts.url` the receipts go to PostgreSQL ([`super::postgres`]) instead: every commit
//! is a network round trip, so all of them run on the writer thread, which commits whatever queued
//! meanwhile in one statement (group commit, as above).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::postgres::PgWriter;
use super::{Call, Receipt, ReceiptError, Settings};
use backend::Backend;
pub use file::open_for_reading;
pub(in crate::receipts) use file::open_for_writing;

/// At most this many receipts per transaction, so one commit never holds callers for long.
const MAX_BATCH: usize = 1024;
/// How often an idle writer thread looks at the queue (a safety net: callers commit themselves).
const IDLE_WAKE: Duration = Duration::from_secs(1);

/// A receipt waiting for its commit, and who to tell once it is committed.
struct Pending {
    receipt: Receipt,
    committed: oneshot::Sender<bool>,
}

/// The gateway's handle on the receipts database. Cheap to share.
pub struct ReceiptLog {
    shared: Arc<Shared>,
    /// The SQLite file or the PostgreSQL URL (without password), for logs.
    location: String,
    store_arguments: bool,
    /// Commits flush to stable storage (`fsync`) or go over the network (PostgreSQL): leave them
    /// to the writer thread.
    writer_commits: bool,
    /// Joined on drop, so receipts queued last are committed before the process exits.
    thread: Option<std::thread::JoinHandle<()>>,
    /// Calls under way ([`ReceiptLog::call_started`]): a receipt waits for company only when
    /// there may be some.
    calls_under_way: AtomicUsize,
}

/// A call under way, from [`ReceiptLog::call_started`] until dropped.
pub struct CallUnderWay<'a>(&'a AtomicUsize);

impl Drop for CallUnderWay<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the callers and the writer thread share.
struct Shared {
    /// Receipts not committed yet.
    queue: Mutex<Vec<Pending>>,
    /// Whoever holds the connection commits the queue.
    writer: Mutex<Writer>,
    /// Transactions committed (tests count them to see receipts share commits).
    #[cfg(test)]
    commits: std::sync::atomic::AtomicU64,
    /// Set once the writer thread first waits for work (tests wait for it instead of sleeping).
    #[cfg(test)]
    writer_waiting: AtomicBool,
    /// Wakes the writer thread: receipts to commit (every one in `fsync` mode; what a caller's
    /// commit left in the queue otherwise), the log closing.
    wake: Condvar,
    closed: AtomicBool,
}

impl std::fmt::Debug for ReceiptLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiptLog")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl ReceiptLog {
    /// Opens (creating it and its folder if missing) the database of `settings` and starts the
    /// writer thread. Fails at start-up rather than serving calls that could leave no receipt.
    pub fn open(settings: &Settings) -> Result<ReceiptLog, ReceiptError> {
        let (backend, location) = match &settings.url {
            Some(url) => {
                let writer = PgWriter::open(url)?;
                let location = writer.location().to_string();
                (Backend::Postgres(Box::new(writer)), location)
            }
            None => (
                Backend::Sqlite(open_for_writing(&settings.path, settings.fsync)?),
                settings.path.display().to_string(),
            ),
        };
        let shared = Arc::new(Shared {
            queue: Mutex::new(Vec::new()),
            writer: Mutex::new(Writer {
                backend,
                location: location.clone(),
            }),
            wake: Condvar::new(),
            closed: AtomicBool::new(false),
            #[cfg(test)]
            commits: std::sync::atomic::AtomicU64::new(0),
            #[cfg(test)]
            writer_waiting: AtomicBool::new(false),
        });
        let background = Background {
            shared: shared.clone(),
            retention: settings.retention,
        };
        let thread = std::thread::Builder::new()
            .name("receipts-writer".into())
            .spawn(move || background.run())
            .map_err(ReceiptError::Thread)?;
        tracing::info!(%location, "receipts database open");
        Ok(ReceiptLog {
            shared,
            writer_commits: settings.fsync || settings.url.is_some(),
            location,
            store_arguments: settings.store_arguments,
            thread: Some(thread),
            calls_under_way: AtomicUsize::new(0),
        })
    }

    /// Counts a call as under way until the guard is dropped. Calls hold it from their start to
    /// their answer, so that [`record`](Self::record) knows whether other receipts may be about
    /// to join its commit.
    pub fn call_started(&self) -> CallUnderWay<'_> {
        self.calls_under_way.fetch_add(1, Ordering::Relaxed);
        CallUnderWay(&self.calls_under_way)
    }

    /// Writes the receipt of `call` and returns once it is committed to disk, with its id.
    ///
    /// If it cannot be written, that is logged as an error (with the receipt's id, caller, tool
    /// and outcome, never its arguments) and the call is still answered: refusing answers would
    /// not bring the receipt back, and the upstream may already have acted. Returns `None` then.
    pub async fn record(&self, call: &Call<'_>) -> Option<String> {
        let receipt = Receipt::of(call, self.store_arguments);
        let id = receipt.id.clone();
        let (committed, done) = oneshot::channel();
        self.shared.queue().push(Pending { receipt, committed });
        if self.writer_commits {
            self.shared.wake.notify_one();
        } else {
            // With other calls under way, those ready on this worker queue their receipts before
            // anyone commits: at 16 clients commits went from ~1.1 receipts each to ~3 and the
            // gateway's CPU per call down 10-15% (BENCHMARKS.md). A lone call commits at once:
            // the trip through the scheduler cost it ~10% more CPU.
            if self.calls_under_way.load(Ordering::Relaxed) > 1 {
                tokio::task::yield_now().await;
            }
            // A short blocking section (one WAL append, no flush): cheaper than a trip to
            // another thread and back, and it is what the answer waits for anyway.
            self.shared.commit_queued();
        }
        if done.await == Ok(true) {
            return Some(id);
        }
        tracing::error!(
            receipt = %id,
            caller = %call.caller,
            tool = %call.tool,
            outcome = %call.outcome,
            location = %self.location,
            "RECEIPT NOT WRITTEN: this call is answered but has no receipt"
        );
        None
    }
}

impl Drop for ReceiptLog {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        drop(self.shared.queue());
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Vec<Pending>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A caller's commit: one batch, which holds its own receipt, unless another thread holds
    /// the writer (that thread commits what we queued, or leaves it to the writer thread).
    /// Whatever queued meanwhile is left to the writer thread, so no call keeps committing for
    /// others under load.
    fn commit_queued(&self) {
        let mut writer = match self.writer.try_lock() {
            Ok(writer) => writer,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        self.commit_batch(&mut writer);
        drop(writer);
        // Receipts queued while we held the writer found it busy: wake the writer thread.
        if !self.queue().is_empty() {
            self.wake.notify_one();
        }
    }

    /// The writer thread's commit: waits for the writer and commits until the queue is empty.
    fn commit_all(&self) {
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        self.commit_while_holding(&mut writer);
    }

    /// Commits up to [`MAX_BATCH`] queued receipts; false when there were none.
    fn commit_batch(&self, writer: &mut Writer) -> bool {
        let batch = {
            let mut queue = self.queue();
            let n = queue.len().min(MAX_BATCH);
            queue.drain(..n).collect::<Vec<_>>()
        };
        let any = !batch.is_empty();
        if any {
            #[cfg(test)]
            self.commits.fetch_add(1, Ordering::Relaxed);
            writer.commit(batch);
        }
        any
    }

    /// Commits batches until the queue is empty.
    fn commit_while_holding(&self, writer: &mut Writer) {
        while self.commit_batch(writer) {}
    }
}

/// The connection that writes receipts. SQLite calls block: whoever holds it is off the async
/// runtime's cooperative schedule for one commit.
struct Writer {
    backend: Backend,
    location: String,
}

/// The writer thread: commits in `fsync` mode and what callers' commits left over, and the
/// retention.
struct Background {
    shared: Arc<Shared>,
    retention: Option<Duration>,
}

impl Background {
    /// Runs until the [`ReceiptLog`] is dropped (which waits for it), then commits what is left.
    fn run(self) {
        let mut next_prune = Instant::now();
        loop {
            let due = match self.retention {
                Some(_) => next_prune,
                None => Instant::now() + IDLE_WAKE,
            };
            self.wait_until(due);
            self.shared.commit_all();
            if self.shared.closed.load(Ordering::Acquire) {
                return;
            }
            if let Some(retention) = self.retention
                && Instant::now() >= next_prune
            {
                let mut writer = self.shared.writer.lock().unwrap_or_else(|p| p.into_inner());
                next_prune = Instant::now() + writer.prune(retention);
                // Receipts queued during the prune found the writer busy.
                self.shared.commit_while_holding(&mut writer);
            }
        }
    }

    /// Sleeps until `due`, the log closing, or receipts to commit.
    fn wait_until(&self, due: Instant) {
        let mut queue = self.shared.queue();
        loop {
            let now = Instant::now();
            if now >= due || self.shared.closed.load(Ordering::Acquire) || !queue.is_empty() {
                return;
            }
            #[cfg(test)]
            self.shared.writer_waiting.store(true, Ordering::Release);
            queue = match self.shared.wake.wait_timeout(queue, due - now) {
                Ok((queue, _)) => queue,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

impl Writer {
    /// Writes `batch` in one transaction and tells each caller whether its receipt is on disk.
    /// If the batch fails, each receipt is retried alone, so one bad row cannot cost the others.
    fn commit(&mut self, batch: Vec<Pending>) {
        let receipts: Vec<&Receipt> = batch.iter().map(|p| &p.receipt).collect();
        let result = self.backend.insert(&receipts);
        if let Err(e) = &result {
            tracing::error!(
                location = %self.location,
                receipts = batch.len(),
                error = %e,
                "cannot write receipts{}",
                if batch.len() > 1 { "; retrying them one by one" } else { "" }
            );
        }
        if result.is_ok() || batch.len() == 1 {
            let ok = result.is_ok();
            for pending in batch {
                let _ = pending.committed.send(ok);
            }
            return;
        }
        for pending in batch {
            let ok = self.backend.insert(&[&pending.receipt]).is_ok();
            let _ = pending.committed.send(ok);
        }
    }

    /// Deletes one chunk of receipts older than `retention`; returns when to prune next: at once
    /// if there may be more, else after a tenth of the retention (between 1 s and 10 min).
    fn prune(&mut self, retention: Duration) -> Duration {
        match self.backend.prune(retention) {
            Ok(n) if n >= backend::PRUNE_CHUNK => Duration::ZERO,
            Ok(n) => {
                if n > 0 {
                    tracing::info!(deleted = n, "pruned receipts older than the retention");
                }
                (retention / 10).clamp(Duration::from_secs(1), Duration::from_secs(600))
            }
            Err(e) => {
                tracing::error!(location = %self.location, error = %e, "cannot prune old receipts");
                Duration::from_secs(60)
            }
        }
    }
}

mod backend;
mod file;
#[cfg(test)]
mod tests;
