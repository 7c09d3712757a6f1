//! Huge pages for chunk regions (`poolalloc::HugePages`): on Linux with transparent huge pages
//! not `never`, regions mapped once the threshold's MiB of chunks were mapped are advised
//! (`MADV_HUGEPAGE`, shown as `hg` in `/proc/self/smaps`' `VmFlags`), earlier ones are not, and
//! `Off` advises none; `stats().huge_page_bytes` counts the advised units in use. One test
//! function: the setting is process-wide and the threshold counts every chunk the process mapped.

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

/// The `VmFlags` of the mapping that holds `addr`, from `/proc/self/smaps`.
#[cfg(target_os = "linux")]
fn vm_flags(addr: usize) -> String {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ')
            && let Some((lo, hi)) = range.split_once('-')
            && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        {
            inside = lo <= addr && addr < hi;
        } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
            return flags.trim().to_string();
        }
    }
    panic!("no mapping holds {addr:#x}");
}

#[test]
fn regions_past_the_threshold_ask_for_huge_pages() {
    // The threshold counts every chunk the process mapped (the test harness's own too): 8 MiB
    // past what is mapped now.
    let mapped_mib = (poolalloc::stats().chunks_mapped * (256 << 10)) >> 20;
    let threshold = poolalloc::HugePages::PastMiB(mapped_mib + 8);
    poolalloc::set_huge_pages(threshold);
    assert_eq!(poolalloc::huge_pages(), threshold);
    // 40 MiB of 1 KiB blocks: the first ones in regions mapped before the threshold, the last
    // ones past it.
    let blocks: Vec<Box<[u8; 1024]>> = (0..40 << 10).map(|i| Box::new([i as u8; 1024])).collect();
    #[cfg(target_os = "linux")]
    {
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if thp.contains("[never]") || thp.is_empty() {
            eprintln!("transparent huge pages are `never` (or absent) here: nothing is advised");
        } else if let Some(runner) = poolalloc_test_support::child::emulator() {
            // Under an emulator (qemu-user) /proc/self/smaps describes the emulator's mappings,
            // at host addresses, and its madvise may not reach the host.
            eprintln!("smaps not checked: the test runs under {runner}");
        } else {
            let first = &*blocks[0] as *const _ as usize;
            let last = &*blocks[blocks.len() - 1] as *const _ as usize;
            assert!(
                !vm_flags(first).split(' ').any(|f| f == "hg"),
                "{}",
                vm_flags(first)
            );
            assert!(
                vm_flags(last).split(' ').any(|f| f == "hg"),
                "{}",
                vm_flags(last)
            );
            // The source counts the advised 2 MiB units in use (its own count, no system call).
            let s = poolalloc::stats();
            assert!(s.huge_page_bytes >= 2 << 20, "{}", s.huge_page_bytes);
            assert!(s.huge_page_bytes % (2 << 20) == 0);
            assert!(s.huge_page_share() > 0.0 && s.huge_page_share() <= 1.0);
            poolalloc::set_huge_pages(poolalloc::HugePages::Off);
            let more: Vec<Box<[u8; 1024]>> = (0..16 << 10).map(|_| Box::new([1; 1024])).collect();
            let newest = &*more[more.len() - 1] as *const _ as usize;
            assert!(
                !vm_flags(newest).split(' ').any(|f| f == "hg"),
                "{}",
                vm_flags(newest)
            );
        }
    }
    assert!(
        blocks
            .iter()
            .enumerate()
            .all(|(i, b)| b.iter().all(|&x| x == i as u8))
    );
}
