//! The epoch ticker: the one thread that advances the engine's epoch, which every wasm
//! call's deadline is checked against. Every instantiation and call holds it running
//! ([`super::limits::Limits::bound`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use wasmtime::Engine;

/// Epoch tick: the granularity of wall-clock deadlines.
pub(super) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// How often the epoch advances while no call runs: once a second, so that wasm run
/// outside [`EpochTicker::running`] (only the meter's unit tests do) would still meet
/// its deadline, late.
const IDLE_TICK: Duration = Duration::from_secs(1);

/// The thread that advances the engine's epoch every [`EPOCH_TICK`] while calls run or
/// start (each [`super::limits::Limits::bound`] holds a [`Running`]), and every
/// [`IDLE_TICK`] once a whole tick went by with none: an idle daemon is not woken 200
/// times a second, and a busy one does not wake the ticker for each event. It stops
/// when dropped.
pub(super) struct EpochTicker {
    shared: Arc<TickerShared>,
    thread: std::thread::Thread,
}

struct TickerShared {
    stop: AtomicBool,
    /// Calls running now.
    running: AtomicUsize,
    /// Calls started so far: a call that started and ended within one tick keeps the
    /// ticker awake as one still running does.
    started: AtomicUsize,
}

/// A call running: the ticker ticks every [`EPOCH_TICK`] until the last one is dropped.
pub(super) struct Running<'a>(&'a TickerShared);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

impl EpochTicker {
    /// Starts the ticker of `engine`.
    pub(super) fn start(engine: &Engine) -> Result<EpochTicker, String> {
        let shared = Arc::new(TickerShared {
            stop: AtomicBool::new(false),
            running: AtomicUsize::new(0),
            started: AtomicUsize::new(0),
        });
        let (engine, ticking) = (engine.clone(), shared.clone());
        let handle = std::thread::Builder::new()
            .name("hookhost-epoch".into())
            .spawn(move || ticking.tick(&engine))
            .map_err(|e| format!("cannot start the epoch ticker: {e}"))?;
        Ok(EpochTicker {
            shared,
            thread: handle.thread().clone(),
        })
    }

    /// Marks a call running until the guard is dropped, waking the ticker if it idled.
    pub(super) fn running(&self) -> Running<'_> {
        self.shared.started.fetch_add(1, Ordering::AcqRel);
        if self.shared.running.fetch_add(1, Ordering::AcqRel) == 0 {
            self.thread.unpark();
        }
        Running(&self.shared)
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

impl TickerShared {
    /// Whether no call runs and none started since `seen` calls had.
    fn idle(&self, seen: usize) -> bool {
        self.running.load(Ordering::Acquire) == 0 && self.started.load(Ordering::Acquire) == seen
    }

    fn tick(&self, engine: &Engine) {
        let mut seen = self.started.load(Ordering::Acquire);
        while !self.stop.load(Ordering::Acquire) {
            if self.idle(seen) {
                // `unpark` before this `park_timeout` makes it return at once.
                std::thread::park_timeout(IDLE_TICK);
                if self.idle(seen) {
                    engine.increment_epoch();
                }
                continue;
            }
            // While calls run or start, ticks follow real time: a late wake-up catches
            // up, so deadlines are not stretched by scheduling delays.
            let start = Instant::now();
            let mut ticks: u128 = 0;
            loop {
                seen = self.started.load(Ordering::Acquire);
                std::thread::sleep(EPOCH_TICK);
                let due = start.elapsed().as_nanos() / EPOCH_TICK.as_nanos();
                while ticks < due {
                    engine.increment_epoch();
                    ticks += 1;
                }
                if self.idle(seen) || self.stop.load(Ordering::Acquire) {
                    break;
                }
            }
        }
    }
}
