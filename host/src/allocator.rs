//! The binary's memory allocator: glibc's, and mimalloc once `hookhost serve` starts.
//!
//! Measured on the `daemon` bench (interleaved A/B runs): mimalloc gives `hookhost serve`
//! 15–50% more events a second than glibc, whose allocator spent ~15% of its CPU
//! (fastbin consolidation included). But a process that allocates with mimalloc from
//! its start pays ~50 more page faults (a fresh page per size class), 0.2 ms, and the
//! agent starts a `hookhost dispatch` process per event. So the switch happens when
//! `serve` starts ([`use_mimalloc`]); blocks allocated before it stay glibc's and are
//! freed there ([`mi_is_in_heap_region`] tells whose a block is). The dispatch daemon
//! keeps glibc: it answers one agent's events one at a time, and with mimalloc its
//! answers came no sooner.
//!
//! mimalloc is built as version 2 without transparent huge pages (version 3, and huge
//! pages, cost 0.3–0.6 ms more per process start, zeroing huge pages it barely uses),
//! and without its load-time constructor (`.cargo/config.toml`), which set it up in every
//! process, used or not (0.1 ms); it sets itself up on its first allocation instead.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

use libmimalloc_sys::mi_is_in_heap_region;
use mimalloc::MiMalloc;

/// glibc until [`use_mimalloc`], mimalloc after.
pub struct Allocator;

/// Set once, never cleared: a block from mimalloc must always be freed there.
static MIMALLOC: AtomicBool = AtomicBool::new(false);

/// From now on, allocates with mimalloc. Called when `hookhost serve` starts, before it
/// starts any thread. (A thread that has seen a block allocated after the switch has
/// also seen the switch, so it frees that block in mimalloc: reads of one atomic are
/// coherent with the order in which blocks are handed between threads.)
pub fn use_mimalloc() {
    MIMALLOC.store(true, Ordering::Relaxed);
}

fn switched() -> bool {
    MIMALLOC.load(Ordering::Relaxed)
}

/// Whether `ptr` came from mimalloc: only possible after the switch.
fn from_mimalloc(ptr: *mut u8) -> bool {
    // SAFETY: mi_is_in_heap_region only reads mimalloc's segment map; any pointer value
    // may be asked about.
    switched() && unsafe { mi_is_in_heap_region(ptr.cast()) }
}

/// The allocator of new blocks.
fn current() -> &'static dyn GlobalAlloc {
    if switched() { &MiMalloc } else { &System }
}

/// The allocator that made the block at `ptr`.
fn owner(ptr: *mut u8) -> &'static dyn GlobalAlloc {
    if from_mimalloc(ptr) {
        &MiMalloc
    } else {
        &System
    }
}

// SAFETY: each block is freed or resized by the allocator that made it (`owner`), and
// both allocators uphold `GlobalAlloc`'s contract on their own blocks.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { current().alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { current().alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` goes back to the allocator that made it.
        unsafe { owner(ptr).dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` is resized by the allocator that made it when that is the one of
        // new blocks; a glibc block after the switch moves into a new mimalloc block of
        // the new size and is freed in glibc. `new_size` with `layout`'s alignment is a
        // valid layout (the caller's guarantee).
        unsafe {
            if !switched() || from_mimalloc(ptr) {
                return current().realloc(ptr, layout, new_size);
            }
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let new = MiMalloc.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                System.dealloc(ptr, layout);
            }
            new
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of both allocators, made before and after the switch, are told apart, and
    /// a glibc block grown after the switch keeps its bytes. (This switches the whole
    /// test process, whose allocator this is too, while other tests run: what `serve`
    /// does with blocks made before it switched.)
    #[test]
    fn blocks_go_back_to_the_allocator_that_made_them() {
        let layout = Layout::from_size_align(24, 8).unwrap();
        // SAFETY: layouts are non-zero; every block is freed once, by `Allocator`.
        unsafe {
            let before = Allocator.alloc(layout);
            before.write_bytes(7, 24);
            assert!(!from_mimalloc(before));
            use_mimalloc();
            assert!(!from_mimalloc(before), "a glibc block stays glibc's");
            let after = Allocator.alloc(layout);
            assert!(from_mimalloc(after));
            let grown = Allocator.realloc(before, layout, 4096);
            assert!(
                from_mimalloc(grown),
                "a grown glibc block moves to mimalloc"
            );
            assert!(
                std::slice::from_raw_parts(grown, 24)
                    .iter()
                    .all(|&b| b == 7)
            );
            let big = Layout::from_size_align(4096, 8).unwrap();
            Allocator.dealloc(grown, big);
            Allocator.dealloc(after, layout);
            let zeroed = Allocator.alloc_zeroed(big);
            assert!(
                std::slice::from_raw_parts(zeroed, 4096)
                    .iter()
                    .all(|&b| b == 0)
            );
            Allocator.dealloc(zeroed, big);
        }
    }
}
