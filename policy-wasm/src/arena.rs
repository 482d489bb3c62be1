//! The allocator of the wasm build: a bump arena for the duration of one
//! `validate` call, the system allocator otherwise.
//!
//! Judging a request builds and drops hundreds of small strings and maps;
//! dlmalloc's bookkeeping for each of them costs more than the rules do. Inside
//! a call every allocation is a pointer bump, every free of an arena block is
//! nothing, and the next call starts over at the bottom of the arena. Sound
//! because nothing allocated during a call outlives it: the response buffer is
//! copied out by the host (`__guest_response`) before the call returns to it,
//! and the policy keeps no state between calls. A call that outgrows the arena
//! goes on with the system allocator, and the next call gets an arena twice the
//! size it needed.
//!
//! wasm32-wasip1 is single-threaded, so the state needs no synchronisation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;

/// The arena's size before any call has asked for more.
const INITIAL_CAPACITY: usize = 256 * 1024;
/// The largest arena kept between calls; beyond it, big requests use the system allocator.
const MAX_CAPACITY: usize = 16 * 1024 * 1024;

/// The global allocator: see the module documentation.
pub struct Arena(UnsafeCell<State>);

struct State {
    /// True while a call runs.
    active: bool,
    /// The arena block, `capacity` bytes from `start` (null before the first call).
    start: *mut u8,
    capacity: usize,
    /// Offset of the first free byte.
    used: usize,
    /// Bytes a call asked for beyond the arena, to size the next arena.
    overflow: usize,
}

// SAFETY: the wasm32-wasip1 target has a single thread.
unsafe impl Sync for Arena {}

impl Arena {
    /// An arena that allocates nothing until the first call.
    pub const fn new() -> Self {
        Arena(UnsafeCell::new(State {
            active: false,
            start: std::ptr::null_mut(),
            capacity: 0,
            used: 0,
            overflow: 0,
        }))
    }

    /// Run one call with the arena: everything `call` allocates and does not
    /// free is released when the next call starts.
    pub fn call<T>(&self, call: impl FnOnce() -> T) -> T {
        // SAFETY: single-threaded; no reference into the state outlives this block.
        unsafe { (*self.0.get()).begin() };
        let result = call();
        // SAFETY: as above.
        unsafe { (*self.0.get()).active = false };
        result
    }
}

impl Arena {
    /// True while a call runs and everything it allocated came from the
    /// arena: what it built can then be let go of without freeing it piece by
    /// piece, as the next call reclaims the whole arena.
    pub fn holds_the_call(&self) -> bool {
        // SAFETY: single-threaded; a read of plain fields.
        let state = unsafe { &*self.0.get() };
        state.active && state.overflow == 0
    }
}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

impl State {
    /// Start a call at the bottom of an arena big enough for the last one.
    unsafe fn begin(&mut self) {
        let wanted = (self.used + self.overflow)
            .next_power_of_two()
            .clamp(INITIAL_CAPACITY, MAX_CAPACITY);
        if wanted > self.capacity {
            // SAFETY: the old block holds nothing alive: the previous call is over.
            unsafe {
                if !self.start.is_null() {
                    System.dealloc(self.start, block_layout(self.capacity));
                }
                self.start = System.alloc(block_layout(wanted));
            }
            self.capacity = if self.start.is_null() { 0 } else { wanted };
        }
        self.used = 0;
        self.overflow = 0;
        self.active = true;
    }

    fn owns(&self, ptr: *mut u8) -> bool {
        let start = self.start as usize;
        (start..start + self.capacity).contains(&(ptr as usize))
    }

    /// A block from the arena, or null when it does not fit.
    fn bump(&mut self, layout: Layout) -> *mut u8 {
        let base = self.start as usize;
        let offset = (base + self.used).next_multiple_of(layout.align()) - base;
        match offset.checked_add(layout.size()) {
            Some(end) if end <= self.capacity => {
                self.used = end;
                // SAFETY: `offset..end` lies inside the arena block.
                unsafe { self.start.add(offset) }
            }
            _ => std::ptr::null_mut(),
        }
    }
}

fn block_layout(capacity: usize) -> Layout {
    Layout::from_size_align(capacity, 16).expect("arena capacity is a valid layout")
}

unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: single-threaded, and the state is not borrowed elsewhere.
        let state = unsafe { &mut *self.0.get() };
        if state.active {
            let ptr = state.bump(layout);
            if !ptr.is_null() {
                return ptr;
            }
            state.overflow += layout.size();
        }
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as in `alloc`.
        let state = unsafe { &mut *self.0.get() };
        if !state.owns(ptr) {
            // SAFETY: not an arena block, so the system allocator made it.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let state = unsafe { &mut *self.0.get() };
        if !state.owns(ptr) {
            // SAFETY: not an arena block, so the system allocator made it.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        let offset = ptr as usize - state.start as usize;
        // The last block grows in place.
        if state.active
            && offset + layout.size() == state.used
            && offset + new_size <= state.capacity
        {
            state.used = offset + new_size;
            return ptr;
        }
        // SAFETY: `new_size` with the block's alignment was valid for the caller.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: as in `alloc`.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are at least this long and do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn a_call_bumps_and_the_next_call_starts_over() {
        let arena = Arena::new();
        let first = arena.call(|| unsafe {
            let a = arena.alloc(layout(10, 1));
            let b = arena.alloc(layout(8, 8));
            assert!(arena.0.get().as_ref().unwrap().owns(a));
            assert_eq!(b as usize % 8, 0);
            assert_eq!(b as usize - a as usize, 16, "aligned right after `a`");
            arena.dealloc(a, layout(10, 1));
            a
        });
        let again = arena.call(|| unsafe { arena.alloc(layout(10, 1)) });
        assert_eq!(first, again, "the arena is reused from its bottom");
    }

    #[test]
    fn the_last_block_grows_in_place_and_others_move() {
        let arena = Arena::new();
        arena.call(|| unsafe {
            let a = arena.alloc(layout(4, 1));
            a.copy_from(b"abcd".as_ptr(), 4);
            let grown = arena.realloc(a, layout(4, 1), 64);
            assert_eq!(grown, a);
            let b = arena.alloc(layout(4, 1));
            let moved = arena.realloc(grown, layout(64, 1), 128);
            assert!(moved != grown && moved != b);
            assert_eq!(std::slice::from_raw_parts(moved, 4), b"abcd");
        });
    }

    #[test]
    fn outside_a_call_and_beyond_the_arena_the_system_allocates() {
        let arena = Arena::new();
        unsafe {
            let outside = arena.alloc(layout(32, 8));
            assert!(!(*arena.0.get()).owns(outside));
            arena.dealloc(outside, layout(32, 8));
        }
        let big = INITIAL_CAPACITY * 2;
        assert!(!arena.holds_the_call(), "no call runs");
        arena.call(|| unsafe {
            assert!(arena.holds_the_call());
            let beyond = arena.alloc(layout(big, 8));
            assert!(!arena.holds_the_call(), "a block came from the system");
            assert!(!beyond.is_null() && !(*arena.0.get()).owns(beyond));
            beyond.write_bytes(1, big);
            arena.dealloc(beyond, layout(big, 8));
        });
        arena.call(|| unsafe {
            let fits = arena.alloc(layout(big, 8));
            assert!(
                (*arena.0.get()).owns(fits),
                "the next arena is sized for the last call"
            );
        });
    }
}
