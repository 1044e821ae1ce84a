//! The process's memory: glibc's allocator tuned so resident memory follows the budget's
//! count, and the default budget from the machine's memory.

/// glibc keeps what a thread frees in that thread's arena (up to 8 arenas per core)
/// and large blocks in its heaps, so parses that ran on different blocking threads
/// add up: 24 concurrent uploads of the 14 MB test profile peaked at 918 MB of resident
/// memory under a 512 MiB budget (545 MB with two arenas, 499 MB with two arenas and
/// blocks of 1 MiB and more mapped on their own, and so unmapped when freed). Call
/// before any other thread starts.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        const M_MMAP_THRESHOLD: i32 = -3;
        const M_ARENA_MAX: i32 = -8;
        // SAFETY: mallopt only sets glibc's allocator parameters; called before any
        // other thread exists, as glibc asks.
        unsafe {
            mallopt(M_ARENA_MAX, 2);
            mallopt(M_MMAP_THRESHOLD, 1 << 20);
        }
    }
}

/// A quarter of the machine's memory (from /proc/meminfo; 1 GiB where unknown).
pub fn default_total() -> u64 {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        text.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    total_kib.map_or(1 << 30, |kib| kib * 1024 / 4)
}
